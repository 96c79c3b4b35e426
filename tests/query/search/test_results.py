"""What a search returns: why nothing was found, citations, filters, the context fetched per mode, books
replaced or deleted while it reads, refused arguments and collections, and the collection record."""

from __future__ import annotations

import pytest

from alexandria.errors import FailedPrecondition, InvalidArgument, NotFound
from alexandria.store import Filter
from alexandria.store import schema as f
from query.fakes import name_of, point, unit
from query.search.library import (
    BUDGET,
    COLLECTION,
    FILLER,
    QUESTION,
    child_text,
    run_search,
    search_query,
    semantic_score,
    vector_with_cosine,
)
from services.query.outcome import ContextMode, SearchIn, SearchMode
from services.query.search import Searcher, SearchQuery, search_filter


@pytest.mark.asyncio
async def test_nothing_found_says_why_by_the_filters_given(store, encoder) -> None:
    encoder.vectors["zyzzyva quokka"] = unit(0, 0, 1, 0)
    unheard = search_query("zyzzyva quokka", search_mode=SearchMode.LEXICAL)
    assert (await run_search(store, encoder, unheard)).notice.startswith("No passage holds any word of the query")
    filtered = await run_search(store, encoder, search_query(book_id=99, author=""))
    assert filtered.notice == ("No passage matched the query with the filters book_id 99; check the filters, or "
                               "ingest the books you mean.")


@pytest.mark.asyncio
async def test_nothing_above_the_threshold_says_how_close_it_came(store, encoder) -> None:
    outcome = await run_search(store, encoder, search_query(threshold=0.95, search_mode=SearchMode.SEMANTIC))
    assert outcome.results == ()
    assert "0.95" in outcome.notice and f"{semantic_score(0.9):.2f}" in outcome.notice


@pytest.mark.asyncio
async def test_a_result_carries_its_citation(store, encoder) -> None:
    outcome = await run_search(store, encoder, search_query(limit=1))
    top = outcome.results[0]
    assert (name_of(top.chunk_id), top.book_title, top.author, top.section_name) == ("c2", "Pride and Prejudice", "Jane Austen", "Chapter 1")
    assert (top.calibre_id, name_of(top.parent_id), top.sequence_index) == (1, "chapter-1", 2)
    assert top.locator.chapter_title == "Chapter 1" and top.locator.page_start is None


@pytest.mark.asyncio
async def test_filters_narrow_by_book_author_and_language(store, encoder) -> None:
    by_book = await run_search(store, encoder, search_query(book_id=2, threshold=0.0))
    assert [name_of(p.chunk_id) for p in by_book.results] == ["flat"]
    by_author = await run_search(store, encoder, search_query(author="AUSTEN", threshold=0.0, limit=20))
    assert len(by_author.results) == 6
    nobody = await run_search(store, encoder, search_query(author="Tolstoy"))
    assert nobody.results == () and "Tolstoy" in nobody.notice
    other_language = await run_search(store, encoder, search_query(language="deu", threshold=0.0))
    assert other_language.results == ()
    every_language = await run_search(store, encoder, search_query(threshold=0.0, limit=20))
    by_name = await run_search(store, encoder, search_query(language="English", threshold=0.0, limit=20))
    assert by_name.results == every_language.results and by_name.results  # every fake point is "eng"


def test_a_language_filter_matches_every_code_a_stored_book_may_carry() -> None:
    assert search_filter(search_query(language="en-GB")).must[f.LANGUAGE] == ["eng", "en"]


@pytest.mark.asyncio
async def test_contextual_fetches_each_chapter_once_in_one_batch(store, encoder) -> None:
    outcome = await run_search(store, encoder, search_query(context_mode=ContextMode.CONTEXTUAL, search_mode=SearchMode.SEMANTIC))
    assert [name_of(p.chunk_id) for p in outcome.results] == ["c2", "c3", "flat"]
    # The results' payloads (the first stage reads none), then their chapters in one batch.
    assert store.calls.count("retrieve") == 2 and "scroll" not in store.calls
    (chapter,) = outcome.parents
    assert name_of(chapter.parent_id) == "chapter-1" and chapter.result_indices == (0, 1)
    assert chapter.trimmed and child_text(2) in chapter.text and child_text(3) in chapter.text
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
    outcome = await run_search(store, encoder, search_query(context_mode=ContextMode.CONTEXTUAL, threshold=0.0,
                                                   search_in=SearchIn.BOTH, limit=20))
    kinds = {name_of(p.chunk_id): p.kind for p in outcome.results}
    assert kinds["hl"] == "highlight" and kinds["flat"] == "passage"
    assert "1 result(s) come from books ingested without chapters (flat)" in outcome.notice


@pytest.mark.asyncio
async def test_comprehensive_fetches_the_neighbours_in_one_scroll(store, encoder) -> None:
    outcome = await run_search(store, encoder, search_query(context_mode=ContextMode.COMPREHENSIVE))
    assert store.calls.count("retrieve") == 2 and store.calls.count("scroll") == 1  # the results', their chapters'
    # c2 and c3 are results; their outer neighbours are c1 (before c2) and c4 (after c3).
    assert [(name_of(n.chunk_id), n.result_index, n.relation) for n in outcome.siblings] == [
        ("c1", 0, "previous"), ("c4", 1, "next"),
    ]
    assert outcome.hierarchy_stats.siblings_fetched == 2
    assert outcome.siblings[0].text == child_text(1)


@pytest.mark.asyncio
async def test_precise_fetches_no_context(store, encoder) -> None:
    outcome = await run_search(store, encoder, search_query())
    assert outcome.parents == () and outcome.hierarchy_stats is None
    assert store.calls.count("retrieve") == 1 and "scroll" not in store.calls  # the results' payloads alone


@pytest.mark.asyncio
async def test_a_search_reads_the_payloads_of_its_results_alone(store, encoder) -> None:
    outcome = await run_search(store, encoder, search_query(limit=2, threshold=0.0))
    (first_stage,) = [kwargs for name, _, kwargs in store.asked if name.startswith("query_")]
    assert first_stage["with_payload"] is False
    (read,) = [args for name, args, _ in store.asked if name == "retrieve"]
    assert [name_of(i) for i in read[1]] == [name_of(p.chunk_id) for p in outcome.results] == ["c2", "c3"]


def _new_version_of_c2(cosine: float = 0.95):
    return point("c2-new", child_text(2), vector_with_cosine(cosine), sequence_index=2, parent_id="chapter-2",
                 version=2)


@pytest.mark.asyncio
async def test_a_result_of_an_older_version_makes_room_for_the_next(store, encoder) -> None:
    # A new version of the book is being written beside the old one: its passage is found first, and every passage
    # of the old version is left out once it is read.
    store.upsert(COLLECTION, [_new_version_of_c2()])
    outcome = await run_search(store, encoder, search_query(search_mode=SearchMode.SEMANTIC, threshold=0.0, limit=3))
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
    outcome = await run_search(store, encoder, search_query(search_mode=SearchMode.SEMANTIC, threshold=0.0, limit=3))
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
    outcome = await run_search(store, encoder, search_query(search_mode=SearchMode.SEMANTIC, threshold=0.0, limit=3))
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
                                                           vector_with_cosine(0.05), book_title="Persuasion",
                                                           calibre_id=3)])
    encoder.reranker = lambda query, passages: [0.5] * len(passages)
    outcome = await run_search(store, encoder, search_query(search_mode=SearchMode.SEMANTIC, threshold=0.0, limit=3))
    assert sorted(name_of(p.chunk_id) for p in outcome.results) == ["c2-new", "flat", "other"]
    assert len(encoder.reranked) == 1 and len(encoder.reranked[0]) == 3


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("query", "message"),
    [
        (search_query("   "), "empty"),
        (search_query(limit=0), "limit must be from 1 to 20"),
        (search_query(limit=21), "limit must be from 1 to 20"),
        (search_query(threshold=1.5), "threshold must be from 0.0 to 1.0"),
        (search_query(threshold=-0.1), "threshold must be from 0.0 to 1.0"),
    ],
)
async def test_bad_arguments_are_refused(store, encoder, query, message) -> None:
    with pytest.raises(InvalidArgument, match=message):
        await run_search(store, encoder, query)


@pytest.mark.asyncio
async def test_unknown_and_empty_collections_are_clear_errors(store, encoder) -> None:
    with pytest.raises(NotFound, match="'nowhere' does not exist"):
        await run_search(store, encoder, SearchQuery(text=QUESTION, collection="nowhere"))
    with pytest.raises(FailedPrecondition, match="'empty' is empty"):
        await run_search(store, encoder, SearchQuery(text=QUESTION, collection="empty"))


@pytest.mark.asyncio
async def test_a_model_mismatch_names_both_models(store, encoder) -> None:
    encoder.model = "other-model"
    with pytest.raises(FailedPrecondition) as error:
        await run_search(store, encoder, search_query())
    assert "fake-model" in error.value.message and "other-model" in error.value.message


@pytest.mark.asyncio
async def test_the_collection_record_is_read_once_and_again_only_when_it_may_have_changed(store, encoder) -> None:
    searcher = Searcher(store, encoder)
    for _ in range(3):
        assert (await searcher.search(search_query(), BUDGET)).results
    assert store.calls.count("collection_info") == 1  # it counts every point: not on each search

    # The embedder now runs another model: the record is read again, and the mismatch named.
    encoder.model = "other-model"
    with pytest.raises(FailedPrecondition, match="other-model"):
        await searcher.search(search_query(), BUDGET)
    assert store.calls.count("collection_info") == 2

    # Emptied since: no hits, so the record is read again, and the search says why.
    encoder.model = "fake-model"
    store.delete(COLLECTION, Filter())
    with pytest.raises(FailedPrecondition, match="is empty"):
        await searcher.search(search_query(), BUDGET)
