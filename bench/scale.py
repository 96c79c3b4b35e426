"""The whole library on one machine: store size, memory, restart, query latency and ANN recall as it grows.

    .venv/bin/python bench/scale.py --points 100000 --points 1000000 [--books 10000] [--compact-mb 1000]
                                    [--queries 200] [--clients 30] [--scratch var/bench-scale] [--keep]
    .venv/bin/python bench/scale.py --sweep [--ef 64 --ef 128 ...] [--oversampling 1 --oversampling 3 ...]
    .venv/bin/python bench/scale.py --kept [--compact-mb 1000] --scratch var/bench-scale

With no size (no --points, no --books), only step 1: the sync and the embedder's memory.

1. Source: `alexandria up` on an empty store with the shared Calibre library, then `alexandria sync` (the
   CLI, as a user runs it): the whole library through the real embedder process, whose memory is read
   at idle after it (2 s later: services/embedder/memory.py), with its peak. The same embedder then encodes
   the recall questions, once. Both are kept in the scratch directory, and skipped when already there.
2. A `bench` collection grows, size after size (`--points`: points in all, chapters included; `--books`:
   books), by copies of the synced books written through the store adapter (bench/replica.py), indexed
   as it grows, its segments merged in the background past eight as a stack merges them (the build waits for the
   last merges before it measures). The store is opened with the StoreSettings of the environment (every QDRANT_*
   and EMBEDDED_* variable but the server's address: this bench measures the embedded store a stack runs).
   At each size:
   - write throughput: the points written for this size over the time their upserts and optimizes took;
   - disk: the collection's segments and its write-ahead log apart, in all and a book;
   - reopen: the time `open_store` takes on the closed store (a restart), cold (this store's files
     dropped from the page cache first, by posix_fadvise: other processes' pages are left alone) and warm;
   - ANN recall@10: the dense query the store answers (the query service's filter: complete, searchable
     points) against exact search (every searchable vector, kept aside as it was written) for
     `--queries` real questions (bench/retrieval_questions/, several wordings each), twice: by id, and by
     distance (a hit within 1% of the exact 10th's cosine distance counts). The copies of a passage are
     near-ties, so which of them make the exact 10 is nearly chance, and recall by id barely follows
     hnsw_ef; recall by distance is the figure to compare with a library without copies;
   - through the stack (`alexandria up` on this store with QDRANT_COLLECTION=bench): the services
     process's RSS at idle (after start, after the latency runs) and at its peak while `--clients` MCP
     clients, each its own connection, ask `--client-queries` questions each at once; alexandria_query
     p50 / p95 in precise and contextual mode, taking turns on each question (the order rotated every
     question, so that neither mode runs on a page cache the other warmed for that question), other
     questions than the recall's and the warm-up's.
3. With --compact-mb: the largest size compacted (alexandria/store/factory.py: compact, what `alexandria
   compact` runs) into segments of up to that many MB, timed, then every figure of step 2 again (its row
   shows the compaction's seconds; the build's throughput is the build's).
Before building, the free disk is checked against an estimate (from the synced books' own bytes a
point); the bench refuses when the estimate does not fit. The scratch directory is removed at the end
unless --keep. A --keep build stopped before its end (a killed process, a restarted machine) goes on
from the copies already written with `--resume`; a finished one grows with `--resume` and a larger size (the
exact search's file is copied into a larger one). `--sweep` builds nothing: on the
collection a --keep run left it measures the ANN recall (both) and query time at each --ef (hnsw_ef) and
--oversampling (of a quantised collection) given.
`--kept` builds nothing either: it measures every figure of step 2 but the build's on the collection a --keep
run left, after compacting it with --compact-mb (a collection compacted before by `alexandria compact` is
measured as it stands); the scratch directory is kept. With --memory-gb, the whole stack (every process
`alexandria up` starts: gateway, services, embedder) is held to that much memory together, page cache included
(a cgroup v1 memory group, as a container's limit holds a container).

The last line is JSON, for the largest size built: books, points, disk_gb, wal_gb, rss_gb (services,
peak under load), rss_anon_gb (its anonymous part: the rest is the store's mapped files, which the
kernel can evict), reopen_s (cold), write_pps, query_p50_ms, query_p95_ms, contextual_p50_ms,
ann_recall@10, ann_recall@10_within_epsilon; then every size under "sizes", the embedder's memory after the sync under "embedder",
an extrapolation to 10,000 books under "estimate_10000_books", and the store settings under "store".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mcp import Client
from query import Latency, call_tool, distinct_questions, in_turn, query_tool
from questions import DEFAULT_CORPUS, load_questions
from replica import COPIES_PER_ROUND, SourceBooks, write_copies
from retrieval import store_settings
from stack import rss_mb

from alexandria.clients import EmbedderClient
from alexandria.logs import configure_logging
from alexandria.settings import ClientSettings, StoreSettings
from alexandria.store import DENSE, WINDOWS, Store, StoredPoint, open_store
from alexandria.store import schema as f
from alexandria.store.common import disk_usage
from alexandria.store.embedded import EmbeddedStore
from alexandria.store.embedded.shard_files import shard_segments
from alexandria.store.factory import compact
from alexandria.store.lexical import encode_query
from alexandria.store.model import SPARSE
from alexandria_stack.layout import StackLayout
from services.embedder.memory import IDLE_BEFORE_RELEASE_S
from services.query.common_words import CommonWords
from services.query.ranking import PREFETCH
from services.query.search import SearchQuery, candidate_filters, first_stage_pool, search_filter
from tests.e2e.stack import RunningStack, start_stack

DEFAULT_SCRATCH = ROOT / "var" / "bench-scale"
BENCH = "bench"
VECTORS_FILE = "bench-vectors.npy"
ANN_LIMIT = 10
# Distance-based recall: a hit within (1 + EPSILON) of the exact 10th's cosine distance counts.
EPSILON = 0.01
WARM_UP_QUERIES = 20
RSS_SAMPLE_S = 0.02
# Exact search scores this many stored vectors at a time against every question.
EXACT_BLOCK = 200_000
# The estimate's margin over the synced books' own bytes a point: index growth, merges in flight, the WAL.
DISK_MARGIN = 1.5
GB = 1024**3
CGROUP_MEMORY = Path("/sys/fs/cgroup/memory")
LIBRARY_BOOKS = 10_000

log = logging.getLogger("bench.scale")


@dataclass(frozen=True)
class EmbedderMemory:
    """The embedder process after the sync: resident, peak, anonymous (heap) and file-backed (libraries,
    mapped weights) memory in MB, and its threads."""

    rss_mb: float
    peak_mb: float
    anonymous_mb: float
    file_mb: float
    threads: int
    sync_s: float

    @classmethod
    def of(cls, pid: int, sync_s: float) -> EmbedderMemory:
        rollup = {}
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
            name, value, *_ = line.split()
            rollup[name.rstrip(":")] = int(value) / 1024
        threads = len(list(Path(f"/proc/{pid}/task").iterdir()))
        return cls(rss_mb(pid), rss_mb(pid, "VmHWM"), rollup["Anonymous"], rollup["Rss"] - rollup["Anonymous"],
                   threads, sync_s)


@dataclass(frozen=True)
class Size:
    """The figures of one size of the bench collection."""

    books: int
    points: int
    passages: int
    write_pps: float | None  # None: not built by this run (--kept)
    upsert_pps: float | None
    segments_gb: float
    wal_gb: float
    segments: int  # every query searches each one
    reopen_cold_s: float
    reopen_warm_s: float
    ann: AnnRecall
    stack_start_s: float
    rss_start_gb: float
    rss_idle_gb: float
    rss_load_gb: float
    anon_idle_gb: float  # of the RSS: anonymous memory (the heap), the rest being mapped files (the store's)
    anon_load_gb: float
    precise: Latency
    contextual: Latency
    under_load: Latency
    compact_s: float | None = None  # the figures after `alexandria compact` (--compact-mb), which took this long
    memory_limit_gb: float | None = None  # the whole stack held to this much memory, page cache included

    @property
    def disk_gb(self) -> float:
        return self.segments_gb + self.wal_gb


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


@contextmanager
def memory_group(limit_gb: float | None) -> Iterator[Path | None]:
    """A memory cgroup (v1) of `limit_gb`, page cache included, as a container's memory limit (None when no
    limit is asked). The processes this one starts while it is in the group (join) stay in it: a process
    moved in later would bring none of its pages along (this kernel moves no charges)."""
    if limit_gb is None:
        yield None
        return
    if not (CGROUP_MEMORY / "cgroup.procs").is_file():
        raise SystemExit(f"--memory-gb needs a cgroup v1 memory controller at {CGROUP_MEMORY}; run without it")
    group = CGROUP_MEMORY / f"alexandria-bench-{os.getpid()}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(int(limit_gb * GB)))
        yield group
        log.info("memory cgroup of %g GB: peak %.2f GB, limit reached %s times", limit_gb,
                 int((group / "memory.max_usage_in_bytes").read_text()) / GB,
                 (group / "memory.failcnt").read_text().strip())
    finally:
        join(CGROUP_MEMORY)
        group.rmdir()


def join(group: Path) -> None:
    """Move this process into the memory cgroup `group`."""
    (group / "cgroup.procs").write_text(str(os.getpid()))


@contextmanager
def stack_on(scratch: Path, corpus: Path, collection: str | None = None,
             memory_limit_gb: float | None = None) -> Iterator[tuple[RunningStack, float]]:
    """`alexandria up` on the scratch store (serving `collection` when given), with its start-up seconds; every
    process of it held to `memory_limit_gb` together when given."""
    with memory_group(memory_limit_gb) as group:
        if group:
            join(group)
        started = time.perf_counter()
        stack = start_stack(scratch, corpus / "calibre-library", corpus / "local-files",
                            {"QDRANT_COLLECTION": collection} if collection else None)
        start_s = time.perf_counter() - started
        if group:
            join(CGROUP_MEMORY)  # the bench's own memory is not the stack's
        try:
            yield stack, start_s
        finally:
            stack.stop()


def embedder_pid(stack: RunningStack) -> int:
    return next(pid for pid, command in stack.children().items() if command.endswith("services embedder"))


async def embed_questions(scratch: Path, questions: list[str]) -> np.ndarray:
    embedder = EmbedderClient(StackLayout(scratch).socket("embedder"), ClientSettings())
    try:
        return np.stack([await embedder.embed_query(question) for question in questions])
    finally:
        await embedder.close()


def sync_source(scratch: Path, corpus: Path, questions: list[str]) -> EmbedderMemory:
    """The shared library synced into the scratch store by a stack; the embedder's memory after; the
    questions' vectors saved beside the store."""
    with stack_on(scratch, corpus) as (stack, _):
        started = time.perf_counter()
        done = stack.cli("sync")
        if done.returncode != 0:
            raise SystemExit(f"alexandria sync failed:\n{done.stdout}\n{done.stderr}")
        sync_s = time.perf_counter() - started
        # Read at idle: once the embedder's bulk lane has given back what its batches freed.
        time.sleep(2 * IDLE_BEFORE_RELEASE_S)
        memory = EmbedderMemory.of(embedder_pid(stack), sync_s)
        log.info("synced the shared library in %.0f s: %s", memory.sync_s, done.stdout.strip().splitlines()[-1])
        np.save(scratch / "questions.npy", asyncio.run(embed_questions(scratch, questions)))
    return memory


class RssPeak:
    """The highest RSS of a process, and of its anonymous part, sampled while the `sampling` block runs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_mb = self.anon_peak_mb = 0.0

    def _read(self) -> None:
        self.peak_mb = max(self.peak_mb, rss_mb(self.pid))
        self.anon_peak_mb = max(self.anon_peak_mb, rss_mb(self.pid, "RssAnon"))

    async def _sample(self) -> None:
        while True:
            self._read()
            await asyncio.sleep(RSS_SAMPLE_S)

    @contextmanager
    def sampling(self) -> Iterator[None]:
        task = asyncio.get_running_loop().create_task(self._sample())
        try:
            yield
        finally:
            task.cancel()
            self._read()


async def concurrent_queries(url: str, questions: list[str], clients: int) -> Latency:
    """`clients` MCP clients, each on its own connection, asking their share of `questions` at once."""
    async def one_client(share: list[str]) -> list[float]:
        seconds = []
        async with Client(url) as client:
            for question in share:
                started = time.perf_counter()
                await call_tool(client, "alexandria_query", {"query": question})
                seconds.append(time.perf_counter() - started)
        return seconds

    shares = await asyncio.gather(*(one_client(questions[i::clients]) for i in range(clients)))
    return Latency.of([s for share in shares for s in share])


@dataclass(frozen=True)
class StackFigures:
    start_s: float
    rss_start_mb: float
    rss_idle_mb: float
    rss_load_mb: float
    anon_idle_mb: float
    anon_load_mb: float
    precise: Latency
    contextual: Latency
    under_load: Latency


async def through_stack(stack: RunningStack, start_s: float, questions: list[str], loaded: list[str],
                        clients: int) -> StackFigures:
    services = stack.services_pid()
    rss_start = rss_mb(services)
    async with Client(stack.mcp_url) as client:
        precise = query_tool(client, "precise")
        for question in questions[:WARM_UP_QUERIES]:
            await precise(question)
        measured = questions[WARM_UP_QUERIES:]
        modes = await in_turn({"precise": precise, "contextual": query_tool(client, "contextual")}, measured)
    rss_idle, anon_idle = rss_mb(services), rss_mb(services, "RssAnon")
    peak = RssPeak(services)
    with peak.sampling():
        under_load = await concurrent_queries(stack.mcp_url, loaded, clients)
    return StackFigures(start_s, rss_start, rss_idle, peak.peak_mb, anon_idle, peak.anon_peak_mb, modes["precise"],
                        modes["contextual"], under_load)


def measure_size(
    settings: StoreSettings, scratch: Path, corpus: Path, source: SourceBooks, exact: ExactSearch,
    copies: int, build_s: tuple[int, float, float] | None, queries: np.ndarray, questions: list[str],
    loaded: list[str], clients: int, compact_s: float | None = None, memory_limit_gb: float | None = None,
) -> Size:
    """The figures of the bench collection as it stands (closed): disk, reopen, recall, then the stack's."""
    collection_dir = settings.embedded_path / BENCH
    segments, wal = shard_bytes(collection_dir)
    drop_from_page_cache(settings.embedded_path)
    store, cold_s = timed_open(settings)
    store.close()
    store, warm_s = timed_open(settings)
    try:
        ann = ann_recall(store, exact, queries, exact.nearest(queries, ANN_LIMIT))
        points = store.count(BENCH)
    finally:
        store.close()
    log.info("%d points: recall@10 %.3f (within epsilon %.3f), reopen %.2f s cold, %.2f s warm; starting the stack",
             points, ann.exact, ann.within_epsilon, cold_s, warm_s)
    with stack_on(scratch, corpus, BENCH, memory_limit_gb) as (stack, start_s):
        served = asyncio.run(through_stack(stack, start_s, questions, loaded, clients))
        log.info("the stack's processes after the load (RSS MB): %s",
                 ", ".join(f"{command.rsplit(' ', 1)[-1]} {rss_mb(pid):.0f}" for pid, command in stack.children().items()))
    written, upsert_s, optimize_s = build_s or (0, 0.0, 0.0)
    return Size(
        books=copies * source.books, points=points, passages=copies * source.passages,
        write_pps=written / (upsert_s + optimize_s) if build_s else None,
        upsert_pps=written / upsert_s if build_s else None,
        segments_gb=segments / GB, wal_gb=wal / GB, segments=shard_segments(collection_dir), reopen_cold_s=cold_s, reopen_warm_s=warm_s,
        ann=ann, stack_start_s=served.start_s,
        rss_start_gb=served.rss_start_mb / 1024, rss_idle_gb=served.rss_idle_mb / 1024,
        rss_load_gb=served.rss_load_mb / 1024, anon_idle_gb=served.anon_idle_mb / 1024,
        anon_load_gb=served.anon_load_mb / 1024, precise=served.precise, contextual=served.contextual,
        under_load=served.under_load, compact_s=compact_s, memory_limit_gb=memory_limit_gb,
    )


def estimate_bytes(settings: StoreSettings, source_collection: str, source: SourceBooks, copies: int) -> float:
    """Disk the largest size takes, from the synced books' own segment bytes a point, with a margin, plus
    the exact search's copy of the vectors."""
    segments, _ = shard_bytes(settings.embedded_path / source_collection)
    points = copies * len(source.records)
    return points * (segments / len(source.records) * DISK_MARGIN + source.vector_size * 4)


@dataclass(frozen=True)
class Questions:
    """Distinct questions for each measurement: the ANN recall's (encoded once, by the sync's embedder), the
    one-after-another latencies' (a warm-up first), and the concurrent clients'."""

    recall: list[str]
    latency: list[str]
    loaded: list[str]

    @classmethod
    def of(cls, args: argparse.Namespace) -> Questions:
        asked = [q.question for q in load_questions()]
        return cls(
            distinct_questions(asked, args.queries),
            distinct_questions(asked, WARM_UP_QUERIES + args.queries, skip=args.queries),
            distinct_questions(asked, args.clients * args.client_queries, skip=WARM_UP_QUERIES + 2 * args.queries),
        )


def run(args: argparse.Namespace) -> tuple[list[Size], EmbedderMemory | None, StoreSettings]:
    scratch: Path = args.scratch.resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    settings = store_settings(scratch)
    log.info("store settings: %s", settings)
    asked = Questions.of(args)
    recall_questions, questions, loaded = asked.recall, asked.latency, asked.loaded
    memory = None
    source_collection = settings.qdrant_collection
    if not (scratch / "questions.npy").is_file():
        shutil.rmtree(settings.embedded_path, ignore_errors=True)
        memory = sync_source(scratch, args.corpus, recall_questions)
    queries = np.load(scratch / "questions.npy")
    store = open_store(settings)
    try:
        source = SourceBooks.read(store, source_collection)
        targets = sorted({source.copies_for(p) for p in args.points}
                         | {-(-b // source.books) for b in args.books})
        log.info("source: %d books, %d points (%d passages); sizes: %s copies", source.books, len(source.records),
                 source.passages, targets)
        done = resumable_copies(store, source) if args.resume and targets else 0
        if not done:
            store.delete_collection(BENCH)
        if not targets:
            return [], memory, settings
        if done >= targets[-1]:
            raise SystemExit(f"the bench collection already holds the {targets[-1]} copies asked for: measure it with "
                             "--kept")
        if done:
            log.info("resuming: %d of %d copies are in the bench collection; writing from copy %d", done,
                     targets[-1], done)
            exact = ExactSearch.resumed(scratch, source, targets[-1], done)
        else:
            check_disk(scratch, estimate_bytes(settings, source_collection, source, targets[-1]),
                       f"{targets[-1] * len(source.records):,} points")
            exact = ExactSearch.create(scratch, source, targets[-1])
        sizes = []
        for copies in (target for target in targets if target > done):
            written = write_copies(store, source, BENCH, range(done, copies), exact.add)
            settle_merges(store)
            store.close()
            build_s = (written.points, written.upsert_s, written.optimize_s)
            sizes.append(measure_size(settings, scratch, args.corpus, source, exact, copies, build_s, queries,
                                      questions, loaded, args.clients))
            print(table(sizes), flush=True)
            done = copies
            store = open_store(settings)
        if args.compact_mb:
            store.close()
            compact_s = compact_bench(settings, args.compact_mb)
            sizes.append(measure_size(settings, scratch, args.corpus, source, exact, done, build_s, queries,
                                      questions, loaded, args.clients, compact_s))
            print(table(sizes), flush=True)
            store = open_store(settings)
    finally:
        store.close()
    return sizes, memory, settings


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


def measure_kept(args: argparse.Namespace) -> tuple[Size, StoreSettings]:
    """Every figure but the build's of the collection a --keep run left, compacted first with --compact-mb."""
    scratch: Path = args.scratch.resolve()
    settings, source, exact = kept_collection(scratch)
    compact_s = compact_bench(settings, args.compact_mb) if args.compact_mb else None
    asked = Questions.of(args)
    size = measure_size(settings, scratch, args.corpus, source, exact, exact.written // len(source.records), None,
                        np.load(scratch / "questions.npy"), asked.latency, asked.loaded, args.clients, compact_s,
                        args.memory_gb)
    return size, settings


def sweep(args: argparse.Namespace) -> list[dict[str, Any]]:
    """ANN recall and query time of the bench collection a --keep run left, and the time of each store call
    of a query, at each search setting asked: hnsw_ef, and the oversampling of a quantised collection (the
    layout is the collection's own). A row names what each segment was searched with: a collection of many
    segments is searched with less than the settings ask (EmbeddedStore.dense_search)."""
    scratch: Path = args.scratch.resolve()
    settings, _, exact = kept_collection(scratch)
    queries = np.load(scratch / "questions.npy")
    texts = distinct_questions([q.question for q in load_questions()], len(queries))  # what run() encoded
    points = exact.written
    truth = exact.nearest(queries, ANN_LIMIT)
    rows = []
    for ef in args.ef or [settings.qdrant_hnsw_ef]:
        for oversampling in args.oversampling or [settings.qdrant_quantization_oversampling]:
            store = open_store(settings.model_copy(update={
                "qdrant_hnsw_ef": ef, "qdrant_quantization_oversampling": oversampling}))
            try:
                # What each segment is searched with: the settings', unless the collection's size changes it.
                assert isinstance(store, EmbeddedStore)  # this bench measures the embedded store a stack runs
                searched = store.dense_search(BENCH)
                ann = ann_recall(store, exact, queries, truth)
                stages = store_stages(store, queries, texts)
            finally:
                store.close()
            rows.append({"points": points, "hnsw_ef": searched.hnsw_ef, "oversampling": searched.oversampling,
                         "asked_hnsw_ef": ef, "asked_oversampling": oversampling, **asdict(ann), **stages})
            log.info("%s", rows[-1])
    return rows


def table(sizes: list[Size]) -> str:
    columns: list[tuple[str, str, Any]] = [
        ("books", "{:>9,}", lambda s: s.books),
        ("points", "{:>11,}", lambda s: s.points),
        ("write p/s", "{:>9}", lambda s: _whole(s.write_pps)),
        ("upsert p/s", "{:>10}", lambda s: _whole(s.upsert_pps)),
        ("seg GB", "{:>7.2f}", lambda s: s.segments_gb),
        ("wal GB", "{:>6.2f}", lambda s: s.wal_gb),
        ("segments", "{:>8}", lambda s: s.segments),
        ("KB/book", "{:>8.0f}", lambda s: s.disk_gb * GB / 1024 / s.books),
        ("reopen s", "{:>8.2f}", lambda s: s.reopen_cold_s),
        ("warm s", "{:>6.2f}", lambda s: s.reopen_warm_s),
        ("up s", "{:>5.1f}", lambda s: s.stack_start_s),
        ("RSS start", "{:>9.2f}", lambda s: s.rss_start_gb),
        ("RSS idle", "{:>8.2f}", lambda s: s.rss_idle_gb),
        ("RSS load", "{:>8.2f}", lambda s: s.rss_load_gb),
        ("anon idle", "{:>9.2f}", lambda s: s.anon_idle_gb),
        ("anon load", "{:>9.2f}", lambda s: s.anon_load_gb),
        ("prec p50", "{:>8.1f}", lambda s: s.precise.p50_ms),
        ("prec p95", "{:>8.1f}", lambda s: s.precise.p95_ms),
        ("ctx p50", "{:>7.1f}", lambda s: s.contextual.p50_ms),
        ("ctx p95", "{:>7.1f}", lambda s: s.contextual.p95_ms),
        ("load p50", "{:>8.1f}", lambda s: s.under_load.p50_ms),
        ("load p95", "{:>8.1f}", lambda s: s.under_load.p95_ms),
        ("ANN ms", "{:>6.2f}", lambda s: s.ann.query_ms),
        ("recall@10", "{:>9.3f}", lambda s: s.ann.exact),
        ("within eps", "{:>10.3f}", lambda s: s.ann.within_epsilon),
        ("compact s", "{:>9}", lambda s: _whole(s.compact_s)),
        ("mem cap GB", "{:>10}", lambda s: "" if s.memory_limit_gb is None else f"{s.memory_limit_gb:g}"),
    ]
    header = " ".join(f"{name:>{len(fmt.format(value(sizes[0])))}}" for name, fmt, value in columns)
    rows = [" ".join(fmt.format(value(s)) for _, fmt, value in columns) for s in sizes]
    return "\n".join([header, *rows])


def _whole(value: float | None) -> str:
    """A table cell: the value without decimals, blank for a figure this run did not measure."""
    return "" if value is None else f"{value:.0f}"


def estimate_library(size: Size) -> dict[str, float | None]:
    """10,000 books at the largest size's figures a book: points, disk, and the hours a build at its write rate
    takes (None when this run built nothing)."""
    points = size.points / size.books * LIBRARY_BOOKS
    return {"points": round(points), "disk_gb": round(size.disk_gb / size.books * LIBRARY_BOOKS, 1),
            "build_hours": round(points / size.write_pps / 3600, 2) if size.write_pps else None}


def summary(sizes: list[Size], memory: EmbedderMemory | None, settings: StoreSettings) -> dict[str, Any]:
    context = {
        "sizes": [{**asdict(s), "disk_gb": s.disk_gb} for s in sizes],
        "embedder": asdict(memory) if memory else None,
        "store": settings.model_dump(mode="json", exclude={"qdrant_api_key"}),
    }
    if not sizes:
        return context
    largest = sizes[-1]
    return {
        "books": largest.books,
        "points": largest.points,
        "disk_gb": round(largest.disk_gb, 2),
        "wal_gb": round(largest.wal_gb, 2),
        "rss_gb": round(largest.rss_load_gb, 2),
        "rss_anon_gb": round(largest.anon_load_gb, 2),
        "reopen_s": round(largest.reopen_cold_s, 2),
        "write_pps": round(largest.write_pps) if largest.write_pps else None,
        "query_p50_ms": round(largest.precise.p50_ms, 1),
        "query_p95_ms": round(largest.precise.p95_ms, 1),
        "contextual_p50_ms": round(largest.contextual.p50_ms, 1),
        "ann_recall@10": round(largest.ann.exact, 4),
        "ann_recall@10_within_epsilon": round(largest.ann.within_epsilon, 4),
        "estimate_10000_books": estimate_library(largest),
        **context,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, action="append", default=[],
                        help="a size in points (repeatable); no size at all: only the sync and the embedder's memory")
    parser.add_argument("--books", type=int, action="append", default=[], help="a size in books (repeatable)")
    parser.add_argument("--queries", type=int, default=200, help="questions for recall, and for each latency")
    parser.add_argument("--clients", type=int, default=30, help="MCP clients asking at once")
    parser.add_argument("--client-queries", type=int, default=5, help="questions each concurrent client asks")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--scratch", type=Path, default=DEFAULT_SCRATCH)
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory (the synced source too)")
    parser.add_argument("--resume", action="store_true",
                        help="with --keep: go on with the build a --keep run left in the scratch directory (stopped "
                             "midway, or to grow it to a larger size) instead of starting it again")
    parser.add_argument("--compact-mb", type=int,
                        help="then compact the largest size into segments of up to this many MB and measure it again")
    parser.add_argument("--sweep", action="store_true",
                        help="build nothing: the ANN recall of the collection a --keep run left, at each --ef and "
                             "--oversampling")
    parser.add_argument("--kept", action="store_true",
                        help="build nothing: measure the collection a --keep run left (compacted first with "
                             "--compact-mb); the scratch directory is kept")
    parser.add_argument("--memory-gb", type=float,
                        help="with --kept: hold the whole stack to this much memory, page cache included (a cgroup, "
                             "as a container's memory limit does)")
    parser.add_argument("--ef", type=int, action="append", default=[], help="with --sweep: an hnsw_ef (repeatable)")
    parser.add_argument("--oversampling", type=float, action="append", default=[],
                        help="with --sweep: a quantised collection's oversampling (repeatable)")
    args = parser.parse_args()
    if args.resume and not args.keep:
        parser.error("--resume goes with --keep: a build that is resumed is one whose scratch directory is kept")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    configure_logging("bench.scale", "WARNING")
    log.setLevel(logging.INFO)
    logging.getLogger("bench.replica").setLevel(logging.INFO)
    if args.sweep:
        rows = sweep(args)
        print("\n".join(f"{r['points']:>11,} points  ef {r['hnsw_ef']:>4}  oversampling {r['oversampling']:>4}  "
                        f"recall@10 {r['exact']:.3f}  within epsilon {r['within_epsilon']:.3f}  "
                        f"{r['query_ms']:.2f} ms; a query's store calls (p50 ms): "
                        + ", ".join(f"{k.removesuffix('_ms')} {v:.1f}" for k, v in r.items() if k.endswith("_ms")
                                    and k != "query_ms") for r in rows))
        print(json.dumps(rows))
        return
    if args.kept:
        size, settings = measure_kept(args)
        print(table([size]))
        print(json.dumps(summary([size], None, settings)))
        return
    try:
        sizes, memory, settings = run(args)
    finally:
        if not args.keep:
            shutil.rmtree(args.scratch, ignore_errors=True)
    if memory:
        print(f"embedder after syncing the shared library ({memory.sync_s:.0f} s): RSS {memory.rss_mb:.0f} MB "
              f"(peak {memory.peak_mb:.0f}; anonymous {memory.anonymous_mb:.0f}, files {memory.file_mb:.0f}), "
              f"{memory.threads} threads")
    print(json.dumps(summary(sizes, memory, settings)))


if __name__ == "__main__":
    main()
