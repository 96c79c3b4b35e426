"""The whole library on one machine: store size, memory, restart, query latency and ANN recall as it grows.

    .venv/bin/python -m bench.scale --points 100000 --points 1000000 [--books 10000] [--compact-mb 1000]
                                    [--queries 200] [--clients 30] [--scratch var/bench-scale] [--keep]
    .venv/bin/python -m bench.scale --sweep [--ef 64 --ef 128 ...] [--oversampling 1 --oversampling 3 ...]
    .venv/bin/python -m bench.scale --kept [--compact-mb 1000] --scratch var/bench-scale
    (each with --qdrant-quantization int8 --qdrant-hnsw-ef 256 ...: the store settings to build and serve with)

With no size (no --points, no --books), only step 1: the sync and the embedder's memory.

1. Source: `alexandria up` on an empty store with the shared Calibre library, then `alexandria sync` (the
   CLI, as a user runs it): the whole library through the real embedder process, whose memory is read
   at idle after it (2 s later: services/embedder/memory.py), with its peak. The same embedder then encodes
   the recall questions, once. Both are kept in the scratch directory, and skipped when already there.
2. A `bench` collection grows, size after size (`--points`: points in all, chapters included; `--books`:
   books), by copies of the synced books written through the store adapter (bench/replica.py), indexed
   as it grows, its segments merged in the background past eight as a stack merges them (the build waits for the
   last merges before it measures). The store is opened with the StoreSettings of the environment (every QDRANT_*
   and EMBEDDED_* variable but the server's address: this bench measures the embedded store a stack runs), the
   tuning ones given as flags set first (bench/common.py: STORE_SETTINGS).
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
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from alexandria.settings import StoreSettings
from alexandria.store import open_store
from alexandria.store.embedded import EmbeddedStore, shard_segments
from bench.common import (
    DEFAULT_CORPUS,
    ROOT,
    STORE_SETTINGS,
    apply_setting_flags,
    bench_logging,
    rss_mb,
    setting_flags,
    store_settings,
)
from bench.questions import distinct_questions, load_questions
from bench.replica import SourceBooks, write_copies
from bench.scale.collection import (
    ANN_LIMIT,
    BENCH,
    GB,
    ExactSearch,
    ann_recall,
    check_disk,
    compact_bench,
    drop_from_page_cache,
    estimate_bytes,
    kept_collection,
    resumable_copies,
    settle_merges,
    shard_bytes,
    store_stages,
    timed_open,
)
from bench.scale.figures import Size, summary, table
from bench.scale.stack import WARM_UP_QUERIES, EmbedderMemory, stack_on, sync_source, through_stack

DEFAULT_SCRATCH = ROOT / "var" / "bench-scale"

log = logging.getLogger("bench.scale")


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


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    setting_flags(parser, STORE_SETTINGS)
    args = parser.parse_args()
    if args.resume and not args.keep:
        parser.error("--resume goes with --keep: a build that is resumed is one whose scratch directory is kept")
    apply_setting_flags(args)
    bench_logging("scale")
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
