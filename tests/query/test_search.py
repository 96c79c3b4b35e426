"""Search logic against the real embedded store: ranking and scores, threshold, filters, context, budget."""

from __future__ import annotations

import json

import numpy as np
import pytest
from google.protobuf.json_format import MessageToDict

from alexandria.contract import QUERY_THRESHOLD
from alexandria.errors import FailedPrecondition, InvalidArgument, NotFound
from alexandria.settings import QuerySettings
from alexandria.store import WINDOWS, Filter, Hit
from alexandria.store import schema as f
from alexandria.store.lexical import encode_query
from alexandria.store.model import SPARSE
from query.fakes import FakeEncoder, RecordingStore, embedded_store, name_of, point, point_id, unit
from services.query.budget import fit_to_budget, json_size, truncate_text, water_level
from services.query.context import chapter_window, results_sharing_a_parent
from services.query.guardians import PromptLibrary
from services.query.outcome import ContextMode, SearchIn, SearchMode, SearchOutcome
from services.query.ranking import (
    CANDIDATE_POOL,
    UNCHECKED_MARGIN,
    WINDOW_WEIGHT,
    calibrate,
    hinted_floor,
    holds_quote,
    measure,
    quoted_words,
    quotes_first,
)
from services.query.search import (
    Searcher,
    SearchQuery,
    candidate_filters,
    first_stage_pool,
    passage_from_payload,
    search_filter,
)
from services.query.server import instruction_size, search_response

COLLECTION = "books"
QUESTION = "what does Mr. Bennet think of his daughters"
NAME_QUERY = "Netherfield"
BUDGET = 80_000
# Cosines to QUESTION's vector, by sequence index of the five children of chapter 1.
CHILD_COSINES = [0.3, 0.2, 0.9, 0.7, 0.1]


def _vector_with_cosine(cosine: float) -> np.ndarray:
    return unit(cosine, float(np.sqrt(1 - cosine**2)), 0, 0)


def _child_text(index: int) -> str:
    extra = " They drove to Netherfield in the rain." if index == 4 else ""
    return f"Passage {index} of the first chapter, with words of its own, number {index}.{extra}"


FILLER = " ".join(["Long chapter prose goes on here without end."] * 200)


@pytest.fixture
def store(tmp_path) -> RecordingStore:
    s = embedded_store(tmp_path)
    s.add_collection(COLLECTION)
    s.add_collection("empty")
    children = [
        point(f"c{i}", _child_text(i), _vector_with_cosine(c), sequence_index=i)
        for i, c in enumerate(CHILD_COSINES)
    ]
    chapter = FILLER + "\n\n" + "\n\n".join(p.payload[f.TEXT] for p in children) + "\n\n" + FILLER
    s.upsert(COLLECTION, [
        *children,
        # A chapter matches the question best, but chapters are context, never hits.
        point("chapter-1", chapter, unit(1, 0, 0, 0), level=f.Level.PARENT, parent_id=None),
        # A book being written is invisible even when it matches perfectly.
        point("half", "Half-written book about daughters.", unit(1, 0, 0, 0), complete=False, parent_id="p-half",
              book_title="Unfinished"),
        point("flat", "A flat chunk of a book without chapters.", _vector_with_cosine(0.6), level=f.Level.FLAT,
              parent_id=None, book_title="Emma", calibre_id=2),
    ])
    s.calls.clear()
    yield s
    s.store.close()


@pytest.fixture
def encoder() -> FakeEncoder:
    return FakeEncoder({QUESTION: unit(1, 0, 0, 0), NAME_QUERY: unit(0, 0, 0, 1), "daughters": unit(1, 0, 0, 0)})


def _query(text: str = QUESTION, **changes) -> SearchQuery:
    return SearchQuery(text=text, collection=COLLECTION, **changes)


async def _search(
    store: RecordingStore, encoder: FakeEncoder, query: SearchQuery, budget: int = BUDGET, reserved: int = 0
) -> SearchOutcome:
    """One search by a searcher that has met the collection before (as the query service's has): its common words are
    known, so the store calls recorded are the search's own."""
    searcher = Searcher(store, encoder)
    if store.collection_info(query.collection) is not None:
        searcher.common_words.common(query.collection)
    store.calls.clear()
    store.asked.clear()
    return await searcher.search(query, budget, reserved)


def _semantic_score(cosine: float) -> float:
    """A semantic-mode score for a chunk without sentence vectors (floor 0): its cosine, calibrated."""
    return round(float(calibrate(np.array([cosine]))[0]), 4)


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", list(SearchMode))
async def test_scores_are_relevances_sorted_highest_first_and_the_threshold_filters_them(store, encoder, mode) -> None:
    everything = await _search(store, encoder, _query(search_mode=mode, threshold=0.0, limit=20))
    scores = [p.score for p in everything.results]
    assert scores == sorted(scores, reverse=True) and all(0.0 <= s <= 1.0 for s in scores)
    at_half = await _search(store, encoder, _query(search_mode=mode, threshold=0.5, limit=20))
    assert all(p.score >= 0.5 or p.matched_lexically for p in at_half.results)
    assert [p for p in everything.results if p.score >= 0.5] == [p for p in at_half.results if p.score >= 0.5]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", [SearchMode.SEMANTIC, SearchMode.HYBRID])
async def test_a_hypothetical_passage_reorders_the_candidates_and_leaves_their_scores(store, encoder, mode) -> None:
    # Far from the question: close to the passages the question's vector likes least (c0 at cosine 0.3, c4 at 0.1),
    # of which c0 is the closer to both.
    encoder.vectors["the rain on the way to the house"] = unit(0, 1, 0, 0)
    asked = {"threshold": 0.0, "limit": 20, "search_mode": mode}
    plain = await _search(store, encoder, _query(**asked))
    hinted = await _search(store, encoder, _query(**asked, passage="the rain on the way to the house"))
    assert name_of(plain.results[0].chunk_id) == "c2" and name_of(hinted.results[0].chunk_id) == "c0"
    assert {p.chunk_id: p.score for p in hinted.results} == {p.chunk_id: p.score for p in plain.results}


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", [SearchMode.SEMANTIC, SearchMode.HYBRID])
async def test_with_a_passage_the_threshold_decides_whether_the_question_is_answered(store, encoder, mode) -> None:
    encoder.vectors["the rain on the way to the house"] = unit(0, 1, 0, 0)
    plain = await _search(store, encoder, _query(search_mode=mode, threshold=0.0, limit=20))
    answered = await _search(store, encoder, _query(search_mode=mode, passage="the rain on the way to the house"))
    floor = hinted_floor(QUERY_THRESHOLD.default)
    assert {p.chunk_id for p in answered.results} == {p.chunk_id for p in plain.results[:5] if p.score >= floor}
    assert min(p.score for p in answered.results) < QUERY_THRESHOLD.default, (
        "a passage the question scores under the threshold comes back once the question is answered")

    off_topic = "quantum chromodynamics on a lattice"
    encoder.vectors[off_topic] = unit(0, 0, 1, 0)  # unrelated to every passage
    turned_away = await _search(store, encoder, _query(off_topic, search_mode=mode))
    hinted = await _search(store, encoder, _query(off_topic, search_mode=mode, passage="the rain on the way to the house"))
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
    await _search(store, encoder, _query(threshold=0.0, passage="the rain on the way to the house"))
    await _search(store, encoder, _query(threshold=0.0))
    assert queries_measured == [6, 3], "chunk, window and word scores: of both texts, then of the question alone"


@pytest.mark.parametrize("blank", [{"author": "   "}, {"language": " "}])
async def test_a_blank_filter_is_refused_rather_than_dropped(store, encoder, blank) -> None:
    (name,) = blank
    with pytest.raises(InvalidArgument, match=f"The {name} filter is blank; give one, or leave it out"):
        await _search(store, encoder, _query(**blank))


async def test_a_hypothetical_passage_longer_than_a_few_sentences_is_refused(store, encoder) -> None:
    with pytest.raises(InvalidArgument, match="hypothetical_passage has 1001 characters; at most 1000"):
        await _search(store, encoder, _query(passage="x" * 1001))


@pytest.mark.asyncio
async def test_a_semantic_score_is_the_calibrated_cosine(store, encoder) -> None:
    outcome = await _search(store, encoder, _query(search_mode=SearchMode.SEMANTIC, threshold=0.5))
    assert {name_of(p.chunk_id): round(p.score, 4) for p in outcome.results} == {
        "c2": _semantic_score(0.9), "c3": _semantic_score(0.7), "flat": _semantic_score(0.6)
    }
    assert all(not p.matched_lexically for p in outcome.results)


@pytest.mark.asyncio
async def test_the_similarity_floor_of_the_model_is_where_relevance_starts(store, encoder) -> None:
    encoder.similarity_floor = 0.6  # a model that gives unrelated texts 0.6 (e5 gives about 0.7)
    outcome = await _search(store, encoder, _query(search_mode=SearchMode.SEMANTIC, threshold=0.0, limit=20))
    scores = {name_of(p.chunk_id): round(p.score, 4) for p in outcome.results}
    assert scores["c2"] == _semantic_score((0.9 - 0.6) / 0.4) and scores["flat"] == 0.0


@pytest.mark.asyncio
async def test_a_lexical_match_lifts_a_passage_in_hybrid_mode(store, encoder) -> None:
    # Orthogonal to every passage: only the words can tell them apart, and c4 holds "Netherfield".
    encoder.vectors["Netherfield rain"] = unit(0, 0, 0, 1)
    outcome = await _search(store, encoder, _query("Netherfield rain", threshold=0.0, limit=20))
    assert name_of(outcome.results[0].chunk_id) == "c4" and outcome.results[0].score > outcome.results[1].score


@pytest.mark.asyncio
async def test_the_score_blends_the_chunk_and_its_best_matching_window(store, encoder) -> None:
    # The chunk as a whole is far from the question; one of its windows is close to it.
    windows = np.stack([_vector_with_cosine(0.1), _vector_with_cosine(0.8), _vector_with_cosine(-0.2)])
    store.upsert(COLLECTION, [point("s", "Three windows, one of them on topic.", _vector_with_cosine(0.2),
                                    sequence_index=9, windows=windows)])
    outcome = await _search(store, encoder, _query(threshold=0.0, search_mode=SearchMode.SEMANTIC, limit=20))
    scores = {name_of(p.chunk_id): p.score for p in outcome.results}
    assert scores["s"] == pytest.approx(_semantic_score((1 - WINDOW_WEIGHT) * 0.2 + WINDOW_WEIGHT * 0.8), abs=1e-3)


@pytest.mark.asyncio
async def test_a_cross_encoder_orders_the_candidates_and_gives_their_scores(store, encoder) -> None:
    # It prefers the passages the dense scores put last: the numbers in their texts, reversed.
    encoder.reranker = lambda query, passages: [1.0 - int(p.split("number ")[1][0]) / 10 if "number" in p else 0.05
                                                for p in passages]
    outcome = await _search(store, encoder, _query(threshold=0.5, search_mode=SearchMode.SEMANTIC, limit=3))
    assert [(name_of(p.chunk_id), round(p.score, 4)) for p in outcome.results] == [("c0", 1.0), ("c1", 0.9), ("c2", 0.8)]
    assert len(encoder.reranked) == 1 and query_text_of(encoder.reranked[0], "c0")


def query_text_of(passages: list[str], chunk_id: str) -> bool:
    return _child_text(int(chunk_id[1:])) in passages


def test_the_candidates_scored_are_the_first_of_the_levels_searched(store) -> None:
    """A first stage that leaves the level to the scores finds UNCHECKED_MARGIN more candidates than the pool: the
    chapters among them are dropped, and the pool is the first CANDIDATE_POOL of the others, in the first stage's order."""
    first_stage = [Hit(point_id(name), 0.0, {}) for name in ("chapter-1", "c2", "c3", "flat", "c0")]
    _, checked_after = candidate_filters(_query())
    kept, [signals] = measure(store, COLLECTION, first_stage, [(unit(1, 0, 0, 0), encode_query(QUESTION))], WINDOWS,
                              checked_after, pool=3)
    assert [name_of(hit.id) for hit in kept] == ["c2", "c3", "flat"]
    assert signals.chunk_cosine == pytest.approx([0.9, 0.7, 0.6], abs=1e-5)
    everything, _ = measure(store, COLLECTION, first_stage, [(unit(1, 0, 0, 0), encode_query(QUESTION))], WINDOWS)
    assert [name_of(hit.id) for hit in everything] == ["chapter-1", "c2", "c3", "flat", "c0"]


def test_a_search_of_the_highlights_checks_their_level_in_the_first_stage() -> None:
    first_stage, checked_after = candidate_filters(_query(search_in=SearchIn.HIGHLIGHTS))
    assert first_stage.must[f.LEVEL] == [f.Level.HIGHLIGHT.value] and checked_after is None
    assert first_stage_pool(checked_after) == CANDIDATE_POOL


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", [SearchMode.SEMANTIC, SearchMode.HYBRID])
async def test_parents_and_incomplete_books_are_never_hits(store, encoder, mode) -> None:
    first_stage, checked_after = candidate_filters(_query(search_mode=mode))
    assert f.LEVEL not in first_stage.must and first_stage.must[f.COMPLETE] is True
    assert checked_after == Filter(must={f.LEVEL: f.PASSAGE_LEVELS}), "the chapter is a candidate, dropped once scored"
    assert first_stage_pool(checked_after) == CANDIDATE_POOL + UNCHECKED_MARGIN
    outcome = await _search(store, encoder, _query(threshold=0.0, limit=20, search_mode=mode))
    ids = [name_of(p.chunk_id) for p in outcome.results]
    assert "chapter-1" not in ids and "half" not in ids
    assert sorted(ids) == ["c0", "c1", "c2", "c3", "c4", "flat"]
    assert ids[:2] == ["c2", "c3"]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", list(SearchMode))
async def test_a_name_below_the_threshold_is_kept_when_the_passage_contains_it(store, encoder, mode) -> None:
    outcome = await _search(store, encoder, _query(NAME_QUERY, search_mode=mode, threshold=0.5))
    assert [name_of(p.chunk_id) for p in outcome.results] == ["c4"]
    assert outcome.results[0].matched_lexically and outcome.results[0].score < 0.5


@pytest.mark.asyncio
async def test_the_lexical_terms_are_read_only_for_candidates_under_the_threshold_and_only_when_needed(
        store, encoder) -> None:
    answered = await _search(store, encoder, _query("daughters", limit=2, threshold=0.0))  # too short to be a quote
    assert len(answered.results) == 2 and store.calls.count("similarities") == 1, "two passages reach the threshold"

    named = await _search(store, encoder, _query(NAME_QUERY, threshold=0.5))
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
    quoted = await _search(store, encoder, _query(QUOTE, search_mode=mode, threshold=0.0, limit=20))
    scores = [p.score for p in quoted.results]
    assert scores == sorted(scores, reverse=True)
    if mode is SearchMode.SEMANTIC:  # meaning alone, as asked
        assert name_of(quoted.results[0].chunk_id) == "c2"
        return
    assert name_of(quoted.results[0].chunk_id) == "c4" and scores[0] == scores[1], "c4 scores as the best of the rest"

    # Every word of the quote, but not in a row: no quote.
    out_of_order = "number 4 of the first chapter, with words of its own"
    encoder.vectors[out_of_order] = unit(1, 0, 0, 0)
    scattered = await _search(store, encoder, _query(out_of_order, search_mode=mode, threshold=0.0, limit=20))
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


@pytest.mark.asyncio
async def test_nothing_found_says_why_by_the_filters_given(store, encoder) -> None:
    encoder.vectors["zyzzyva quokka"] = unit(0, 0, 1, 0)
    unheard = _query("zyzzyva quokka", search_mode=SearchMode.LEXICAL)
    assert (await _search(store, encoder, unheard)).notice.startswith("No passage holds any word of the query")
    filtered = await _search(store, encoder, _query(book_id=99, author=""))
    assert filtered.notice == ("No passage matched the query with the filters book_id 99; check the filters, or "
                               "ingest the books you mean.")


@pytest.mark.asyncio
async def test_nothing_above_the_threshold_says_how_close_it_came(store, encoder) -> None:
    outcome = await _search(store, encoder, _query(threshold=0.95, search_mode=SearchMode.SEMANTIC))
    assert outcome.results == ()
    assert "0.95" in outcome.notice and f"{_semantic_score(0.9):.2f}" in outcome.notice


@pytest.mark.asyncio
async def test_a_result_carries_its_citation(store, encoder) -> None:
    outcome = await _search(store, encoder, _query(limit=1))
    top = outcome.results[0]
    assert (name_of(top.chunk_id), top.book_title, top.author, top.section_name) == ("c2", "Pride and Prejudice", "Jane Austen", "Chapter 1")
    assert (top.calibre_id, name_of(top.parent_id), top.sequence_index) == (1, "chapter-1", 2)
    assert top.locator.chapter_title == "Chapter 1" and top.locator.page_start is None


@pytest.mark.asyncio
async def test_filters_narrow_by_book_author_and_language(store, encoder) -> None:
    by_book = await _search(store, encoder, _query(book_id=2, threshold=0.0))
    assert [name_of(p.chunk_id) for p in by_book.results] == ["flat"]
    by_author = await _search(store, encoder, _query(author="AUSTEN", threshold=0.0, limit=20))
    assert len(by_author.results) == 6
    nobody = await _search(store, encoder, _query(author="Tolstoy"))
    assert nobody.results == () and "Tolstoy" in nobody.notice
    other_language = await _search(store, encoder, _query(language="deu", threshold=0.0))
    assert other_language.results == ()
    every_language = await _search(store, encoder, _query(threshold=0.0, limit=20))
    by_name = await _search(store, encoder, _query(language="English", threshold=0.0, limit=20))
    assert by_name.results == every_language.results and by_name.results  # every fake point is "eng"


def test_a_language_filter_matches_every_code_a_stored_book_may_carry() -> None:
    assert search_filter(_query(language="en-GB")).must[f.LANGUAGE] == ["eng", "en"]


@pytest.mark.asyncio
async def test_contextual_fetches_each_chapter_once_in_one_batch(store, encoder) -> None:
    outcome = await _search(store, encoder, _query(context_mode=ContextMode.CONTEXTUAL, search_mode=SearchMode.SEMANTIC))
    assert [name_of(p.chunk_id) for p in outcome.results] == ["c2", "c3", "flat"]
    # The results' payloads (the first stage reads none), then their chapters in one batch.
    assert store.calls.count("retrieve") == 2 and "scroll" not in store.calls
    (chapter,) = outcome.parents
    assert name_of(chapter.parent_id) == "chapter-1" and chapter.result_indices == (0, 1)
    assert chapter.trimmed and _child_text(2) in chapter.text and _child_text(3) in chapter.text
    assert len(chapter.text) < len(FILLER)
    assert chapter.chapter_words > 800
    assert outcome.hierarchy_stats.parents_fetched == 1
    assert outcome.hierarchy_stats.results_sharing_a_parent == 2
    assert outcome.siblings == ()
    assert "flat" in outcome.notice


@pytest.mark.asyncio
async def test_a_highlight_in_contextual_mode_is_not_called_a_passage_of_a_flat_book(store, encoder) -> None:
    store.upsert(COLLECTION, [point("hl", "Highlighted words about daughters.", unit(1, 0, 0, 0),
                                    level=f.Level.HIGHLIGHT, parent_id=None)])
    outcome = await _search(store, encoder, _query(context_mode=ContextMode.CONTEXTUAL, threshold=0.0,
                                                   search_in=SearchIn.BOTH, limit=20))
    kinds = {name_of(p.chunk_id): p.kind for p in outcome.results}
    assert kinds["hl"] == "highlight" and kinds["flat"] == "passage"
    assert "1 result(s) come from books ingested without chapters (flat)" in outcome.notice


@pytest.mark.asyncio
async def test_comprehensive_fetches_the_neighbours_in_one_scroll(store, encoder) -> None:
    outcome = await _search(store, encoder, _query(context_mode=ContextMode.COMPREHENSIVE))
    assert store.calls.count("retrieve") == 2 and store.calls.count("scroll") == 1  # the results', their chapters'
    # c2 and c3 are results; their outer neighbours are c1 (before c2) and c4 (after c3).
    assert [(name_of(n.chunk_id), n.result_index, n.relation) for n in outcome.siblings] == [
        ("c1", 0, "previous"), ("c4", 1, "next"),
    ]
    assert outcome.hierarchy_stats.siblings_fetched == 2
    assert outcome.siblings[0].text == _child_text(1)


@pytest.mark.asyncio
async def test_precise_fetches_no_context(store, encoder) -> None:
    outcome = await _search(store, encoder, _query())
    assert outcome.parents == () and outcome.hierarchy_stats is None
    assert store.calls.count("retrieve") == 1 and "scroll" not in store.calls  # the results' payloads alone


@pytest.mark.asyncio
async def test_a_search_reads_the_payloads_of_its_results_alone(store, encoder) -> None:
    outcome = await _search(store, encoder, _query(limit=2, threshold=0.0))
    (first_stage,) = [kwargs for name, _, kwargs in store.asked if name.startswith("query_")]
    assert first_stage["with_payload"] is False
    (read,) = [args for name, args, _ in store.asked if name == "retrieve"]
    assert [name_of(i) for i in read[1]] == [name_of(p.chunk_id) for p in outcome.results] == ["c2", "c3"]


def _new_version_of_c2(cosine: float = 0.95):
    return point("c2-new", _child_text(2), _vector_with_cosine(cosine), sequence_index=2, parent_id="chapter-2",
                 version=2)


@pytest.mark.asyncio
async def test_a_result_of_an_older_version_makes_room_for_the_next(store, encoder) -> None:
    # A new version of the book is being written beside the old one: its passage is found first, and every passage
    # of the old version is left out once it is read.
    store.upsert(COLLECTION, [_new_version_of_c2()])
    outcome = await _search(store, encoder, _query(search_mode=SearchMode.SEMANTIC, threshold=0.0, limit=3))
    assert [name_of(p.chunk_id) for p in outcome.results] == ["c2-new", "flat"]


@pytest.mark.asyncio
async def test_a_book_replaced_between_the_first_stage_and_the_read_is_found_in_its_new_version(
    store, encoder, monkeypatch
) -> None:
    # The first stage sees the old version alone; the re-ingest then makes the new one visible and deletes the old
    # before the results are read. Skipping the picks gone would leave the book out: the search runs once more.
    read = store.store.retrieve
    replaced = []

    def replaced_first(*args, **kwargs):
        if not replaced:
            replaced.append(True)
            store.store.upsert(COLLECTION, [_new_version_of_c2()])
            store.store.delete(COLLECTION, Filter(must={f.CALIBRE_ID: 1}, must_not={f.VERSION: 2}))
        return read(*args, **kwargs)

    monkeypatch.setattr(store.store, "retrieve", replaced_first)
    outcome = await _search(store, encoder, _query(search_mode=SearchMode.SEMANTIC, threshold=0.0, limit=3))
    assert [name_of(p.chunk_id) for p in outcome.results] == ["c2-new", "flat"]
    assert store.calls.count("query_dense") == 2


@pytest.mark.asyncio
async def test_passages_deleted_while_a_search_reads_them_are_left_out_after_one_more_pass(
    store, encoder, monkeypatch
) -> None:
    # Every read finds its first passage deleted a moment before (a library being removed book by book): the second
    # pass skips the ones gone, as the first did, and the search ends there.
    read = store.store.retrieve

    def first_deleted(collection, ids):
        store.store.delete(COLLECTION, Filter(must={f.CALIBRE_ID: 1, f.SEQUENCE_INDEX: store_index_of(ids[0])}))
        return read(collection, ids)

    monkeypatch.setattr(store.store, "retrieve", first_deleted)
    outcome = await _search(store, encoder, _query(search_mode=SearchMode.SEMANTIC, threshold=0.0, limit=3))
    # Pass 1 reads c2 (gone), then c0, c1 and c4 in turn as each gone one makes room; pass 2 finds c3 and flat, and
    # its read deletes c3.
    assert [name_of(p.chunk_id) for p in outcome.results] == ["flat"]
    assert store.calls.count("query_dense") == 2


def store_index_of(stored_id: str) -> int:
    """The sequence index of a passage of the fixture's chapter (c0-c4) by its stored id; -1 for any other."""
    name = name_of(stored_id)
    return int(name[1:]) if name[:1] == "c" and name[1:].isdigit() else -1


@pytest.mark.asyncio
async def test_a_cross_encoder_reads_as_many_candidates_of_the_newest_versions_as_it_reranks(
    store, encoder, monkeypatch
) -> None:
    # The three best candidates are the new version's passage and two of the old one's: those two make room for the
    # next candidates, until the three reranked are all of books' newest versions.
    monkeypatch.setattr("services.query.search.RERANK_DEPTH", 3)
    store.upsert(COLLECTION, [_new_version_of_c2(), point("other", "Another book's passage, number 5.",
                                                           _vector_with_cosine(0.05), book_title="Persuasion",
                                                           calibre_id=3)])
    encoder.reranker = lambda query, passages: [0.5] * len(passages)
    outcome = await _search(store, encoder, _query(search_mode=SearchMode.SEMANTIC, threshold=0.0, limit=3))
    assert sorted(name_of(p.chunk_id) for p in outcome.results) == ["c2-new", "flat", "other"]
    assert len(encoder.reranked) == 1 and len(encoder.reranked[0]) == 3


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("query", "message"),
    [
        (_query("   "), "empty"),
        (_query(limit=0), "limit must be from 1 to 20"),
        (_query(limit=21), "limit must be from 1 to 20"),
        (_query(threshold=1.5), "threshold must be from 0.0 to 1.0"),
        (_query(threshold=-0.1), "threshold must be from 0.0 to 1.0"),
    ],
)
async def test_bad_arguments_are_refused(store, encoder, query, message) -> None:
    with pytest.raises(InvalidArgument, match=message):
        await _search(store, encoder, query)


@pytest.mark.asyncio
async def test_unknown_and_empty_collections_are_clear_errors(store, encoder) -> None:
    with pytest.raises(NotFound, match="'nowhere' does not exist"):
        await _search(store, encoder, SearchQuery(text=QUESTION, collection="nowhere"))
    with pytest.raises(FailedPrecondition, match="'empty' is empty"):
        await _search(store, encoder, SearchQuery(text=QUESTION, collection="empty"))


@pytest.mark.asyncio
async def test_a_model_mismatch_names_both_models(store, encoder) -> None:
    encoder.model = "other-model"
    with pytest.raises(FailedPrecondition) as error:
        await _search(store, encoder, _query())
    assert "fake-model" in error.value.message and "other-model" in error.value.message


@pytest.mark.asyncio
async def test_the_collection_record_is_read_once_and_again_only_when_it_may_have_changed(store, encoder) -> None:
    searcher = Searcher(store, encoder)
    for _ in range(3):
        assert (await searcher.search(_query(), BUDGET)).results
    assert store.calls.count("collection_info") == 1  # it counts every point: not on each search

    # The embedder now runs another model: the record is read again, and the mismatch named.
    encoder.model = "other-model"
    with pytest.raises(FailedPrecondition, match="other-model"):
        await searcher.search(_query(), BUDGET)
    assert store.calls.count("collection_info") == 2

    # Emptied since: no hits, so the record is read again, and the search says why.
    encoder.model = "fake-model"
    store.delete(COLLECTION, Filter())
    with pytest.raises(FailedPrecondition, match="is empty"):
        await searcher.search(_query(), BUDGET)


def _passage(text: str, sequence_index: int = 0, sibling_count: int = 0):
    payload = {f.TEXT: text, f.PARENT_ID: "p", f.SEQUENCE_INDEX: sequence_index, f.SIBLING_COUNT: sibling_count}
    return passage_from_payload("id", 0.5, payload, matched_lexically=False, link_paths={})


def test_a_chapter_window_keeps_the_hits_with_margins_and_marks_the_cuts() -> None:
    words = [f"w{i}" for i in range(3000)]
    chapter = " ".join(words)
    early, late = " ".join(words[100:140]), " ".join(words[2500:2540])
    text, trimmed = chapter_window(chapter, [_passage(early), _passage(late)], margin=200)
    assert trimmed and early in text and late in text
    assert text.startswith("… ") and text.endswith(" …") and " … " in text.strip("… ")
    assert len(text) < len(chapter) // 3
    assert all(token.startswith("w") or token == "…" for token in text.split())  # no word cut in half
    whole, whole_trimmed = chapter_window("short chapter text", [_passage("chapter")], margin=200)
    assert (whole, whole_trimmed) == ("short chapter text", False)


def test_a_hit_not_found_verbatim_is_placed_by_its_sequence_index() -> None:
    chapter = " ".join(f"w{i}" for i in range(2000))
    text, _ = chapter_window(chapter, [_passage("reworded text", sequence_index=3, sibling_count=4)], margin=100)
    assert "w1550" in text and "w1000" not in text


def test_water_level_and_truncation() -> None:
    assert water_level([10, 20, 30], 100) is None
    assert water_level([10, 20, 30], 40) == 15
    cap = water_level([100, 5000, 7000], 3000)
    assert sum(min(s, cap) for s in [100, 5000, 7000]) <= 3000
    text = "naïve \"quoted\" words\nand more " * 50
    for cap in (3, 10, 57, 400):
        cut = truncate_text(text, cap)
        assert json_size(cut) <= cap and (cut == "" or cut.endswith("…"))
    assert truncate_text("short", 100) == "short"


def _rendered_size(outcome: SearchOutcome, library: PromptLibrary) -> int:
    """The tool response as the gateway renders it: proto field names, JSON with non-ASCII kept."""
    response = search_response(outcome, library.compose("", ""))
    rendered = MessageToDict(response, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    return len(json.dumps(rendered, ensure_ascii=False))


@pytest.mark.asyncio
@pytest.mark.parametrize("budget", [2_000, 2_500, 5_000, 12_000, 40_000])
@pytest.mark.parametrize("mode", [ContextMode.PRECISE, ContextMode.COMPREHENSIVE])
async def test_the_whole_response_stays_under_the_budget_and_says_so(tmp_path, encoder, budget, mode) -> None:
    settings = QuerySettings()
    library = PromptLibrary.load(settings.guardians_dir, settings.response_patterns_file, settings.default_guardian)
    store = embedded_store(tmp_path)
    store.add_collection(COLLECTION)
    big = " ".join(["A long passage about “daughters” and their prospects."] * 120)
    children = [point(f"b{i}", f"{i} {big}", _vector_with_cosine(0.9 - i / 100), sequence_index=i, sibling_count=40)
                for i in range(40)]
    chapter = "\n\n".join(p.payload[f.TEXT] for p in children)
    store.upsert(COLLECTION, [*children, point("chapter-1", chapter, unit(0, 1, 0, 0), level=f.Level.PARENT, parent_id=None)])
    query = _query(limit=20, context_mode=mode, threshold=0.0)
    full = await _search(store, encoder, query, budget=10**9)
    assert not full.trimmed and _rendered_size(full, library) > budget
    outcome = await _search(store, encoder, query, budget, reserved=instruction_size(library.compose("", "")))
    assert _rendered_size(outcome, library) <= budget
    assert outcome.trimmed and f"{budget:,}-character response budget" in outcome.notice
    if outcome.hierarchy_stats is not None:  # the counts are of what the response holds
        stats = outcome.hierarchy_stats
        assert (stats.results, stats.parents_fetched, stats.siblings_fetched) == (
            len(outcome.results), len(outcome.parents), len(outcome.siblings))
        assert stats.results_sharing_a_parent == results_sharing_a_parent(outcome.parents)
    # The smallest budgets are mostly the default guardian's instruction: with real (UUID) ids there is
    # no room for a result's citation and a readable part of its text.
    assert len(outcome.results) >= (1 if budget > 2_500 else 0)


def test_an_outcome_within_the_budget_is_untouched() -> None:
    outcome = SearchOutcome("q", ContextMode.PRECISE, SearchMode.HYBRID, (_passage("small text"),))
    assert fit_to_budget(outcome, BUDGET) is outcome
