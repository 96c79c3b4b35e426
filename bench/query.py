"""alexandria_query latency through the query gRPC service, next to the bare cost, on 100,000 chunks.

    .venv/bin/python bench/query.py [--chunks 100000] [--queries 500] [--scratch bench/out/query]

Setup (kept in the scratch directory between runs):
1. a few corpus books are ingested into a `source` collection (bench/retrieval.py's `ingest_corpus`:
   the ingest pipeline);
2. a `bench` collection is filled with `--chunks` chunks by copying the source books under new book
   keys and ids (chapters and their children alike, sentence vectors included), each chunk vector
   nudged by a little noise so that the copies are not exact duplicates; then indexed (optimize).

Measured, each over `--queries` questions (bench/retrieval_questions.yaml, cycled):
- bare, in this process: one model encode + the one store query a precise search makes (hybrid,
  with vectors), nothing else: the floor the service is compared to;
- precise, contextual, comprehensive: Search RPCs to the services as deployed on the embedded
  store: `python -m services ingest query` in one process (they share the store), the embedder in
  another, unix sockets, and this process as the client;
- precise during an ingest: the same while an IngestFile RPC ingests a corpus book into the bench
  collection (the ingest service then brings the index up to date); the book is removed after.
The last line is JSON: precise_p50_ms, precise_p95_ms, contextual_p50_ms, comprehensive_p50_ms,
bare_p50_ms, ratio (precise p50 / bare p50), during_ingest_p95_ms.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import os
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from retrieval import (
    DEFAULT_CORPUS,
    book_file,
    ingest_corpus,
    ingested_file_names,
    load_questions,
    store_settings,
)

from alexandria.clients import EmbedderClient, ServiceClient, wait_until_serving
from alexandria.logs import configure_logging
from alexandria.settings import ClientSettings, EmbedderSettings
from alexandria.store import Filter, PointRecord, SparseVector, Store, StoredPoint, open_store
from alexandria.store import schema as f
from alexandria.store.lexical import encode_document, encode_query
from alexandria.v1 import ingest_pb2, ingest_pb2_grpc, query_pb2, query_pb2_grpc
from services.embedder.model import EmbedKind, load_model, resolve_device, resolve_model_source
from services.query.search import (
    CANDIDATES_PER_RESULT,
    DEFAULT_LIMIT,
    HYBRID_PREFETCH_PER_CANDIDATE,
    MIN_HYBRID_PREFETCH,
    SearchQuery,
    search_filter,
)

DEFAULT_SCRATCH = ROOT / "bench" / "out" / "query"
SOURCE = "source"
BENCH = "bench"
# Source books (Calibre ids or local file names): novels and plays, EPUB and PDF.
SOURCE_BOOKS = (1, 5, 6)
# Ingested during the queries, then removed; not among the source books.
INGEST_DURING = "the_tempest.epub"
INGEST_DURING_TITLE, INGEST_DURING_AUTHOR = "The Tempest", "William Shakespeare"
WARM_UP_QUERIES = 20
START_TIMEOUT_S = 600.0
VECTOR_NOISE = 0.02
UPSERT_BATCH = 1000
COPIES_PER_ROUND = 10
COPY_NAMESPACE = uuid.UUID("0d9b1f40-5a6f-4f0e-9d61-7a3c2b8e4c11")
MODES = {
    "precise": query_pb2.CONTEXT_MODE_PRECISE,
    "contextual": query_pb2.CONTEXT_MODE_CONTEXTUAL,
    "comprehensive": query_pb2.CONTEXT_MODE_COMPREHENSIVE,
}

log = logging.getLogger("bench.query")


@dataclass(frozen=True)
class Latency:
    p50_ms: float
    p95_ms: float
    count: int

    @classmethod
    def of(cls, seconds: list[float]) -> Latency:
        ms = np.asarray(seconds) * 1000
        return cls(float(np.percentile(ms, 50)), float(np.percentile(ms, 95)), len(ms))


@dataclass(frozen=True)
class Figures:
    bare: Latency
    bare_dense: Latency
    modes: dict[str, Latency]
    idle_precise: Latency
    during_ingest: Latency
    points: int


async def timed(call: Callable[[str], Awaitable[object]], questions: list[str], count: int) -> Latency:
    """Latency of `call` over `count` questions (after a few unmeasured warm-up calls)."""
    for question in questions[:WARM_UP_QUERIES]:
        await call(question)
    seconds = []
    for question in itertools.islice(itertools.cycle(questions), count):
        started = time.perf_counter()
        await call(question)
        seconds.append(time.perf_counter() - started)
    return Latency.of(seconds)


@asynccontextmanager
async def service_process(names: list[str], env: dict[str, str], addresses: list[str]) -> AsyncIterator[None]:
    """`python -m services NAMES` in its own process, once each of `addresses` reports SERVING."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services", *names, cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "ALEXANDRIA_LOG_LEVEL": "WARNING", **env},
    )
    try:
        ready = asyncio.ensure_future(asyncio.gather(*(wait_until_serving(a, START_TIMEOUT_S) for a in addresses)))
        exited = asyncio.ensure_future(process.wait())
        await asyncio.wait([ready, exited], return_when=asyncio.FIRST_COMPLETED)
        exited.cancel()
        if not ready.done():
            ready.cancel()
            raise SystemExit(f"{' + '.join(names)} exited with status {process.returncode} before serving")
        ready.result()
        yield
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            await process.wait()


@asynccontextmanager
async def embedder_process(scratch: Path) -> AsyncIterator[EmbedderClient]:
    """The embedder in its own process, as deployed."""
    address = f"unix://{scratch / 'embedder.sock'}"
    async with service_process(["embedder"], {"EMBEDDER_LISTEN": address}, [address]):
        client = EmbedderClient(address, ClientSettings())
        try:
            yield client
        finally:
            await client.close()


@asynccontextmanager
async def query_and_ingest_process(
    scratch: Path, corpus: Path, embedder_address: str
) -> AsyncIterator[tuple[ServiceClient, ServiceClient]]:
    """The query and ingest services sharing the bench store in one process, as deployed embedded."""
    query_address, ingest_address = f"unix://{scratch / 'query.sock'}", f"unix://{scratch / 'ingest.sock'}"
    env = {
        "ALEXANDRIA_DATA_DIR": str(scratch),
        "QDRANT_COLLECTION": BENCH,
        "EMBEDDER_ADDR": embedder_address,
        "QUERY_LISTEN": query_address,
        "INGEST_LISTEN": ingest_address,
        "CATALOG_ADDR": f"unix://{scratch / 'no-catalog.sock'}",  # only local files are ingested here
        "LOCAL_INGEST_PATH": str(corpus / "local-files"),
    }
    async with service_process(["ingest", "query"], env, [query_address, ingest_address]):
        query = ServiceClient("query", query_address, query_pb2_grpc.QueryServiceStub, ClientSettings())
        ingest = ServiceClient("ingest", ingest_address, ingest_pb2_grpc.IngestServiceStub, ClientSettings())
        try:
            yield query, ingest
        finally:
            await query.close()
            await ingest.close()


def _copy_points(
    records: list[PointRecord], copies: range, lexical: dict[str, SparseVector], rng: np.random.Generator
) -> list[StoredPoint]:
    """Copies number `copies` of the source points under new book keys and ids, chunk vectors nudged apart."""
    points = []
    for copy in copies:
        new_id = {r.id: str(uuid.uuid5(COPY_NAMESPACE, f"{copy}/{r.id}")) for r in records}
        for r in records:
            payload = {
                **r.payload,
                f.BOOK_KEY: f"{r.payload[f.BOOK_KEY]}-copy{copy}",
                # Not the source's path: removing the book ingested during the run must not hit copies.
                f.FILE_PATH: f"{r.payload.get(f.FILE_PATH, '')}#copy{copy}",
                f.COMPLETE: True,
            }
            if r.payload.get(f.PARENT_ID):
                payload[f.PARENT_ID] = new_id[r.payload[f.PARENT_ID]]
            dense = r.dense + rng.normal(0, VECTOR_NOISE, r.dense.shape).astype(np.float32)
            points.append(
                StoredPoint(new_id[r.id], dense / np.linalg.norm(dense), lexical[r.id], payload, r.sentences)
            )
    return points


def fill_bench_collection(store: Store, chunks: int) -> None:
    """The bench collection with at least `chunks` searchable chunks copied from the source books."""
    searchable = Filter(must={f.LEVEL: [f.Level.CHILD.value, f.Level.FLAT.value]})
    if store.collection_info(BENCH) is not None and store.count(BENCH, searchable) >= chunks:
        return
    source_info = store.collection_info(SOURCE)
    records = store.scroll(SOURCE, Filter(must={f.COMPLETE: True}), limit=10**7, with_vectors=True)
    lexical = {r.id: encode_document(str(r.payload[f.TEXT])) for r in records}
    per_copy = sum(r.payload.get(f.LEVEL) != f.Level.PARENT for r in records)
    copies = -(-chunks // per_copy)
    log.info("filling %s: %d copies of %d points (%d chunks each)", BENCH, copies, len(records), per_copy)
    store.ensure_collection(BENCH, source_info.vector_size, source_info.metadata)
    rng = np.random.default_rng(7)
    started = time.perf_counter()
    for first in range(0, copies, COPIES_PER_ROUND):
        points = _copy_points(records, range(first, min(first + COPIES_PER_ROUND, copies)), lexical, rng)
        for start in range(0, len(points), UPSERT_BATCH):
            store.upsert(BENCH, points[start : start + UPSERT_BATCH])
        # Indexing as it grows keeps each optimize short (see alexandria/store/embedded.py).
        store.optimize(BENCH)
    log.info("filled %s in %.0f s", BENCH, time.perf_counter() - started)


async def measure_bare(store: Store, questions: list[str], count: int) -> tuple[Latency, Latency]:
    """One in-process encode + one store query (the precise search's, and a dense-only one).

    Blocking calls on the event loop on purpose: nothing else runs meanwhile, and no thread hop is
    part of the floor.
    """
    model = load_model(resolve_model_source(EmbedderSettings().embedder_model), resolve_device("cpu"), 0)
    candidates = DEFAULT_LIMIT * CANDIDATES_PER_RESULT
    prefetch = max(MIN_HYBRID_PREFETCH, HYBRID_PREFETCH_PER_CANDIDATE * candidates)
    where = search_filter(SearchQuery("", BENCH))

    def encode(question: str) -> np.ndarray:
        return model.encode(model.with_prefix([question], EmbedKind.QUERY)).vectors[0]

    async def hybrid(question: str) -> None:
        store.query_hybrid(BENCH, encode(question), encode_query(question), where, candidates, prefetch, with_vectors=True)

    async def dense(question: str) -> None:
        store.query_dense(BENCH, encode(question), where, candidates)

    return await timed(hybrid, questions, count), await timed(dense, questions, count)


async def measure_during_ingest(
    ingest: ServiceClient, corpus: Path, search: Callable[[str], Awaitable[object]], questions: list[str]
) -> tuple[Latency, Latency]:
    """Precise latency at idle, then while the ingest service ingests a corpus book into the collection."""
    idle = await timed(search, questions, len(questions))
    path = book_file(corpus, INGEST_DURING)
    # The file names no author (on purpose, in the corpus), so the request does.
    request = ingest_pb2.IngestFileRequest(
        file_path=str(path), title=INGEST_DURING_TITLE, author=INGEST_DURING_AUTHOR,
        options=ingest_pb2.IngestOptions(collection=BENCH),
    )

    async def ingest_book() -> None:
        async for event in ingest.stream("IngestFile", request):
            if event.HasField("result") and not event.result.success:
                raise SystemExit(f"ingesting {path.name} failed: {event.result.error}")

    task = asyncio.create_task(ingest_book())
    seconds = []
    try:
        for question in itertools.cycle(questions):
            if task.done():
                break
            started = time.perf_counter()
            await search(question)
            seconds.append(time.perf_counter() - started)
        await task
    finally:
        removed = await ingest.call("RemoveBook", ingest_pb2.RemoveBookRequest(collection=BENCH, file_path=str(path)))
        log.info("removed the %d points ingested during the measurement", removed.chunks_removed)
    return idle, Latency.of(seconds)


async def measure(corpus: Path, scratch: Path, chunks: int, queries: int) -> Figures:
    questions = [q.question for q in load_questions()]
    scratch.mkdir(parents=True, exist_ok=True)
    async with embedder_process(scratch) as embedder:
        # The embedded store is one process's at a time: this one's for the setup, then the services'.
        store = open_store(store_settings(scratch))
        try:
            sources = [book_file(corpus, b) for b in SOURCE_BOOKS]
            missing = [p for p in sources if p.name not in ingested_file_names(store, SOURCE)]
            if missing:
                await ingest_corpus(store, embedder, missing, SOURCE)
            await asyncio.to_thread(fill_bench_collection, store, chunks)
            bare, bare_dense = await measure_bare(store, questions, queries)
            points = store.collection_info(BENCH).points_count
        finally:
            store.close()
        async with query_and_ingest_process(scratch, corpus, embedder.address) as (query, ingest):

            def search(mode: int) -> Callable[[str], Awaitable[object]]:
                return lambda q: query.call("Search", query_pb2.SearchRequest(query=q, context_mode=mode))

            modes = {name: await timed(search(mode), questions, queries) for name, mode in MODES.items()}
            idle, during = await measure_during_ingest(ingest, corpus, search(MODES["precise"]), questions)
    return Figures(bare, bare_dense, modes, idle, during, points)


def report(figures: Figures) -> str:
    rows = [
        ("bare (encode + hybrid query)", figures.bare),
        ("bare (encode + dense query)", figures.bare_dense),
        *((f"Search {name}", latency) for name, latency in figures.modes.items()),
        ("Search precise, idle", figures.idle_precise),
        ("Search precise, during ingest", figures.during_ingest),
    ]
    lines = [f"{figures.points:,} points in the bench collection", f"{'':<32} {'p50 ms':>8} {'p95 ms':>8} {'n':>6}"]
    lines += [f"{name:<32} {lat.p50_ms:>8.2f} {lat.p95_ms:>8.2f} {lat.count:>6}" for name, lat in rows]
    precise = figures.modes["precise"]
    lines.append(
        f"precise / bare = {precise.p50_ms / figures.bare.p50_ms:.2f}; "
        f"comprehensive / precise = {figures.modes['comprehensive'].p50_ms / precise.p50_ms:.2f}; "
        f"during ingest p95 / idle p95 = {figures.during_ingest.p95_ms / figures.idle_precise.p95_ms:.2f}"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--scratch", type=Path, default=DEFAULT_SCRATCH, help="kept between runs")
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=500)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    configure_logging("bench.query", "WARNING")
    log.setLevel(logging.INFO)
    figures = asyncio.run(measure(args.corpus, args.scratch, args.chunks, args.queries))
    print(report(figures))
    precise = figures.modes["precise"]
    print(json.dumps({
        "precise_p50_ms": round(precise.p50_ms, 2),
        "precise_p95_ms": round(precise.p95_ms, 2),
        "contextual_p50_ms": round(figures.modes["contextual"].p50_ms, 2),
        "comprehensive_p50_ms": round(figures.modes["comprehensive"].p50_ms, 2),
        "bare_p50_ms": round(figures.bare.p50_ms, 2),
        "ratio": round(precise.p50_ms / figures.bare.p50_ms, 3),
        "during_ingest_p95_ms": round(figures.during_ingest.p95_ms, 2),
    }))


if __name__ == "__main__":
    main()
