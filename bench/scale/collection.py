"""The bench collection a scale run builds: its bytes on disk, the exact search its recall is measured against,
the copies a stopped build can go on from, and the time of each store call a query makes."""

from __future__ import annotations

import logging
import os
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from alexandria.settings import StoreSettings
from alexandria.store import DENSE, WINDOWS, Store, StoredPoint, open_store
from alexandria.store import schema as f
from alexandria.store.common import disk_usage
from alexandria.store.embedded import EmbeddedStore
from alexandria.store.factory import compact
from alexandria.store.lexical import encode_query
from alexandria.store.model import SPARSE
from bench.common import store_settings
from bench.replica import COPIES_PER_ROUND, SourceBooks
from services.query.common_words import CommonWords
from services.query.ranking import PREFETCH
from services.query.search import SearchQuery, candidate_filters, first_stage_pool, search_filter

BENCH = "bench"
VECTORS_FILE = "bench-vectors.npy"
ANN_LIMIT = 10
# Distance-based recall: a hit within (1 + EPSILON) of the exact 10th's cosine distance counts.
EPSILON = 0.01
# Exact search scores this many stored vectors at a time against every question.
EXACT_BLOCK = 200_000
# The estimate's margin over the synced books' own bytes a point: index growth, merges in flight, the WAL.
DISK_MARGIN = 1.5
GB = 1024**3
log = logging.getLogger("bench.scale")


def shard_bytes(path: Path) -> tuple[int, int]:
    """(segments and the rest, write-ahead log) bytes on disk of one collection's directory."""
    wal = disk_usage(path / "wal")
    return disk_usage(path) - wal, wal


def drop_from_page_cache(path: Path) -> None:
    """Evict this directory's files from the page cache (theirs alone), as after a reboot."""
    for file in path.rglob("*"):
        if file.is_file():
            fd = os.open(file, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def timed_open(settings: StoreSettings) -> tuple[Store, float]:
    started = time.perf_counter()
    store = open_store(settings)
    return store, time.perf_counter() - started


def check_disk(scratch: Path, needed: float, what: str) -> None:
    free = shutil.disk_usage(scratch).free
    log.info("disk: %.1f GB free under %s; %s needs about %.1f GB", free / GB, scratch, what, needed / GB)
    if needed > free:
        raise SystemExit(
            f"not enough disk for {what}: about {needed / GB:.1f} GB needed, {free / GB:.1f} GB free under "
            f"{scratch} (df -h {scratch}); build fewer points, or point --scratch at a larger disk"
        )


def estimate_bytes(settings: StoreSettings, source_collection: str, source: SourceBooks, copies: int) -> float:
    """Disk the largest size takes, from the synced books' own segment bytes a point, with a margin, plus
    the exact search's copy of the vectors."""
    segments, _ = shard_bytes(settings.embedded_path / source_collection)
    points = copies * len(source.records)
    return points * (segments / len(source.records) * DISK_MARGIN + source.vector_size * 4)


class ExactSearch:
    """Every searchable vector written to the bench collection, in a file beside it, searched exhaustively."""

    def __init__(self, source: SourceBooks, vectors: np.memmap, written: int) -> None:
        self.source = source
        self.searchable = np.array([r.payload.get(f.LEVEL) != f.Level.PARENT for r in source.records])
        self.vectors = vectors
        self.written = written
        self._rows: dict[str, int] = {}  # by point id, filled as far as a cosine needs

    @classmethod
    def create(cls, scratch: Path, source: SourceBooks, copies: int) -> ExactSearch:
        """Room for `copies` copies of the source's vectors, in a file in the scratch directory."""
        rows = (copies * len(source.records), source.vector_size)
        return cls(source, np.lib.format.open_memmap(scratch / VECTORS_FILE, "w+", np.float32, rows), 0)

    @classmethod
    def resumed(cls, scratch: Path, source: SourceBooks, copies: int, written_copies: int) -> ExactSearch:
        """The file an earlier --keep run filled with its first `written_copies` copies, with room for `copies`:
        made larger (its written rows copied into a new file) when this build goes past the size that one was
        given."""
        path = scratch / VECTORS_FILE
        vectors = np.load(path, mmap_mode="r+")
        rows, written = copies * len(source.records), written_copies * len(source.records)
        if vectors.shape[1] != source.vector_size:
            raise SystemExit(f"{path} holds vectors of {vectors.shape[1]} dimensions, the source collection's have "
                             f"{source.vector_size}: build anew without --resume")
        if vectors.shape[0] < rows:
            check_disk(scratch, rows * source.vector_size * 4, f"the exact search's {rows:,} vectors")
            log.info("making room for %d copies in %s (%d written)", copies, path, written_copies)
            larger = np.lib.format.open_memmap(path.with_suffix(".larger"), "w+", np.float32, (rows, source.vector_size))
            for start in range(0, written, EXACT_BLOCK):
                larger[start : min(start + EXACT_BLOCK, written)] = vectors[start : min(start + EXACT_BLOCK, written)]
            larger.flush()
            del larger, vectors
            path.with_suffix(".larger").replace(path)
            vectors = np.load(path, mmap_mode="r+")
        return cls(source, vectors, written)

    @classmethod
    def kept(cls, scratch: Path, source: SourceBooks, points: int) -> ExactSearch:
        """The vectors an earlier --keep run wrote beside its bench collection, the first `points` of them."""
        return cls(source, np.load(scratch / VECTORS_FILE, mmap_mode="r"), points)

    def add(self, first_copy: int, points: list[StoredPoint]) -> None:
        row = first_copy * len(self.source.records)
        self.vectors[row : row + len(points)] = np.stack([p.dense for p in points])
        self.written = max(self.written, row + len(points))

    def nearest(self, queries: np.ndarray, limit: int) -> list[dict[str, float]]:
        """The `limit` searchable points nearest each query: their ids and cosines."""
        queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
        best_scores = np.full((len(queries), 0), -np.inf, np.float32)
        best_rows = np.zeros((len(queries), 0), np.int64)
        per_copy = len(self.source.records)
        for start in range(0, self.written, EXACT_BLOCK):
            block = np.asarray(self.vectors[start : min(start + EXACT_BLOCK, self.written)])
            scores = queries @ block.T
            scores[:, ~self.searchable[np.arange(start, start + len(block)) % per_copy]] = -np.inf
            scores, rows = _best(scores, np.arange(start, start + len(block))[None, :], limit)
            best_scores, best_rows = _best(np.concatenate([best_scores, scores], axis=1),
                                           np.concatenate([best_rows, rows], axis=1), limit)
        return [{self._point_id(int(row)): float(score) for row, score in zip(query_rows, query_scores, strict=True)}
                for query_rows, query_scores in zip(best_rows, best_scores, strict=True)]

    def cosine(self, query: np.ndarray, point_id: str) -> float:
        """The cosine of a written point with a query."""
        for row in range(len(self._rows), self.written):
            self._rows[self._point_id(row)] = row
        return float(self.vectors[self._rows[point_id]] @ (query / np.linalg.norm(query)))

    def _point_id(self, row: int) -> str:
        copy, record = divmod(row, len(self.source.records))
        return self.source.point_id(copy, self.source.records[record].id)


def _best(scores: np.ndarray, rows: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """The `limit` highest scores of each query (row of `scores`) and their rows (`rows` broadcasts)."""
    keep = np.argpartition(-scores, min(limit, scores.shape[1]) - 1, axis=1)[:, :limit]
    return np.take_along_axis(scores, keep, axis=1), np.take_along_axis(np.broadcast_to(rows, scores.shape), keep, axis=1)


@dataclass(frozen=True)
class AnnRecall:
    """The store's dense query against exact search, over the recall questions (means)."""

    exact: float  # the share of the exact 10 nearest that the store returns
    within_epsilon: float  # the share of the store's 10 within (1 + EPSILON) of the exact 10th's distance
    query_ms: float  # p50, in this process


def ann_recall(store: Store, exact: ExactSearch, queries: np.ndarray, truth: list[dict[str, float]]) -> AnnRecall:
    """Recall@10 against `truth` (exact.nearest) twice: by id, and by distance. The bench's book copies are near-ties (a passage copied a
    thousand times, each copy nudged by noise), so that which copies make the exact 10 is nearly chance; a
    hit no farther than (1 + EPSILON) times the exact 10th's cosine distance counts in the second (the
    "approximate recall" of ann-benchmarks)."""
    where = search_filter(SearchQuery("", BENCH))
    by_id, by_distance, seconds = [], [], []
    for vector, nearest in zip(queries, truth, strict=True):
        started = time.perf_counter()
        hits = store.query_dense(BENCH, vector, where, ANN_LIMIT)
        seconds.append(time.perf_counter() - started)
        tenth_distance = 1 - min(nearest.values())
        by_id.append(len(nearest.keys() & {h.id for h in hits}) / ANN_LIMIT)
        by_distance.append(sum(1 - exact.cosine(vector, h.id) <= (1 + EPSILON) * tenth_distance
                               for h in hits) / ANN_LIMIT)
    return AnnRecall(float(np.mean(by_id)), float(np.mean(by_distance)), statistics.median(seconds) * 1000)


def settle_merges(store: Store) -> None:
    """Wait for the background merges the last writes started (a stack that keeps running does them while it
    serves), so that what is measured is the collection as it settles."""
    if isinstance(store, EmbeddedStore):
        started = time.perf_counter()
        store.finish_merges()
        log.info("background merges done %.0f s after the last write; %d segments", time.perf_counter() - started,
                 store.segment_count(BENCH))


def resumable_copies(store: Store, source: SourceBooks) -> int:
    """The copies in the bench collection an interrupted --keep run left, down to a whole round: the round it was
    writing is written again (a copy's points and noise depend on its number alone, so rewriting them is idempotent)."""
    if store.collection_info(BENCH) is None:
        return 0
    copies = store.count(BENCH) // len(source.records)
    return copies // COPIES_PER_ROUND * COPIES_PER_ROUND


def store_stages(store: Store, queries: np.ndarray, texts: list[str]) -> dict[str, float]:
    """The p50 ms of each store call a hybrid query makes (services/query/search.py): the fused first stage
    (its dense and lexical halves apart too), with the words it searches for (common_words.py: the sample of
    passages drawn, and then as kept) and with every word of the question, then its candidates' chunk, window and
    lexical scores (one call)."""
    where, checked_after = candidate_filters(SearchQuery("", BENCH))
    pool = first_stage_pool(checked_after)
    seconds: dict[str, list[float]] = {}

    def timed_call(stage: str, call: Callable[..., Any], *args: Any) -> Any:
        started = time.perf_counter()
        result = call(BENCH, *args)
        seconds.setdefault(stage, []).append(time.perf_counter() - started)
        return result

    common_words = CommonWords(store)
    for text, vector in zip(texts, queries, strict=True):
        terms = encode_query(text)
        timed_call("dense_ms", store.query_dense, vector, where, pool)
        timed_call("lexical_all_words_ms", store.query_sparse, terms, where, pool)
        # The collection's sample of passages drawn: what the first search pays, once every SAMPLE_KEPT_S.
        searched = timed_call("common_words_first_ms", CommonWords(store).without_common, terms)
        common_words.without_common(BENCH, terms)
        timed_call("common_words_ms", common_words.without_common, terms)
        timed_call("lexical_ms", store.query_sparse, searched, where, pool)
        timed_call("hybrid_all_words_ms", store.query_hybrid, vector, terms, where, pool, PREFETCH)
        hits = timed_call("hybrid_ms", store.query_hybrid, vector, searched, where, pool, PREFETCH)
        ids = [hit.id for hit in hits]
        timed_call("scores_ms", store.similarities, ids, [(vector, DENSE), (vector, WINDOWS), (terms, SPARSE)],
                   checked_after)
    return {stage: statistics.median(times) * 1000 for stage, times in seconds.items()}


def kept_collection(scratch: Path) -> tuple[StoreSettings, SourceBooks, ExactSearch]:
    """The bench collection a --keep run left under `scratch`: the store's settings, the synced books it
    copies, and the exact search over its vectors."""
    settings = store_settings(scratch)
    if not (scratch / VECTORS_FILE).is_file():
        raise SystemExit(f"no kept bench collection under {scratch}: build one first with --keep")
    store = open_store(settings)
    try:
        source = SourceBooks.read(store, settings.qdrant_collection)
        points = store.count(BENCH)
    finally:
        store.close()
    return settings, source, ExactSearch.kept(scratch, source, points)


def compact_bench(settings: StoreSettings, segment_mb: int) -> float:
    """The bench collection compacted (what `alexandria compact` runs), in seconds."""
    compaction = compact(settings.model_copy(update={"qdrant_collection": BENCH}), segment_mb, log.info)
    log.info("compacted into segments of up to %d MB: %d -> %d segments in %.0f s", segment_mb,
             compaction.segments_before, compaction.segments_after, compaction.seconds)
    return compaction.seconds
