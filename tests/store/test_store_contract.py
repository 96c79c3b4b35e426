"""One contract, both backends: every test runs on the embedded engine and on qdrant-client.

The server backend runs in qdrant-client's local mode here (same client API as a real
server); the embedded backend is the real qdrant-edge engine. Both on a fresh tmp_path.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from alexandria.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from alexandria.store import DENSE, WINDOWS, CollectionInfo, Filter, SparseVector, Store, lexical, open_store
from alexandria.store import schema as f
from alexandria.store.model import SPARSE
from alexandria.store.records import complete_books, complete_books_by_language
from store.synthetic import (
    BOOK_SIZES,
    COLLECTION,
    DIMENSION,
    METADATA,
    PASSAGES,
    axis,
    point_id,
    runs_in_local_mode,
    settings_for,
    stored_point,
)


def names(points: list) -> list[str]:
    return [p.payload["name"] for p in points]


# collections


def test_ensure_creates_then_returns_the_existing_collection(store: Store) -> None:
    assert store.collection_info(COLLECTION) is None

    created = store.ensure_collection(COLLECTION, DIMENSION, METADATA)
    again = store.ensure_collection(COLLECTION, DIMENSION, {"model": "other", "dimension": DIMENSION})

    for info in (created, again, store.collection_info(COLLECTION)):
        assert info.name == COLLECTION
        assert info.vector_size == DIMENSION
        assert info.points_count == 0
        assert info.metadata == METADATA
        assert info.status == "green"


def test_dimension_mismatch_is_refused_naming_both_models(store: Store) -> None:
    store.ensure_collection(COLLECTION, DIMENSION, METADATA)

    with pytest.raises(FailedPrecondition) as refused:
        store.ensure_collection(COLLECTION, 16, {"model": "bigger-16", "dimension": 16})

    message = refused.value.message
    assert "synthetic-8" in message and "bigger-16" in message
    assert "(8 dims)" in message and "(16 dims)" in message


# Every method of the contract once, with arguments that reach the collection (no early answer for an
# empty list): the tests below run each of them on a missing collection and on a closed store.
CALLS: dict[str, Callable[[Store, str], object]] = {
    "collection_info": lambda store, collection: store.collection_info(collection),
    "ensure_collection": lambda store, collection: store.ensure_collection(collection, DIMENSION, METADATA),
    "upsert": lambda store, collection: store.upsert(collection, [stored_point(PASSAGES[0])]),
    "set_payload": lambda store, collection: store.set_payload(collection, Filter(), {f.COMPLETE: True}),
    "delete": lambda store, collection: store.delete(collection, Filter(must={f.BOOK_KEY: "moby"})),
    "count": lambda store, collection: store.count(collection),
    "scroll": lambda store, collection: store.scroll(collection, None, limit=5),
    "retrieve": lambda store, collection: store.retrieve(collection, [point_id("whale")]),
    "facet_counts": lambda store, collection: store.facet_counts(collection, f.BOOK_KEY),
    "query_dense": lambda store, collection: store.query_dense(collection, axis(0), None, limit=3),
    "query_sparse": lambda store, collection: store.query_sparse(
        collection, lexical.encode_query("whale"), None, limit=3
    ),
    "query_hybrid": lambda store, collection: store.query_hybrid(
        collection, axis(0), lexical.encode_query("whale"), None, limit=3, prefetch_limit=3
    ),
    "similarities": lambda store, collection: store.similarities(collection, [point_id("whale")], [(axis(0), DENSE)]),
    "optimize": lambda store, collection: store.optimize(collection),
    "collection_target": lambda store, collection: store.collection_target(collection),
    "collection_storage": lambda store, collection: store.collection_storage(collection),
    "replace_collection": lambda store, collection: store.replace_collection("elsewhere", collection),
    "delete_collection": lambda store, collection: store.delete_collection(collection),
}
# What answers a missing collection instead of refusing it: tested with aliases below.
ANSWER_A_MISSING_COLLECTION = {"collection_info", "ensure_collection", "collection_target", "delete_collection"}


def test_the_calls_cover_every_method_of_the_contract() -> None:
    methods = {name for name, member in vars(Store).items() if callable(member) and not name.startswith("_")}
    assert set(CALLS) == methods - {"close"}


# collection_info and ensure_collection answer a missing collection (None; creating it): tested above.
@pytest.mark.parametrize("method", sorted(set(CALLS) - ANSWER_A_MISSING_COLLECTION))
def test_every_read_and_write_of_a_missing_collection_is_not_found(store: Store, method: str) -> None:
    with pytest.raises(NotFound, match="'missing' does not exist; ingest a book"):
        CALLS[method](store, "missing")


@pytest.mark.parametrize("method", sorted(CALLS))
def test_every_method_of_a_closed_store_is_unavailable(library: Store, method: str) -> None:
    library.close()

    for collection in (COLLECTION, "missing"):
        with pytest.raises(Unavailable, match="is closed"):
            CALLS[method](library, collection)
    library.close()  # closing again is harmless


def test_unsafe_collection_names_are_refused(store: Store) -> None:
    for bad in ("../escape", "", "with space", "dotted.name"):
        with pytest.raises(InvalidArgument):
            store.collection_info(bad)


# writes and plain reads


def test_upsert_count_and_retrieve_with_vectors_in_request_order(library: Store) -> None:
    assert library.count(COLLECTION) == len(PASSAGES)
    assert library.collection_info(COLLECTION).points_count == len(PASSAGES)

    wanted = [point_id("ship"), "00000000-0000-0000-0000-000000000000", point_id("whale")]
    records = library.retrieve(COLLECTION, wanted, with_vectors=True)

    assert [r.id for r in records] == [point_id("ship"), point_id("whale")]
    ship = records[0]
    assert ship.dense.dtype == np.float32 and ship.dense.shape == (DIMENSION,)
    np.testing.assert_allclose(ship.dense, axis(0, tilt=1), atol=1e-6)  # cosine: stored normalised
    assert ship.payload[f.BOOK_KEY] == "moby" and ship.payload[f.AUTHORS] == ["Herman Melville"]
    assert library.retrieve(COLLECTION, [point_id("ship")])[0].dense is None


def test_upsert_of_an_existing_id_replaces_the_point(library: Store) -> None:
    replaced = stored_point(PASSAGES[0])
    library.upsert(COLLECTION, [type(replaced)(replaced.id, axis(7), replaced.sparse, {"name": "new"})])

    assert library.count(COLLECTION) == len(PASSAGES)
    assert library.retrieve(COLLECTION, [replaced.id])[0].payload == {"name": "new"}


def test_set_payload_on_a_filter_flips_the_complete_marker(library: Store) -> None:
    library.set_payload(COLLECTION, Filter(must={f.BOOK_KEY: "moby"}), {f.COMPLETE: True})

    assert library.count(COLLECTION, Filter(must={f.COMPLETE: True})) == BOOK_SIZES["moby"]
    assert library.count(COLLECTION, Filter(must={f.COMPLETE: False})) == len(PASSAGES) - BOOK_SIZES["moby"]
    whale = library.retrieve(COLLECTION, [point_id("whale")])[0].payload
    assert whale[f.COMPLETE] is True and whale[f.TEXT] == PASSAGES[0].text  # merged, not replaced


def test_delete_by_filter_returns_how_many_went(library: Store) -> None:
    assert library.delete(COLLECTION, Filter(must={f.BOOK_KEY: "pride"})) == BOOK_SIZES["pride"]
    assert library.delete(COLLECTION, Filter(must={f.BOOK_KEY: "pride"})) == 0
    assert library.count(COLLECTION) == len(PASSAGES) - BOOK_SIZES["pride"]
    assert library.count(COLLECTION, Filter(must={f.BOOK_KEY: "pride"})) == 0


def test_delete_by_ids_takes_exactly_those_points(library: Store) -> None:
    assert library.delete(COLLECTION, Filter(ids=(point_id("whale"), point_id("mine")))) == 2
    assert sorted(names(library.scroll(COLLECTION, None, limit=100))) == ["ball", "harpoon", "letter", "ship"]
    narrowed = Filter(must={f.BOOK_KEY: "pride"}, ids=(point_id("ball"), point_id("ship")))
    assert names(library.scroll(COLLECTION, narrowed, limit=100)) == ["ball"]


def test_scroll_with_filters_and_limit(library: Store) -> None:
    any_of = library.scroll(COLLECTION, Filter(must={f.BOOK_KEY: ["pride", "germinal"]}), limit=100)
    assert sorted(names(any_of)) == ["ball", "letter", "mine"]

    none_of = library.scroll(COLLECTION, Filter(must_not={f.BOOK_KEY: ["moby", "pride"]}), limit=100)
    assert names(none_of) == ["mine"]

    limited = library.scroll(COLLECTION, Filter(must={f.BOOK_KEY: "moby"}), limit=2, with_vectors=True)
    assert len(limited) == 2 and all(r.dense is not None and r.dense.dtype == np.float32 for r in limited)
    assert len(library.scroll(COLLECTION, None, limit=100)) == len(PASSAGES)
    assert len(library.scroll(COLLECTION, Filter(), limit=100)) == len(PASSAGES)  # no conditions: all


def test_facet_counts_of_keyword_fields(library: Store) -> None:
    assert library.facet_counts(COLLECTION, f.BOOK_KEY) == BOOK_SIZES
    assert library.facet_counts(COLLECTION, f.AUTHORS, Filter(must_not={f.BOOK_KEY: "moby"})) == {
        "Jane Austen": 2,
        "Émile Zola": 1,
    }
    with pytest.raises(InvalidArgument, match="facets work on"):
        library.facet_counts(COLLECTION, f.TEXT)


def test_facet_counts_follow_each_write(library: Store) -> None:
    complete_books = Filter(must={f.COMPLETE: True})
    assert library.facet_counts(COLLECTION, f.BOOK_KEY, complete_books) == {}
    library.set_payload(COLLECTION, Filter(must={f.BOOK_KEY: "moby"}), {f.COMPLETE: True})
    assert library.facet_counts(COLLECTION, f.BOOK_KEY, complete_books) == {"moby": 3}
    library.delete(COLLECTION, Filter(ids=(point_id("whale"),)))
    assert library.facet_counts(COLLECTION, f.BOOK_KEY, complete_books) == {"moby": 2}
    library.upsert(COLLECTION, [stored_point(PASSAGES[0])])
    assert library.facet_counts(COLLECTION, f.BOOK_KEY) == BOOK_SIZES
    counts = library.facet_counts(COLLECTION, f.BOOK_KEY)
    counts.clear()  # what a caller does with the counts it got is its own
    assert library.facet_counts(COLLECTION, f.BOOK_KEY) == BOOK_SIZES
    library.delete_collection(COLLECTION)
    library.ensure_collection(COLLECTION, DIMENSION, METADATA)
    assert library.facet_counts(COLLECTION, f.BOOK_KEY) == {}


def test_complete_books_count_only_the_points_of_books_written_whole(library: Store) -> None:
    assert complete_books(library, COLLECTION) == {}
    library.set_payload(COLLECTION, Filter(must={f.BOOK_KEY: ["moby", "pride"]}), {f.COMPLETE: True})
    assert complete_books(library, COLLECTION) == {"moby": 3, "pride": 2}
    # moby ingested again: its new version's points are not complete until all are written
    again = stored_point(PASSAGES[0])
    library.upsert(COLLECTION, [dataclasses.replace(again, id=point_id("whale, again"))])
    assert complete_books(library, COLLECTION) == {"moby": 3, "pride": 2}
    assert complete_books(library, COLLECTION, **{f.AUTHORS: "Jane Austen"}) == {"pride": 2}
    library.delete(COLLECTION, Filter(must={f.BOOK_KEY: "pride"}))
    assert complete_books(library, COLLECTION) == {"moby": 3}


def books_by_language(library: Store) -> dict[str, int]:
    return complete_books_by_language(library, COLLECTION, len(complete_books(library, COLLECTION)))


def test_books_by_language_count_the_books_written_whole(library: Store) -> None:
    library.set_payload(COLLECTION, Filter(must={f.BOOK_KEY: "moby"}), {f.LANGUAGE: "eng"})
    library.set_payload(COLLECTION, Filter(must={f.BOOK_KEY: ["pride", "germinal"]}), {f.LANGUAGE: "fra"})
    assert books_by_language(library) == {}
    library.set_payload(COLLECTION, Filter(must={f.BOOK_KEY: list(BOOK_SIZES)}), {f.COMPLETE: True})
    assert books_by_language(library) == {"eng": 1, "fra": 2}
    # moby ingested again: its new version's points are not complete until all are written
    again = stored_point(PASSAGES[0])
    library.upsert(COLLECTION, [dataclasses.replace(again, id=point_id("whale, again"),
                                                    payload={**again.payload, f.LANGUAGE: "eng"})])
    assert books_by_language(library) == {"eng": 1, "fra": 2}
    library.delete(COLLECTION, Filter(must={f.BOOK_KEY: "germinal"}))
    assert books_by_language(library) == {"eng": 1, "fra": 1}
    library.delete(COLLECTION, Filter(must={f.BOOK_KEY: "moby"}))
    assert books_by_language(library) == {"fra": 1}


def test_author_text_filter_matches_a_word_in_any_case(library: Store) -> None:
    for words in ("austen", "AUSTEN", "Jane Austen"):
        assert sorted(names(library.scroll(COLLECTION, Filter(text={f.AUTHOR: words}), limit=100))) == [
            "ball",
            "letter",
        ]
    assert library.count(COLLECTION, Filter(text={f.AUTHOR: "aust"})) == 0  # whole words only


def test_author_text_filter_folds_accents_except_in_local_mode(backend: str, library: Store) -> None:
    assert library.count(COLLECTION, Filter(text={f.AUTHOR: "ÉMILE"})) == 1
    folded = 0 if runs_in_local_mode(backend) else 1
    assert library.count(COLLECTION, Filter(text={f.AUTHOR: "emile"})) == folded


# queries


def test_dense_query_returns_the_nearest_points_first(library: Store) -> None:
    hits = library.query_dense(COLLECTION, axis(0), None, limit=3)

    assert names(hits)[:2] == ["whale", "ship"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].id == point_id("whale")


def test_sparse_query_weighs_rare_words_above_common_ones(library: Store) -> None:
    # "the" is in five passages, "netherfield" in one: IDF puts the ball first.
    hits = library.query_sparse(COLLECTION, lexical.encode_query("the Netherfield"), None, limit=3)
    assert names(hits)[0] == "ball"

    assert set(names(library.query_sparse(COLLECTION, lexical.encode_query("harpoon"), None, limit=10))) == {
        "harpoon",
        "ship",
    }
    assert library.query_sparse(COLLECTION, lexical.encode_query("  ?! "), None, limit=3) == []


def test_a_point_without_a_lexical_vector_stays_out_of_lexical_search_and_its_idf(library: Store) -> None:
    """A chapter is written with no lexical vector: dense search and retrieve see it, BM25 neither finds
    it nor counts its words (the other points' lexical scores do not move)."""
    words = lexical.encode_query("the whale harpoon")
    before = library.query_sparse(COLLECTION, words, None, limit=10)
    chapter = dataclasses.replace(stored_point(PASSAGES[2]), id=point_id("chapter"), dense=axis(5), sparse=None)
    library.upsert(COLLECTION, [dataclasses.replace(chapter, payload={**chapter.payload, "name": "chapter"})])

    after = library.query_sparse(COLLECTION, words, None, limit=10)
    assert [(h.id, h.score) for h in after] == [(h.id, pytest.approx(h.score)) for h in before]
    assert names(library.query_dense(COLLECTION, axis(5), None, limit=1)) == ["chapter"]
    assert names(library.retrieve(COLLECTION, [point_id("chapter")])) == ["chapter"]


def test_hybrid_query_fuses_both_rankings(library: Store) -> None:
    # Dense alone ranks whale first; lexical alone ranks harpoon first; ship is second in
    # both, and reciprocal rank fusion puts the passage both agree on above either winner.
    dense_first = names(library.query_dense(COLLECTION, axis(0), None, limit=2))
    sparse_first = names(
        library.query_sparse(COLLECTION, lexical.encode_query("harpoon line"), None, limit=2)
    )
    assert dense_first == ["whale", "ship"] and sparse_first == ["harpoon", "ship"]

    hits = library.query_hybrid(
        COLLECTION,
        axis(0),
        lexical.encode_query("harpoon line"),
        None,
        limit=3,
        prefetch_limit=2,
    )

    assert names(hits)[0] == "ship"
    assert set(names(hits)) == {"ship", "whale", "harpoon"}


def test_one_terms_lexical_score_goes_to_exactly_the_points_whose_text_holds_it(library: Store) -> None:
    # What a search's check of "holds every query term" reads (search.py's _read_terms); queries leave it unread.
    hits = library.query_hybrid(COLLECTION, axis(0), lexical.encode_query("harpoon line"), None, limit=3,
                                prefetch_limit=3)
    assert hits and all(hit.terms_held is None for hit in hits)

    ids = [point_id(p.name) for p in PASSAGES] + [point_id("not stored")]
    for word in ("harpoon", "line", "whale", "ship"):
        (term,) = lexical.encode_query(word).indices
        holding = {point_id(p.name) for p in PASSAGES if term in lexical.encode_query(p.text).indices}
        (scores,) = library.similarities(COLLECTION, ids, [(SparseVector([term], [1.0]), SPARSE)])
        assert holding and {i for i, score in scores.items() if score > 0} == holding, word


def test_every_query_mode_asked_for_no_payloads_gives_the_same_hits_without_them(library: Store) -> None:
    terms = lexical.encode_query("harpoon line")
    for query in (
        lambda **kw: library.query_dense(COLLECTION, axis(0), None, limit=3, **kw),
        lambda **kw: library.query_sparse(COLLECTION, terms, None, limit=3, **kw),
        lambda **kw: library.query_hybrid(COLLECTION, axis(0), terms, None, limit=3, prefetch_limit=3, **kw),
    ):
        whole, bare = query(), query(with_payload=False)
        # The same hits at the same scores (the order of equal scores is the engine's to choose).
        assert sorted((h.score, h.id) for h in bare) == sorted((h.score, h.id) for h in whole) and whole
        assert all(h.payload for h in whole) and not any(h.payload for h in bare)


def test_filters_apply_to_every_query_mode(library: Store) -> None:
    library.set_payload(COLLECTION, Filter(must={f.BOOK_KEY: "pride"}), {f.COMPLETE: True})
    visible = Filter(must={f.COMPLETE: True})
    question = lexical.encode_query("whale letter")

    assert set(names(library.query_dense(COLLECTION, axis(0), visible, limit=10))) == {"ball", "letter"}
    assert names(library.query_sparse(COLLECTION, question, visible, limit=10)) == ["letter"]
    assert set(
        names(library.query_hybrid(COLLECTION, axis(0), question, visible, limit=10, prefetch_limit=10))
    ) == {
        "ball",
        "letter",
    }
    by_author = Filter(text={f.AUTHOR: "zola"}, must_not={f.LEVEL: f.Level.PARENT.value})
    assert names(library.query_dense(COLLECTION, axis(0), by_author, limit=10)) == ["mine"]


def test_optimize_keeps_every_answer(library: Store) -> None:
    library.optimize(COLLECTION)

    assert library.count(COLLECTION) == len(PASSAGES)
    assert names(library.query_dense(COLLECTION, axis(3), None, limit=1)) == ["letter"]


# aliases: a collection replaced by another under the user's name (a reindex)

REBUILT = "library-rebuilt"
REBUILT_METADATA = {"model": "synthetic-8+int8", "dimension": DIMENSION}


def rebuilt_beside(library: Store, names: tuple[str, ...] = ("whale", "ball")) -> None:
    """A second collection holding some of the passages, complete, made by another model."""
    library.ensure_collection(REBUILT, DIMENSION, REBUILT_METADATA)
    library.upsert(REBUILT, [stored_point(p) for p in PASSAGES if p.name in names])
    library.set_payload(REBUILT, Filter(), {f.COMPLETE: True})


def test_a_replaced_collection_answers_every_call_under_its_name(library: Store) -> None:
    rebuilt_beside(library)
    assert library.collection_target(COLLECTION) == COLLECTION

    library.replace_collection(COLLECTION, REBUILT)

    info = library.collection_info(COLLECTION)
    assert info is not None and info.name == COLLECTION and info.metadata == REBUILT_METADATA
    assert info.points_count == 2 and library.count(COLLECTION) == 2
    assert library.collection_target(COLLECTION) == REBUILT
    assert library.facet_counts(COLLECTION, f.BOOK_KEY) == {"moby": 1, "pride": 1}
    assert [h.payload["name"] for h in library.query_dense(COLLECTION, axis(2), None, limit=1)] == ["ball"]
    assert library.ensure_collection(COLLECTION, DIMENSION, REBUILT_METADATA).metadata == REBUILT_METADATA
    library.upsert(COLLECTION, [stored_point(PASSAGES[-1])])  # writes land in the replacement
    assert library.count(REBUILT) == 3
    assert library.delete(COLLECTION, Filter(must={f.BOOK_KEY: "moby"})) == 1
    assert library.count(REBUILT) == 2


def test_the_replaced_collection_is_dropped_and_a_second_swap_drops_the_first_replacement(library: Store) -> None:
    rebuilt_beside(library)
    library.replace_collection(COLLECTION, REBUILT)
    assert library.delete_collection(COLLECTION) is False, "the old collection is gone; the name is an alias"

    library.ensure_collection("library-again", DIMENSION, METADATA)
    library.upsert("library-again", [stored_point(PASSAGES[-1])])
    library.replace_collection(COLLECTION, "library-again")

    assert library.collection_info(REBUILT) is None
    assert library.collection_target(COLLECTION) == "library-again"
    assert library.count(COLLECTION) == 1 and library.collection_info(COLLECTION).metadata == METADATA


def test_a_swap_survives_reopening_the_store(backend: str, tmp_path: Path) -> None:
    store = open_store(settings_for(backend, tmp_path))
    store.ensure_collection(COLLECTION, DIMENSION, METADATA)
    store.upsert(COLLECTION, [stored_point(p) for p in PASSAGES])
    rebuilt_beside(store)
    store.replace_collection(COLLECTION, REBUILT)
    store.close()

    reopened = open_store(settings_for(backend, tmp_path))
    try:
        assert reopened.collection_target(COLLECTION) == REBUILT
        assert reopened.count(COLLECTION) == 2
        assert reopened.collection_info(COLLECTION).metadata == REBUILT_METADATA
    finally:
        reopened.close()


def test_replacing_with_a_missing_collection_changes_nothing(library: Store) -> None:
    with pytest.raises(NotFound, match="'missing' does not exist"):
        library.replace_collection(COLLECTION, "missing")

    assert library.collection_target(COLLECTION) == COLLECTION and library.count(COLLECTION) == len(PASSAGES)


def test_delete_collection_drops_it_and_the_aliases_naming_it(library: Store) -> None:
    rebuilt_beside(library)
    library.replace_collection(COLLECTION, REBUILT)

    assert library.delete_collection(REBUILT) is True
    assert library.delete_collection(REBUILT) is False
    assert library.collection_info(COLLECTION) is None and library.collection_info(REBUILT) is None
    assert library.collection_target(COLLECTION) == COLLECTION


# lifetime


def test_reopening_keeps_points_and_metadata(backend: str, tmp_path: Path) -> None:
    first = open_store(settings_for(backend, tmp_path))
    first.ensure_collection(COLLECTION, DIMENSION, METADATA)
    first.upsert(COLLECTION, [stored_point(p) for p in PASSAGES])
    first.close()

    reopened = open_store(settings_for(backend, tmp_path))
    try:
        info = reopened.collection_info(COLLECTION)
        assert (
            info.points_count == len(PASSAGES) and info.metadata == METADATA and info.vector_size == DIMENSION
        )
        assert names(reopened.query_dense(COLLECTION, axis(4), None, limit=1)) == ["mine"]
    finally:
        reopened.close()


def test_a_second_opener_of_the_same_store_fails_clearly(
    backend: str, library: Store, tmp_path: Path
) -> None:
    with pytest.raises(FailedPrecondition, match="Another process holds the store at"):
        open_store(settings_for(backend, tmp_path))
    assert library.count(COLLECTION) == len(PASSAGES)  # the owner is unaffected


def test_window_vectors_come_back_with_records(library: Store) -> None:
    windows = np.stack([axis(5), axis(6, tilt=5)])
    point = stored_point(PASSAGES[0])
    library.upsert(COLLECTION, [type(point)(point.id, point.dense, point.sparse, point.payload, windows)])

    record = library.retrieve(COLLECTION, [point.id], with_vectors=True)[0]
    assert record.windows.shape == (2, DIMENSION) and record.windows.dtype == np.float32
    np.testing.assert_allclose(record.windows, windows, atol=1e-3)  # stored as float16
    other = library.retrieve(COLLECTION, [point_id("harpoon")], with_vectors=True)[0]
    assert other.windows is None  # parents carry none


def test_similarities_are_cosines_to_the_best_window_or_the_dense_vector_and_bm25_scores_in_one_call(library: Store) -> None:
    windows = np.stack([axis(5), axis(6, tilt=5)])
    point = stored_point(PASSAGES[0])  # whale, dense along axis 0
    library.upsert(COLLECTION, [type(point)(point.id, point.dense, point.sparse, point.payload, windows)])
    query = axis(6)
    wanted = [point.id, point_id("harpoon"), point_id("ship")]

    by_window, by_dense, by_words = library.similarities(
        COLLECTION, wanted, [(query, WINDOWS), (axis(0), DENSE), (lexical.encode_query("whale harpoon"), SPARSE)])
    assert set(by_window) == {point.id}  # the others have no window vectors
    assert by_window[point.id] == pytest.approx(float(axis(6, tilt=5) @ query), abs=1e-3)  # the better one

    assert by_dense == pytest.approx({i: float(axis(0) @ library.retrieve(COLLECTION, [i], True)[0].dense)
                                      for i in wanted}, abs=1e-5)
    assert by_dense[point.id] == pytest.approx(1.0, abs=1e-5)
    assert set(by_words) == set(wanted) and max(by_words, key=by_words.__getitem__) == point_id("ship")  # both words
    assert library.similarities(COLLECTION, [], [(query, DENSE), (axis(0), WINDOWS)]) == [{}, {}]

    # Given a filter, the points outside it get no score: the search checks its candidates' level so.
    moby = Filter(must={f.BOOK_KEY: "moby"}, must_not={"name": "ship"})
    dense, words = library.similarities(COLLECTION, [*wanted, point_id("ball")],
                                        [(axis(0), DENSE), (lexical.encode_query("whale harpoon"), SPARSE)], moby)
    assert set(dense) == set(words) == {point.id, point_id("harpoon")}
    assert dense == pytest.approx({i: by_dense[i] for i in dense}, abs=1e-5)


def test_two_creators_of_one_collection_at_once_both_get_it(store: Store) -> None:
    for attempt in range(20):
        collection = f"raced-{attempt}"
        start = threading.Barrier(2)

        def create(collection: str = collection, start: threading.Barrier = start) -> CollectionInfo:
            start.wait()
            return store.ensure_collection(collection, DIMENSION, METADATA)

        with ThreadPoolExecutor(2) as pool:
            infos = [future.result() for future in [pool.submit(create), pool.submit(create)]]

        assert [(i.name, i.vector_size, i.metadata) for i in infos] == [(collection, DIMENSION, METADATA)] * 2
