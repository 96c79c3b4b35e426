"""bench.scale's building blocks on a small real embedded store: copies, exact search, recall, disk.

The synthetic library (store/synthetic.py) plus one chapter with a child stands for the synced books.
Below the store's indexing threshold the dense query scans every point, so it must agree with the
bench's exact search exactly: a recall of 1 checks the exact search and its row -> id mapping.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from alexandria.store import Filter, StoredPoint, lexical, open_store
from alexandria.store import schema as f
from alexandria.store.embedded import shard_segments
from bench import replica
from bench.common import Latency
from bench.scale import collection, figures
from store.synthetic import COLLECTION, DIMENSION, METADATA, PASSAGES, axis, settings_for, stored_point

COPIES = 4




def _chapter() -> list[StoredPoint]:
    """A chapter (parent) and one child under it, complete."""
    parent_id, child_id = "5d0e2a8c-1111-4a5e-9b1e-000000000001", "5d0e2a8c-1111-4a5e-9b1e-000000000002"
    common = {f.BOOK_KEY: "moby", f.COMPLETE: True}
    return [
        StoredPoint(parent_id, axis(5), lexical.encode_document("chapter one"),
                    {**common, f.LEVEL: f.Level.PARENT.value, f.TEXT: "chapter one"}),
        StoredPoint(child_id, axis(6), lexical.encode_document("call me ishmael"),
                    {**common, f.LEVEL: f.Level.CHILD.value, f.TEXT: "call me ishmael", f.PARENT_ID: parent_id}),
    ]


def test_copies_keep_the_books_apart_and_the_search_agrees_with_exact_search(tmp_path: Path) -> None:
    store = open_store(settings_for("embedded", tmp_path))
    try:
        store.ensure_collection(COLLECTION, DIMENSION, METADATA)
        flat = [stored_point(p) for p in PASSAGES]
        store.upsert(COLLECTION, [*flat, *_chapter()])
        store.set_payload(COLLECTION, Filter(), {f.COMPLETE: True})
        source = replica.SourceBooks.read(store, COLLECTION)
        assert (len(source.records), source.books, source.passages) == (len(PASSAGES) + 2, 3, len(PASSAGES) + 1)

        exact = collection.ExactSearch.create(tmp_path, source, COPIES)
        first = replica.write_copies(store, source, collection.BENCH, range(2), exact.add)
        rest = replica.write_copies(store, source, collection.BENCH, range(2, COPIES), exact.add)

        assert first.points + rest.points == store.count(collection.BENCH) == COPIES * len(source.records)
        books = store.facet_counts(collection.BENCH, f.BOOK_KEY)
        assert books["moby-copy3"] == 5 and len(books) == COPIES * source.books
        children = store.scroll(collection.BENCH, Filter(must={f.LEVEL: f.Level.CHILD.value}), limit=100)
        parents = {r.id: r for r in store.scroll(collection.BENCH, Filter(must={f.LEVEL: f.Level.PARENT.value}), limit=100)}
        assert {parents[c.payload[f.PARENT_ID]].payload[f.BOOK_KEY] for c in children} == {
            c.payload[f.BOOK_KEY] for c in children}  # each child under its own copy's chapter

        queries = np.stack([axis(0), axis(2, tilt=3), axis(5), axis(6, tilt=4)])
        truth = exact.nearest(queries, 3)
        assert all(len(ids) == 3 for ids in truth)
        assert not set().union(*truth) & set(parents)  # chapters are not searched
        assert [exact.cosine(q, max(t, key=t.__getitem__)) for q, t in zip(queries, truth, strict=True)] == \
            pytest.approx([max(t.values()) for t in truth])
        recall = collection.ann_recall(store, exact, queries, exact.nearest(queries, collection.ANN_LIMIT))
        assert (recall.exact, recall.within_epsilon) == (1.0, 1.0)
        # what a --keep run leaves is read back by --sweep
        exact.vectors.flush()
        kept = collection.ExactSearch.kept(tmp_path, source, exact.written)
        assert kept.nearest(queries, 3) == truth
    finally:
        store.close()
    segments, wal = collection.shard_bytes(tmp_path / "store" / collection.BENCH)
    assert segments > 0 and wal > 0
    assert shard_segments(tmp_path / "store" / collection.BENCH) >= 1


def test_a_collection_measured_without_building_it_leaves_the_build_figures_blank() -> None:
    latency = Latency(10.0, 20.0, 5)
    size = figures.Size(
        books=10, points=3000, passages=2700, write_pps=None, upsert_pps=None, segments_gb=0.5, wal_gb=0.01,
        segments=3, reopen_cold_s=1.0, reopen_warm_s=0.5, ann=collection.AnnRecall(0.9, 0.99, 1.5), stack_start_s=4.0,
        rss_start_gb=1.0, rss_idle_gb=1.1, rss_load_gb=1.2, anon_idle_gb=0.3, anon_load_gb=0.4, precise=latency,
        contextual=latency, under_load=latency, compact_s=12.4,
    )
    _, row = figures.table([size]).splitlines()
    assert row.split()[:4] == ["10", "3,000", "0.50", "0.01"]  # no write rates: the next cells are the disk's
    assert row.split()[-1] == "12"
    summary = figures.summary([size], None, settings_for("embedded", Path("unused")))
    assert summary["write_pps"] is None and summary["estimate_10000_books"]["build_hours"] is None
    assert summary["estimate_10000_books"]["disk_gb"] == pytest.approx(0.51 * 1000, abs=0.1)


def test_a_stopped_build_resumes_from_its_last_whole_round(tmp_path: Path) -> None:
    copies = replica.COPIES_PER_ROUND * 2 + 3
    store = open_store(settings_for("embedded", tmp_path))
    try:
        store.ensure_collection(COLLECTION, DIMENSION, METADATA)
        store.upsert(COLLECTION, [*[stored_point(p) for p in PASSAGES], *_chapter()])
        store.set_payload(COLLECTION, Filter(), {f.COMPLETE: True})
        source = replica.SourceBooks.read(store, COLLECTION)
        assert collection.resumable_copies(store, source) == 0  # no bench collection yet

        exact = collection.ExactSearch.create(tmp_path, source, copies)
        round_end = replica.COPIES_PER_ROUND
        replica.write_copies(store, source, collection.BENCH, range(round_end), exact.add)
        # stopped in the middle of the next round: two copies of it written, the rest not
        replica.write_copies(store, source, collection.BENCH, range(round_end, round_end + 2), exact.add)
        exact.vectors.flush()
        assert collection.resumable_copies(store, source) == round_end

        written_before = np.array(exact.vectors[: round_end * len(source.records)])
        more = copies + 2  # resumed past the size the build started with: the exact search's file grows
        resumed = collection.ExactSearch.resumed(tmp_path, source, more, round_end)
        assert resumed.written == round_end * len(source.records) and len(resumed.vectors) == more * len(source.records)
        assert np.array_equal(resumed.vectors[: len(written_before)], written_before)
        replica.write_copies(store, source, collection.BENCH, range(round_end, more), resumed.add)

        points = store.scroll(collection.BENCH, None, limit=10 * more * len(source.records), with_vectors=True)
        assert len({p.id for p in points}) == len(points) == more * len(source.records)
        assert resumed.written == more * len(source.records)
        assert not np.any(np.all(np.asarray(resumed.vectors) == 0, axis=1))  # every row of the exact search written
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith("bench-vectors")] == [collection.VECTORS_FILE]
    finally:
        store.close()
