"""How a search ranks and scores: relevance and threshold, a hypothetical passage, lexical matches, the
chunk's best window, a cross-encoder, the first stage's levels, and quotes."""

from __future__ import annotations

import numpy as np
import pytest

from alexandria.contract import QUERY_THRESHOLD
from alexandria.errors import InvalidArgument
from alexandria.store import WINDOWS, Filter, Hit
from alexandria.store import schema as f
from alexandria.store.lexical import encode_query
from alexandria.store.model import SPARSE
from query.fakes import name_of, point, point_id, unit
from query.search.library import (
    COLLECTION,
    NAME_QUERY,
    QUESTION,
    child_text,
    run_search,
    search_query,
    semantic_score,
    vector_with_cosine,
)
from services.query.outcome import SearchIn, SearchMode
from services.query.ranking import (
    CANDIDATE_POOL,
    UNCHECKED_MARGIN,
    WINDOW_WEIGHT,
    ScoreScale,
    hinted_floor,
    holds_quote,
    measure,
    quoted_words,
    quotes_first,
)
from services.query.search import candidate_filters, first_stage_pool


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", list(SearchMode))
async def test_scores_are_relevances_sorted_highest_first_and_the_threshold_filters_them(store, encoder, mode) -> None:
    everything = await run_search(store, encoder, search_query(search_mode=mode, threshold=0.0, limit=20))
    scores = [p.score for p in everything.results]
    assert scores == sorted(scores, reverse=True) and all(0.0 <= s <= 1.0 for s in scores)
    at_half = await run_search(store, encoder, search_query(search_mode=mode, threshold=0.5, limit=20))
    assert all(p.score >= 0.5 or p.matched_lexically for p in at_half.results)
    assert [p for p in everything.results if p.score >= 0.5] == [p for p in at_half.results if p.score >= 0.5]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", [SearchMode.SEMANTIC, SearchMode.HYBRID])
async def test_a_hypothetical_passage_reorders_the_candidates_and_leaves_their_scores(store, encoder, mode) -> None:
    # Far from the question: close to the passages the question's vector likes least (c0 at cosine 0.3, c4 at 0.1),
    # of which c0 is the closer to both.
    encoder.vectors["the rain on the way to the house"] = unit(0, 1, 0, 0)
    asked = {"threshold": 0.0, "limit": 20, "search_mode": mode}
    plain = await run_search(store, encoder, search_query(**asked))
    hinted = await run_search(store, encoder, search_query(**asked, passage="the rain on the way to the house"))
    assert name_of(plain.results[0].chunk_id) == "c2" and name_of(hinted.results[0].chunk_id) == "c0"
    assert {p.chunk_id: p.score for p in hinted.results} == {p.chunk_id: p.score for p in plain.results}


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", [SearchMode.SEMANTIC, SearchMode.HYBRID])
async def test_with_a_passage_the_threshold_decides_whether_the_question_is_answered(store, encoder, mode) -> None:
    encoder.vectors["the rain on the way to the house"] = unit(0, 1, 0, 0)
    plain = await run_search(store, encoder, search_query(search_mode=mode, threshold=0.0, limit=20))
    answered = await run_search(store, encoder, search_query(search_mode=mode, passage="the rain on the way to the house"))
    floor = hinted_floor(QUERY_THRESHOLD.default)
    assert {p.chunk_id for p in answered.results} == {p.chunk_id for p in plain.results[:5] if p.score >= floor}
    assert min(p.score for p in answered.results) < QUERY_THRESHOLD.default, (
        "a passage the question scores under the threshold comes back once the question is answered")

    off_topic = "quantum chromodynamics on a lattice"
    encoder.vectors[off_topic] = unit(0, 0, 1, 0)  # unrelated to every passage
    turned_away = await run_search(store, encoder, search_query(off_topic, search_mode=mode))
    hinted = await run_search(store, encoder, search_query(off_topic, search_mode=mode, passage="the rain on the way to the house"))
    assert not turned_away.results and not hinted.results, "a confident passage does not answer an off-topic question"
    assert hinted.notice.startswith("No passage reached the threshold 0.50")


@pytest.mark.asyncio
async def test_the_question_and_the_passage_are_measured_in_one_store_call(store, encoder) -> None:
    encoder.vectors["the rain on the way to the house"] = unit(0, 1, 0, 0)
    measure = store.store.similarities
    queries_measured: list[int] = []

    def counted(collection, ids, queries, where=None):
        if any(name != SPARSE for _, name in queries):  # not a read of the candidates' words (_read_terms)
            queries_measured.append(len(queries))
        return measure(collection, ids, queries, where)

    store.store.similarities = counted
    await run_search(store, encoder, search_query(threshold=0.0, passage="the rain on the way to the house"))
    await run_search(store, encoder, search_query(threshold=0.0))
    assert queries_measured == [6, 3], "chunk, window and word scores: of both texts, then of the question alone"


@pytest.mark.parametrize("blank", [{"author": "   "}, {"language": " "}])
async def test_a_blank_filter_is_refused_rather_than_dropped(store, encoder, blank) -> None:
    (name,) = blank
    with pytest.raises(InvalidArgument, match=f"The {name} filter is blank; give one, or leave it out"):
        await run_search(store, encoder, search_query(**blank))


async def test_a_hypothetical_passage_longer_than_a_few_sentences_is_refused(store, encoder) -> None:
    with pytest.raises(InvalidArgument, match="hypothetical_passage has 1001 characters; at most 1000"):
        await run_search(store, encoder, search_query(passage="x" * 1001))


@pytest.mark.asyncio
async def test_a_semantic_score_is_the_calibrated_cosine(store, encoder) -> None:
    outcome = await run_search(store, encoder, search_query(search_mode=SearchMode.SEMANTIC, threshold=0.5))
    assert {name_of(p.chunk_id): round(p.score, 4) for p in outcome.results} == {
        "c2": semantic_score(0.9), "c3": semantic_score(0.7), "flat": semantic_score(0.6)
    }
    assert all(not p.matched_lexically for p in outcome.results)


@pytest.mark.asyncio
async def test_the_similarity_floor_of_the_model_is_where_relevance_starts(store, encoder) -> None:
    encoder.scale = ScoreScale(similarity_floor=0.6)  # a model that gives unrelated texts 0.6 (e5 gives about 0.7)
    outcome = await run_search(store, encoder, search_query(search_mode=SearchMode.SEMANTIC, threshold=0.0, limit=20))
    scores = {name_of(p.chunk_id): round(p.score, 4) for p in outcome.results}
    assert scores["c2"] == semantic_score((0.9 - 0.6) / 0.4) and scores["flat"] == 0.0


@pytest.mark.asyncio
async def test_the_model_s_relevance_at_half_is_where_a_passage_scores_half(store, encoder) -> None:
    # A model whose answering passages sit at a cosine of 0.7 and above: c3 (0.7) is just answering, c2 (0.9) well.
    encoder.scale = ScoreScale(similarity_floor=0.0, relevance_at_half=0.7)
    outcome = await run_search(store, encoder, search_query(search_mode=SearchMode.SEMANTIC, threshold=0.0, limit=20))
    scores = {name_of(p.chunk_id): round(p.score, 4) for p in outcome.results}
    assert scores["c3"] == 0.5 and scores["c2"] == round(0.5 + 0.5 * 0.2 / 0.3, 4) and scores["flat"] < 0.5
    turned_away = await run_search(store, encoder, search_query(search_mode=SearchMode.SEMANTIC, threshold=0.6))
    assert [name_of(p.chunk_id) for p in turned_away.results] == ["c2"]


@pytest.mark.asyncio
async def test_a_lexical_match_lifts_a_passage_in_hybrid_mode(store, encoder) -> None:
    # Orthogonal to every passage: only the words can tell them apart, and c4 holds "Netherfield".
    encoder.vectors["Netherfield rain"] = unit(0, 0, 0, 1)
    outcome = await run_search(store, encoder, search_query("Netherfield rain", threshold=0.0, limit=20))
    assert name_of(outcome.results[0].chunk_id) == "c4" and outcome.results[0].score > outcome.results[1].score


@pytest.mark.asyncio
async def test_the_score_blends_the_chunk_and_its_best_matching_window(store, encoder) -> None:
    # The chunk as a whole is far from the question; one of its windows is close to it.
    windows = np.stack([vector_with_cosine(0.1), vector_with_cosine(0.8), vector_with_cosine(-0.2)])
    store.upsert(COLLECTION, [point("s", "Three windows, one of them on topic.", vector_with_cosine(0.2),
                                    sequence_index=9, windows=windows)])
    outcome = await run_search(store, encoder, search_query(threshold=0.0, search_mode=SearchMode.SEMANTIC, limit=20))
    scores = {name_of(p.chunk_id): p.score for p in outcome.results}
    assert scores["s"] == pytest.approx(semantic_score((1 - WINDOW_WEIGHT) * 0.2 + WINDOW_WEIGHT * 0.8), abs=1e-3)


@pytest.mark.asyncio
async def test_a_cross_encoder_orders_the_candidates_and_gives_their_scores(store, encoder) -> None:
    # It prefers the passages the dense scores put last: the numbers in their texts, reversed.
    encoder.reranker = lambda query, passages: [1.0 - int(p.split("number ")[1][0]) / 10 if "number" in p else 0.05
                                                for p in passages]
    outcome = await run_search(store, encoder, search_query(threshold=0.5, search_mode=SearchMode.SEMANTIC, limit=3))
    assert [(name_of(p.chunk_id), round(p.score, 4)) for p in outcome.results] == [("c0", 1.0), ("c1", 0.9), ("c2", 0.8)]
    assert len(encoder.reranked) == 1 and query_text_of(encoder.reranked[0], "c0")


def query_text_of(passages: list[str], chunk_id: str) -> bool:
    return child_text(int(chunk_id[1:])) in passages


def test_the_candidates_scored_are_the_first_of_the_levels_searched(store) -> None:
    """A first stage that leaves the level to the scores finds UNCHECKED_MARGIN more candidates than the pool: the
    chapters among them are dropped, and the pool is the first CANDIDATE_POOL of the others, in the first stage's order."""
    first_stage = [Hit(point_id(name), 0.0, {}) for name in ("chapter-1", "c2", "c3", "flat", "c0")]
    _, checked_after = candidate_filters(search_query())
    kept, [signals] = measure(store, COLLECTION, first_stage, [(unit(1, 0, 0, 0), encode_query(QUESTION))], WINDOWS,
                              checked_after, pool=3)
    assert [name_of(hit.id) for hit in kept] == ["c2", "c3", "flat"]
    assert signals.chunk_cosine == pytest.approx([0.9, 0.7, 0.6], abs=1e-5)
    everything, _ = measure(store, COLLECTION, first_stage, [(unit(1, 0, 0, 0), encode_query(QUESTION))], WINDOWS)
    assert [name_of(hit.id) for hit in everything] == ["chapter-1", "c2", "c3", "flat", "c0"]


def test_a_search_of_the_highlights_checks_their_level_in_the_first_stage() -> None:
    first_stage, checked_after = candidate_filters(search_query(search_in=SearchIn.HIGHLIGHTS))
    assert first_stage.must[f.LEVEL] == [f.Level.HIGHLIGHT.value] and checked_after is None
    assert first_stage_pool(checked_after) == CANDIDATE_POOL


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", [SearchMode.SEMANTIC, SearchMode.HYBRID])
async def test_parents_and_incomplete_books_are_never_hits(store, encoder, mode) -> None:
    first_stage, checked_after = candidate_filters(search_query(search_mode=mode))
    assert f.LEVEL not in first_stage.must and first_stage.must[f.COMPLETE] is True
    assert checked_after == Filter(must={f.LEVEL: f.PASSAGE_LEVELS}), "the chapter is a candidate, dropped once scored"
    assert first_stage_pool(checked_after) == CANDIDATE_POOL + UNCHECKED_MARGIN
    outcome = await run_search(store, encoder, search_query(threshold=0.0, limit=20, search_mode=mode))
    ids = [name_of(p.chunk_id) for p in outcome.results]
    assert "chapter-1" not in ids and "half" not in ids
    assert sorted(ids) == ["c0", "c1", "c2", "c3", "c4", "flat"]
    assert ids[:2] == ["c2", "c3"]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", list(SearchMode))
async def test_a_name_below_the_threshold_is_kept_when_the_passage_contains_it(store, encoder, mode) -> None:
    outcome = await run_search(store, encoder, search_query(NAME_QUERY, search_mode=mode, threshold=0.5))
    assert [name_of(p.chunk_id) for p in outcome.results] == ["c4"]
    assert outcome.results[0].matched_lexically and outcome.results[0].score < 0.5


@pytest.mark.asyncio
async def test_the_lexical_terms_are_read_only_for_candidates_under_the_threshold_and_only_when_needed(
        store, encoder) -> None:
    answered = await run_search(store, encoder, search_query("daughters", limit=2, threshold=0.0))  # too short to be a quote
    assert len(answered.results) == 2 and store.calls.count("similarities") == 1, "two passages reach the threshold"

    named = await run_search(store, encoder, search_query(NAME_QUERY, threshold=0.5))
    assert [name_of(p.chunk_id) for p in named.results] == ["c4"] and named.results[0].matched_lexically
    scores, read = [args for name, args, _ in store.asked if name == "similarities"]
    assert "c4" in {name_of(i) for i in read[1]}, "the passage kept for its words had them read, in one call"
    assert set(read[1]) < set(scores[1]), "only the candidates under the threshold"
    assert [(list(vector.indices), using) for vector, using in read[2]] == [
        (encode_query(NAME_QUERY).indices, SPARSE)], "each query term scored alone"


QUOTE = "of the first chapter, with words of its own, number 4"  # c4's words in a row; c2 is closer in meaning


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", list(SearchMode))
async def test_a_passage_that_holds_the_query_word_for_word_comes_first_where_words_count(store, encoder, mode) -> None:
    encoder.vectors[QUOTE] = unit(1, 0, 0, 0)
    quoted = await run_search(store, encoder, search_query(QUOTE, search_mode=mode, threshold=0.0, limit=20))
    scores = [p.score for p in quoted.results]
    assert scores == sorted(scores, reverse=True)
    if mode is SearchMode.SEMANTIC:  # meaning alone, as asked
        assert name_of(quoted.results[0].chunk_id) == "c2"
        return
    assert name_of(quoted.results[0].chunk_id) == "c4" and scores[0] == scores[1], "c4 scores as the best of the rest"

    # Every word of the quote, but not in a row: no quote.
    out_of_order = "number 4 of the first chapter, with words of its own"
    encoder.vectors[out_of_order] = unit(1, 0, 0, 0)
    scattered = await run_search(store, encoder, search_query(out_of_order, search_mode=mode, threshold=0.0, limit=20))
    plain = {p.chunk_id: p.score for p in scattered.results}
    assert plain[quoted.results[0].chunk_id] < scores[0]


def test_a_quote_is_whole_words_in_a_row_case_accents_and_punctuation_aside() -> None:
    quote = quoted_words("It is a truth universally acknowledged")
    assert quote == "it is a truth universally acknowledged"
    assert holds_quote("IT IS A TRUTH, universally acknowledged, that a single man", quote)
    assert not holds_quote("It is a truth that is universally acknowledged", quote)
    assert not holds_quote("Wit is a truth universally acknowledged", quote), "whole words only"
    assert holds_quote("Ce n’était qu’un café crème au bord de l’eau", quoted_words("cafe creme au bord"))
    assert quoted_words("Mantua apothecary") is None and quoted_words("the white whale") is None


def test_quoting_candidates_come_first_scored_at_least_as_the_best_other() -> None:
    order, scores = quotes_first([0.95, 0.9, 0.7, 0.4], [False, True, False, True])
    assert order == [1, 3, 0, 2] and scores == [0.95, 0.95, 0.95, 0.7]
    assert quotes_first([0.8, 0.6], [False, False]) == ([0, 1], [0.8, 0.6])
