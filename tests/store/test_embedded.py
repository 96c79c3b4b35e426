"""What only the embedded backend has: its metadata file, shutdown, and optimize beside queries."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from waiting import wait_until_blocking

from alexandria.errors import FailedPrecondition, NotFound, Unavailable
from alexandria.settings import available_cpus
from alexandria.store import Filter, StoredPoint, factory, lexical, open_store
from alexandria.store import schema as f
from alexandria.store.embedded import EmbeddedStore, tuning
from alexandria.store.embedded.readahead import WINDOWS_STORAGE
from alexandria.store.embedded.shard_files import segments_of, shard_segments
from alexandria.store.factory import compact, reporting_progress
from alexandria.store.model import CollectionLayout, DenseSearch
from alexandria.store.records import complete_books, complete_books_by_language
from store.synthetic import (
    BOOK_SIZES,
    COLLECTION,
    DIMENSION,
    METADATA,
    PASSAGES,
    axis,
    settings_for,
    stored_point,
)


@pytest.fixture
def embedded(tmp_path: Path) -> EmbeddedStore:
    store = open_store(settings_for("embedded", tmp_path))
    assert isinstance(store, EmbeddedStore)
    store.ensure_collection(COLLECTION, DIMENSION, METADATA)
    store.upsert(COLLECTION, [stored_point(p) for p in PASSAGES])
    yield store
    store.close()


def test_metadata_lives_in_a_json_file_beside_the_shard(embedded: EmbeddedStore, tmp_path: Path) -> None:
    root = tmp_path / "store"
    assert (root / COLLECTION).is_dir()
    assert json.loads((root / f"{COLLECTION}.json").read_text()) == {
        "vector_size": DIMENSION,
        "metadata": METADATA,
    }
    assert not list(root.glob("*.tmp"))


def test_a_shard_without_its_metadata_file_is_reported(embedded: EmbeddedStore, tmp_path: Path) -> None:
    (tmp_path / "store" / f"{COLLECTION}.json").unlink()
    with pytest.raises(FailedPrecondition, match="lost its metadata file"):
        embedded.collection_info(COLLECTION)


def test_a_closed_store_answers_unavailable(embedded: EmbeddedStore) -> None:
    embedded.close()
    with pytest.raises(Unavailable, match="closed"):
        embedded.count(COLLECTION)
    embedded.close()  # closing twice is harmless


def test_optimize_on_a_thread_beside_queries_and_writes(embedded: EmbeddedStore) -> None:
    # qdrant-edge holds the GIL while it optimises, so the threads take turns rather than
    # overlap (alexandria/store/embedded/tuning.py); what must hold is
    # that every call from either thread completes, and correctly.
    optimized = threading.Event()
    answers: list[list[str]] = []
    pride_only = Filter(must={f.BOOK_KEY: "pride"})

    def optimize() -> None:
        embedded.optimize(COLLECTION)
        optimized.set()

    def query_and_write_until_optimized() -> None:
        while not optimized.is_set():
            answers.append(
                [h.payload["name"] for h in embedded.query_dense(COLLECTION, axis(3), pride_only, limit=1)]
            )
            embedded.upsert(COLLECTION, [stored_point(PASSAGES[3])])

    workers = [threading.Thread(target=optimize), threading.Thread(target=query_and_write_until_optimized)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    assert all(answer == ["letter"] for answer in answers)
    assert embedded.count(COLLECTION) == len(PASSAGES)
    assert [h.payload["name"] for h in embedded.query_dense(COLLECTION, axis(3), None, limit=1)] == ["letter"]


def _configured_search_threads(tmp_path: Path) -> int:
    """The search pool size qdrant-edge recorded for the collection (it loads it from there)."""
    return json.loads((tmp_path / "store" / COLLECTION / "edge_config.json").read_text())["max_search_threads"]


def test_each_collection_searches_with_the_configured_threads_made_or_reopened(tmp_path: Path) -> None:
    settings = settings_for("embedded", tmp_path).model_copy(update={"embedded_search_threads": 3})
    store = open_store(settings)
    store.ensure_collection(COLLECTION, DIMENSION, METADATA)
    store.upsert(COLLECTION, [stored_point(p) for p in PASSAGES])
    store.close()
    assert _configured_search_threads(tmp_path) == 3

    reopened = open_store(settings.model_copy(update={"embedded_search_threads": 2}))
    try:
        assert _configured_search_threads(tmp_path) == 2
        hits = reopened.query_dense(COLLECTION, axis(3), None, limit=1)
        assert [h.payload["name"] for h in hits] == ["letter"]
    finally:
        reopened.close()


def test_search_threads_default_to_the_cpus_this_process_may_use(tmp_path: Path) -> None:
    assert settings_for("embedded", tmp_path).search_threads == available_cpus()


def test_aliases_live_in_a_json_file_and_a_collection_they_shadow_is_dropped_at_open(
    embedded: EmbeddedStore, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    embedded.ensure_collection("library-rebuilt", DIMENSION, METADATA)
    embedded.upsert("library-rebuilt", [stored_point(PASSAGES[0])])
    embedded.close()
    # What a swap killed after writing the alias map, before dropping the old collection, leaves.
    (root / "aliases.json").write_text(json.dumps({COLLECTION: "library-rebuilt"}))

    reopened = open_store(settings_for("embedded", tmp_path))
    try:
        assert not (root / COLLECTION).exists() and not (root / f"{COLLECTION}.json").exists()
        assert reopened.count(COLLECTION) == 1 and reopened.collection_target(COLLECTION) == "library-rebuilt"
    finally:
        reopened.close()


def test_optimize_after_each_book_keeps_the_write_ahead_log_within_two_segments(tmp_path: Path) -> None:
    # qdrant-edge's WAL segments are 32 MiB and dropped only once a flush has persisted their updates:
    # without optimize's flush this WAL would hold all 100 MB written.
    store = open_store(settings_for("embedded", tmp_path))
    store.ensure_collection(COLLECTION, DIMENSION, METADATA)
    text = "the whale rose from the grey sea " * 600  # 20 kB a point
    try:
        for book in range(25):  # 25 books x 200 points x 20 kB: 100 MB into the WAL
            points = [StoredPoint(f"00000000-0000-0000-{book:04d}-{n:012d}", axis(n % DIMENSION), lexical.encode_document("whale"),
                                  {f.BOOK_KEY: f"book-{book}", f.TEXT: text}) for n in range(200)]
            store.upsert(COLLECTION, points)
            store.optimize(COLLECTION)
        wal = store.collection_storage(COLLECTION).wal_bytes
        assert wal is not None and 32 * 2**20 < wal <= 2 * 32 * 2**20
        assert store.count(COLLECTION) == 25 * 200
    finally:
        store.close()


def _written_in_small_segments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, books: int) -> None:
    """A collection of `books` books of 60 points, each book indexed into a segment of its own (segments
    capped at 2 KB of vectors, indexed from 1 KB): a large library's many segments, in miniature."""
    monkeypatch.setattr(tuning, "INDEXING_THRESHOLD_KB", 1)
    settings = settings_for("embedded", tmp_path)
    store = EmbeddedStore.open(settings.embedded_path, 2, CollectionLayout(), max_segment_kb=2, merged_segment_kb=0)
    try:
        store.ensure_collection(COLLECTION, DIMENSION, METADATA)
        for book in range(books):
            store.upsert(COLLECTION, [
                StoredPoint(f"00000000-0000-0000-{book:04d}-{n:012d}", axis(n % DIMENSION),
                            lexical.encode_document(f"word{n}"), {f.BOOK_KEY: f"book-{book}", "n": n})
                for n in range(60)
            ])
            store.optimize(COLLECTION)
    finally:
        store.close()


def test_a_collection_past_eight_segments_asks_less_of_each_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = CollectionLayout()
    _written_in_small_segments(tmp_path, monkeypatch, books=2)
    store = EmbeddedStore.open(settings_for("embedded", tmp_path).embedded_path, 2, layout, max_segment_kb=2, merged_segment_kb=0)
    try:
        assert store.segment_count(COLLECTION) <= 8
        assert store.dense_search(COLLECTION) == DenseSearch(layout.hnsw_ef, layout.oversampling)
        assert store.collection_storage(COLLECTION).search_note == ""
    finally:
        store.close()

    _written_in_small_segments(tmp_path, monkeypatch, books=10)  # the same collection grown to 10 books
    store = EmbeddedStore.open(settings_for("embedded", tmp_path).embedded_path, 2, layout, max_segment_kb=2, merged_segment_kb=0)
    try:
        segments = store.segment_count(COLLECTION)
        assert segments > 8
        assert store.dense_search(COLLECTION) == DenseSearch(layout.hnsw_ef // 2, 1.0)
        assert store.collection_storage(COLLECTION).search_note == (
            f"dense searches visit {layout.hnsw_ef // 2} candidates a segment, and a semantic search rescores 1x its results ({segments} "
            f"segments, past 8; QDRANT_HNSW_EF {layout.hnsw_ef}, QDRANT_QUANTIZATION_OVERSAMPLING 2)")
        # Still every point: the nearest one first, within the filter.
        hits = store.query_dense(COLLECTION, axis(7), Filter(must={f.BOOK_KEY: "book-3"}), 1)
        assert [(h.payload[f.BOOK_KEY], h.payload["n"]) for h in hits] == [("book-3", 7)]
    finally:
        store.close()


def test_compact_merges_a_collections_segments_and_later_merges_keep_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _written_in_small_segments(tmp_path, monkeypatch, books=10)
    settings = settings_for("embedded", tmp_path).model_copy(update={"qdrant_collection": COLLECTION})
    assert shard_segments(settings.embedded_path / COLLECTION) > 8
    monkeypatch.setattr(tuning, "LARGE_SEGMENT_BYTES", 1)  # every merged segment counts as large

    said: list[str] = []
    compaction = compact(settings, max_segment_mb=10, report=said.append)

    assert re.fullmatch(rf"compacting {COLLECTION} under .* \(\d+ segments, 0\.0 GB\) into segments of up to "
                        r"10 MB: on a large library, best left to run overnight", said[0])
    assert compaction.collection == COLLECTION
    assert compaction.hnsw_ef == 4 * settings.qdrant_hnsw_ef  # as deep as it goes
    assert compaction.segments_before > 8 >= compaction.segments_after
    assert shard_segments(settings.embedded_path / COLLECTION) == compaction.segments_after
    largest = max(s.vector_bytes for s in segments_of(settings.embedded_path / COLLECTION) if s.sealed)
    monkeypatch.setattr(tuning, "LARGE_SEGMENT_BYTES", largest // 2)
    # The stack's next open, with its own small cap, searches the merged segments and splits none.
    store = EmbeddedStore.open(settings.embedded_path, 2, CollectionLayout(), max_segment_kb=2, merged_segment_kb=0)
    try:
        store.optimize(COLLECTION)
        assert store.count(COLLECTION) == 10 * 60
        hits = store.query_sparse(COLLECTION, lexical.encode_query("word7"), Filter(must={f.BOOK_KEY: "book-3"}), 5)
        assert [(h.payload[f.BOOK_KEY], h.payload["n"]) for h in hits] == [("book-3", 7)]
        assert store.segment_count(COLLECTION) == compaction.segments_after
        # Every later process searches its larger graphs deeper, by how much larger they are.
        assert store.dense_search(COLLECTION).hnsw_ef == 2 * settings.qdrant_hnsw_ef
        assert store.collection_storage(COLLECTION).search_note.startswith(
            f"dense searches visit {2 * settings.qdrant_hnsw_ef} candidates a segment, and a semantic search rescores 2x its results (its "
            "largest segment holds 0 MB of vectors;")
        # A hybrid query's dense half, whose candidates are only ranked for the fusion, goes half as deep at most.
        monkeypatch.setattr(tuning, "LARGE_SEGMENT_BYTES", largest // 8)
        ef = settings.qdrant_hnsw_ef
        assert store.dense_search(COLLECTION).hnsw_ef == 4 * ef
        recording = store._shards[COLLECTION] = _RecordingQueries(store._shards[COLLECTION])  # type: ignore[assignment]
        assert store.query_hybrid(COLLECTION, axis(7), lexical.encode_query("word7"), None, limit=3, prefetch_limit=6)
        assert store.query_dense(COLLECTION, axis(7), None, limit=3)
        (hybrid_request, dense_request) = recording.requests
        assert hybrid_request.prefetches[0].params.hnsw_ef == 2 * ef  # type: ignore[attr-defined]
        assert dense_request.params.hnsw_ef == 4 * ef  # type: ignore[attr-defined]
        assert store.collection_storage(COLLECTION).search_note.startswith(
            f"dense searches visit {4 * ef} candidates a segment (a hybrid search's dense half {2 * ef}), and a "
            "semantic search rescores 2x its results")
        store.delete_collection(COLLECTION)
        store.ensure_collection(COLLECTION, DIMENSION, METADATA)  # made anew: no large segment
        assert store.dense_search(COLLECTION).hnsw_ef == CollectionLayout().hnsw_ef
    finally:
        store.close()


def test_compact_refuses_when_the_disk_cannot_hold_the_collection_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _written_in_small_segments(tmp_path, monkeypatch, books=2)
    settings = settings_for("embedded", tmp_path).model_copy(update={"qdrant_collection": COLLECTION})
    before = shard_segments(settings.embedded_path / COLLECTION)
    monkeypatch.setattr(factory.shutil, "disk_usage", lambda path: SimpleNamespace(total=100, used=100, free=0))
    said: list[str] = []

    with pytest.raises(FailedPrecondition, match=rf"Compacting '{COLLECTION}' writes its 0.0 GB of segments again "
                       r"before it deletes the old ones, and .* has 0.0 GB free: free 0.0 GB more there"):
        compact(settings, max_segment_mb=10, report=said.append)

    assert not said
    assert shard_segments(settings.embedded_path / COLLECTION) == before


def test_a_compaction_says_how_far_it_got_while_it_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(factory, "PROGRESS_S", 0.05)
    said: list[str] = []
    with reporting_progress(tmp_path, 2 * 1024**3, said.append):
        (tmp_path / "merged").write_bytes(b"x" * (110 * 1024**2))
        wait_until_blocking(lambda: any("0.1 of about" in line for line in said), what="a report of 0.1 GB written",
                            interval_s=0.05)
    reported = len(said)
    time.sleep(0.2)

    assert re.fullmatch(r"0 min: 0\.1 of about 2\.0 GB written again", said[-1])
    assert len(said) == reported, "nothing is reported once the compaction is over"


def test_what_an_interrupted_merge_left_is_removed_by_the_next_process_that_owns_the_store(
    embedded: EmbeddedStore, tmp_path: Path
) -> None:
    builds = tmp_path / "store" / COLLECTION / "temp_segments"
    (builds / "segment_builder_x" / "vector_index-dense").mkdir(parents=True)
    (builds / "segment_builder_x" / "vector_index-dense" / "graph.bin").write_bytes(b"x" * 4096)

    with pytest.raises(FailedPrecondition, match="Another process holds the store"):
        open_store(settings_for("embedded", tmp_path))
    assert (builds / "segment_builder_x").is_dir(), "the owner's merge in progress is not the second opener's"

    embedded.close()  # a `compact` killed mid-merge, as far as the folder can tell
    reopened = open_store(settings_for("embedded", tmp_path))
    try:
        assert builds.is_dir() and not any(builds.iterdir())
        assert reopened.count(COLLECTION) == len(PASSAGES)
        reopened.optimize(COLLECTION)
    finally:
        reopened.close()


def test_compact_names_what_is_wrong_instead_of_compacting(tmp_path: Path) -> None:
    with pytest.raises(FailedPrecondition, match="There is no embedded store at"):
        compact(settings_for("embedded", tmp_path), max_segment_mb=1000)
    assert not (tmp_path / "store").exists(), "nothing is made where there was nothing to compact"
    open_store(settings_for("embedded", tmp_path)).close()
    with pytest.raises(NotFound, match="'alexandria' does not exist"):
        compact(settings_for("embedded", tmp_path), max_segment_mb=1000)
    with pytest.raises(FailedPrecondition, match="merges its collections' segments itself"):
        compact(settings_for("server", tmp_path), max_segment_mb=1000)
    running = open_store(settings_for("embedded", tmp_path))  # what `alexandria up` holds while it runs
    running.ensure_collection(COLLECTION, DIMENSION, METADATA)
    try:
        with pytest.raises(FailedPrecondition, match="Another process holds the store"):
            compact(settings_for("embedded", tmp_path), max_segment_mb=1000)
    finally:
        running.close()


@pytest.mark.parametrize("on_disk", [False, True])
def test_the_lexical_index_is_kept_as_the_collection_was_made_whatever_reopens_it(
    tmp_path: Path, on_disk: bool
) -> None:
    made = settings_for("embedded", tmp_path).model_copy(update={"qdrant_on_disk": on_disk})
    store = open_store(made)
    store.ensure_collection(COLLECTION, DIMENSION, METADATA)
    store.upsert(COLLECTION, [stored_point(p) for p in PASSAGES])
    store.close()
    recorded = tmp_path / "store" / COLLECTION / "edge_config.json"
    memory = json.loads(recorded.read_text())["sparse_vectors"]["lexical"].get("memory")
    assert memory == ("cold" if on_disk else None)

    reopened = open_store(made.model_copy(update={"qdrant_on_disk": not on_disk}))
    try:
        assert json.loads(recorded.read_text())["sparse_vectors"]["lexical"].get("memory") == memory
        hits = reopened.query_sparse(COLLECTION, lexical.encode_query("harpoon"), None, limit=5)
        assert {h.payload["name"] for h in hits} == {"harpoon", "ship"}
    finally:
        reopened.close()


def _payload_indexes(store: EmbeddedStore) -> dict[str, bool]:
    """Each payload index of the test collection: whether it is read from disk."""
    with store._using(COLLECTION) as shard:
        schema = shard.info().payload_schema
    return {name: bool(index.params.on_disk) for name, index in schema.items()}


def test_a_new_collection_reads_its_payload_indexes_from_disk_but_those_every_search_filters_on(
    embedded: EmbeddedStore
) -> None:
    indexes = _payload_indexes(embedded)
    assert set(indexes) == {*f.KEYWORD_INDEXES, *f.INTEGER_INDEXES, *f.BOOL_INDEXES, *f.TEXT_INDEXES}
    assert indexes == {name: name not in (f.COMPLETE, f.LEVEL) for name in indexes}
    # The filters a search and a removal use answer from the indexes on disk.
    hits = embedded.query_dense(COLLECTION, axis(0), Filter(must={f.BOOK_KEY: PASSAGES[0].book_key}), 3)
    assert hits and {hit.payload[f.BOOK_KEY] for hit in hits} == {PASSAGES[0].book_key}


def test_a_collection_keeps_the_indexes_it_was_made_with_until_compacted(tmp_path: Path) -> None:
    settings = settings_for("embedded", tmp_path).model_copy(update={"qdrant_collection": COLLECTION})
    in_ram = EmbeddedStore.open(settings.embedded_path, 2, CollectionLayout(on_disk=False), max_segment_kb=100_000, merged_segment_kb=0)
    try:
        in_ram.ensure_collection(COLLECTION, DIMENSION, METADATA)
        in_ram.upsert(COLLECTION, [stored_point(p) for p in PASSAGES])
        assert not any(_payload_indexes(in_ram).values())
    finally:
        in_ram.close()
    store = open_store(settings)
    assert isinstance(store, EmbeddedStore)
    try:
        store.ensure_collection(COLLECTION, DIMENSION, METADATA)  # what a later ingest does: nothing built again
        assert not any(_payload_indexes(store).values())
    finally:
        store.close()

    compact(settings, max_segment_mb=10)

    store = open_store(settings)
    assert isinstance(store, EmbeddedStore)
    try:
        assert _payload_indexes(store) == {name: name not in (f.COMPLETE, f.LEVEL) for name in _payload_indexes(store)}
        assert store.count(COLLECTION, Filter(must={f.BOOK_KEY: PASSAGES[0].book_key})) == sum(
            p.book_key == PASSAGES[0].book_key for p in PASSAGES)
    finally:
        store.close()


class _CountingFacets:
    """A shard that counts the facet reads it answers."""

    def __init__(self, shard: object) -> None:
        self.shard = shard
        self.facets = 0

    def facet(self, request: object) -> object:
        self.facets += 1
        return self.shard.facet(request)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.shard, name)


class _RecordingQueries:
    """A shard that keeps the query requests it answers."""

    def __init__(self, shard: object) -> None:
        self.shard = shard
        self.requests: list[object] = []

    def query(self, request: object) -> object:
        self.requests.append(request)
        return self.shard.query(request)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.shard, name)


def test_a_hybrid_querys_dense_prefetch_leaves_its_candidates_quantised_scores_as_they_are(
    embedded: EmbeddedStore,
) -> None:
    recording = embedded._shards[COLLECTION] = _RecordingQueries(embedded._shards[COLLECTION])  # type: ignore[assignment]
    hybrid = embedded.query_hybrid(COLLECTION, axis(0), lexical.encode_query("whale"), None, limit=3, prefetch_limit=6)
    dense = embedded.query_dense(COLLECTION, axis(0), None, limit=3)

    assert hybrid and dense
    hybrid_request, dense_request = recording.requests
    dense_prefetch, _lexical = hybrid_request.prefetches  # type: ignore[attr-defined]
    # the fused pool's exact cosines are read after (similarities): rescoring here would read the originals for ranks
    assert dense_prefetch.params.quantization.rescore is False
    assert dense_request.params.quantization.rescore is True  # type: ignore[attr-defined]


def test_facet_counts_are_read_from_the_shard_again_only_after_a_write(embedded: EmbeddedStore) -> None:
    counting = embedded._shards[COLLECTION] = _CountingFacets(embedded._shards[COLLECTION])  # type: ignore[assignment]
    for _ in range(3):
        assert embedded.facet_counts(COLLECTION, f.BOOK_KEY) == BOOK_SIZES
    assert embedded.facet_counts(COLLECTION, f.BOOK_KEY, Filter(must={f.COMPLETE: True})) == {}
    assert counting.facets == 2  # one for each filter

    embedded.set_payload(COLLECTION, Filter(must={f.BOOK_KEY: "pride"}), {f.COMPLETE: True})
    assert embedded.facet_counts(COLLECTION, f.BOOK_KEY, Filter(must={f.COMPLETE: True})) == {"pride": 2}
    assert embedded.facet_counts(COLLECTION, f.BOOK_KEY) == BOOK_SIZES
    assert counting.facets == 4


def test_the_books_of_the_language_with_most_points_are_the_books_the_others_leave(embedded: EmbeddedStore) -> None:
    embedded.set_payload(COLLECTION, Filter(must={f.BOOK_KEY: ["moby", "pride"]}), {f.LANGUAGE: "eng"})
    embedded.set_payload(COLLECTION, Filter(must={f.BOOK_KEY: "germinal"}), {f.LANGUAGE: "fra"})
    embedded.set_payload(COLLECTION, Filter(must={f.BOOK_KEY: list(BOOK_SIZES)}), {f.COMPLETE: True})
    books_held = complete_books(embedded, COLLECTION)  # what alexandria_stats has read before
    assert books_held == BOOK_SIZES
    counting = embedded._shards[COLLECTION] = _CountingFacets(embedded._shards[COLLECTION])  # type: ignore[assignment]

    assert complete_books_by_language(embedded, COLLECTION, len(books_held)) == {"eng": 2, "fra": 1}
    # the languages' points (all, and those not complete), then the books of French alone (the same two)
    assert counting.facets == 4


def _windows_read_advice(shard_path: Path) -> list[str]:
    """How the kernel reads ahead in each mapping this process holds of the windows under `shard_path`: "random"
    (VmFlags rr), "sequential" (sr) or "normal"."""
    advice, path = [], None
    with open("/proc/self/smaps", encoding="utf-8") as smaps:
        for line in smaps:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                fields = line.split(maxsplit=5)
                path = fields[5].strip() if len(fields) == 6 else None
            elif line.startswith("VmFlags:") and path and path.startswith(f"{shard_path}/") \
                    and f"/{WINDOWS_STORAGE}/" in path:
                flags = line.split()[1:]
                advice.append("random" if "rr" in flags else "sequential" if "sr" in flags else "normal")
    return advice


@pytest.mark.skipif(not Path("/proc/self/smaps").is_file(), reason="reads this process's mappings from /proc (Linux)")
def test_the_windows_are_read_at_random_once_written_and_once_reopened(tmp_path: Path) -> None:
    settings = settings_for("embedded", tmp_path)
    shard_path = tmp_path / "store" / COLLECTION
    store = open_store(settings)
    try:
        store.ensure_collection(COLLECTION, DIMENSION, METADATA)
        store.upsert(COLLECTION, [stored_point(p) for p in PASSAGES])
        store.optimize(COLLECTION)
        written = _windows_read_advice(shard_path)
    finally:
        store.close()
    reopened = open_store(settings)
    try:
        assert reopened.count(COLLECTION) == len(PASSAGES)
        loaded = _windows_read_advice(shard_path)
    finally:
        reopened.close()
    # The engine maps each file twice, one mapping advised sequential: none of them may stay so.
    assert written and set(written) == {"random"}
    assert loaded and set(loaded) == {"random"}
