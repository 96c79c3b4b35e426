"""alexandria_query latency through the gateway, next to the bare cost, on 100,000 chunks.

    .venv/bin/python -m bench.query [--chunks 100000] [--queries 500] [--scratch bench/out/query]
                                    [--embedder-profile P] [--qdrant-hnsw-ef N ...]

Setup (kept in the scratch directory between runs):
1. a few corpus books are ingested into a `source` collection (bench/common.py's `ingest_corpus`:
   the ingest pipeline);
2. a `bench` collection is filled with `--chunks` chunks by copying the source books under new book
   keys and ids (bench/replica.py: chapters and their children alike, window vectors included, each
   chunk vector nudged by a little noise so that the copies are not exact duplicates), indexed as it grows.

Queries: the questions of bench/retrieval_questions/, each asked in several wordings
(bench/questions.py: QUESTION_WORDINGS), so that the `--queries` questions of a measurement are all different
texts: no cache anywhere could answer one from an earlier one.

Measured, each over `--queries` questions:
- bare, in this process: one model encode + the one store query a precise search makes (hybrid),
  nothing else: the floor the service is compared to. It runs on a copy of the bench collection
  (the embedded store is one process's at a time), question by question in turn with precise;
- precise, contextual, comprehensive: `alexandria_query` called by a real MCP client (the SDK's
  `Client`, Streamable HTTP) on the stack as `alexandria up` runs it (embedded store; embedder,
  services and gateway in their own processes), with every other argument at its default.
  Precise and bare take turns, the order rotated every question, so that a shared machine's
  load, which drifts over minutes, weighs on the floor and on the service alike;
- precise over stdio, in the same turns: the same call through a gateway the client starts itself
  (`alexandria mcp`, as an MCP client configured with the README's stdio snippet does);
- the hops inside precise, taking the same turns: the query service's Search and the embedder's
  Embed of the question, each called over gRPC directly on the stack's sockets. Precise minus
  Search is the MCP client, the gateway and its gRPC call; Search minus Embed is the query
  service's own work (store query, scoring, response);
- the floors of the layers the design puts around bare, in the same turns: a tool that does no work
  on a bare MCP server over stdio (bench/mcp_floor.py: the SDK's client, server and transport), and
  one gRPC call between two processes (the query service's health check). bare + that tool + two
  such calls (gateway -> query -> embedder) is what precise could cost with every service's own work
  free: `floor_ratio` is that over bare;
- precise during an ingest: the same while `alexandria_ingest_file` ingests a corpus book into the
  bench collection (from a second MCP client); the book is removed after (`alexandria_remove`).
The last line is JSON: precise_p50_ms, precise_p95_ms, contextual_p50_ms, comprehensive_p50_ms,
bare_p50_ms, ratio (precise p50 / bare p50), precise_stdio_p50_ms, stdio_ratio, search_grpc_p50_ms,
embed_grpc_p50_ms, mcp_floor_stdio_p50_ms, grpc_hop_p50_ms, floor_ratio, during_ingest_p95_ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import logging
import shutil
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from mcp import Client, StdioServerParameters

from alexandria.clients import EmbedderClient, ServiceClient, check_health
from alexandria.settings import ClientSettings, EmbedderSettings, StoreSettings
from alexandria.store import Filter, Store, open_store
from alexandria.store import schema as f
from alexandria.store.lexical import encode_query
from alexandria.v1 import query_pb2, query_pb2_grpc
from alexandria_stack.layout import StackLayout
from bench.basics import OUT
from bench.common import (
    DEFAULT_CORPUS,
    STORE_SETTINGS,
    Latency,
    apply_setting_flags,
    bench_logging,
    call_tool,
    corpus_stack,
    embedder_service,
    in_turn,
    ingest_corpus,
    ingested_file_names,
    query_tool,
    setting_flags,
    store_settings,
)
from bench.questions import book_file, distinct_questions, load_questions
from bench.replica import SourceBooks, write_copies
from services.embedder.loading import load_configured_model, resolve_device
from services.embedder.model import EmbedKind
from services.embedder.profiles import resolve_profile
from services.query.ranking import CANDIDATE_POOL, PREFETCH
from services.query.search import SearchQuery, candidate_filters
from tests.e2e.stack import RunningStack

DEFAULT_SCRATCH = OUT / "query"
SOURCE = "source"
BENCH = "bench"
# Source books (Calibre ids or local file names): novels and plays, EPUB and PDF.
SOURCE_BOOKS = (1, 5, 6)
# Ingested during the queries, then removed; not among the source books.
INGEST_DURING = "the_tempest.epub"
INGEST_DURING_TITLE, INGEST_DURING_AUTHOR = "The Tempest", "William Shakespeare"
WARM_UP_QUERIES = 50
MODES = ("precise", "contextual", "comprehensive")

# The settings this bench's store and stack read that it may be run under (its figures name them).
SETTINGS = ("EMBEDDER_PROFILE", *STORE_SETTINGS)

log = logging.getLogger("bench.query")


@dataclass(frozen=True)
class Figures:
    bare: Latency
    bare_dense: Latency
    precise_stdio: Latency
    search_grpc: Latency
    embed_grpc: Latency
    mcp_floor: Latency
    grpc_hop: Latency
    modes: dict[str, Latency]
    idle_precise: Latency
    during_ingest: Latency
    points: int


def fill_bench_collection(store: Store, chunks: int) -> None:
    """The bench collection with at least `chunks` searchable chunks copied from the source books."""
    searchable = Filter(must={f.LEVEL: [f.Level.CHILD.value, f.Level.FLAT.value]})
    if store.collection_info(BENCH) is not None and store.count(BENCH, searchable) >= chunks:
        return
    source = SourceBooks.read(store, SOURCE)
    copies = -(-chunks // source.passages)
    log.info("filling %s: %d copies of %d points (%d chunks each)", BENCH, copies, len(source.records),
             source.passages)
    written = write_copies(store, source, BENCH, range(copies))
    log.info("filled %s in %.0f s", BENCH, written.seconds)


def copy_bench_collection(scratch: Path) -> StoreSettings:
    """A store holding a copy of the bench collection alone, made afresh: the bare measurement's."""
    source = store_settings(scratch).embedded_path
    settings = store_settings(scratch / "bare")
    copy = settings.embedded_path
    shutil.rmtree(copy, ignore_errors=True)
    copy.mkdir(parents=True)
    shutil.copytree(source / BENCH, copy / BENCH)
    shutil.copy2(source / f"{BENCH}.json", copy / f"{BENCH}.json")
    return settings


class Bare:
    """One in-process encode + one store query: the precise search's (hybrid), or a dense-only one.

    Blocking calls on the event loop on purpose: nothing else runs meanwhile, and no thread hop is
    part of the floor.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        settings = EmbedderSettings()
        device = resolve_device("cpu")
        self.model = load_configured_model(
            resolve_profile(settings, device), device, 0, settings.embedder_models_dir
        )
        self.encode_query = self.model.encoder_for(EmbedKind.QUERY)
        self.where, _ = candidate_filters(SearchQuery("", BENCH))  # the first stage's

    def _encode(self, question: str) -> np.ndarray:
        return self.encode_query(self.model.with_prefix([question], EmbedKind.QUERY)).vectors[0]

    async def hybrid(self, question: str) -> None:
        vector = self._encode(question)
        self.store.query_hybrid(BENCH, vector, encode_query(question), self.where, CANDIDATE_POOL, PREFETCH,
                                with_payload=False)

    async def dense(self, question: str) -> None:
        self.store.query_dense(BENCH, self._encode(question), self.where, CANDIDATE_POOL, with_payload=False)


async def timed(call: Callable[[str], Awaitable[object]], questions: list[str]) -> Latency:
    """Latency of `call` over `questions`, one after another."""
    return (await in_turn({"call": call}, questions))["call"]


@contextlib.asynccontextmanager
async def grpc_hops(layout: StackLayout) -> AsyncIterator[dict[str, Callable[[str], Awaitable[object]]]]:
    """`search` (the query service's Search), `embed` (the embedder's Embed of a query) and `hop` (the query
    service's health check: a gRPC call with no work behind it), over the stack's sockets."""
    client_settings = ClientSettings()
    query = ServiceClient("query", layout.socket("query"), query_pb2_grpc.QueryServiceStub, client_settings)
    embedder = EmbedderClient(layout.socket("embedder"), client_settings)

    async def search(question: str) -> None:
        await query.call("Search", query_pb2.SearchRequest(query=question))

    async def hop(_question: str) -> None:
        await check_health(query.channel)

    try:
        yield {"search": search, "embed": embedder.embed_query, "hop": hop}
    finally:
        await query.close()
        await embedder.close()


async def measure_during_ingest(
    stack: RunningStack, corpus: Path, search: Callable[[str], Awaitable[object]], questions: list[str]
) -> tuple[Latency, Latency]:
    """Precise latency at idle, then while alexandria_ingest_file ingests a corpus book into the collection."""
    idle = await timed(search, questions)
    path = book_file(corpus, INGEST_DURING)
    async with Client(stack.mcp_url) as ingester:
        # The file names no author (on purpose, in the corpus), so the call does.
        arguments = {"file_path": str(path), "title": INGEST_DURING_TITLE, "author": INGEST_DURING_AUTHOR}
        task = asyncio.create_task(call_tool(ingester, "alexandria_ingest_file", arguments))
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
            removed = await call_tool(ingester, "alexandria_remove", {"file_path": str(path)})
            log.info("removed the %s points ingested during the measurement", removed.get("chunks_removed"))
    return idle, Latency.of(seconds)


async def measure(corpus: Path, scratch: Path, chunks: int, count: int) -> Figures:
    asked = [q.question for q in load_questions()]
    questions, warm_up = distinct_questions(asked, count), distinct_questions(asked, WARM_UP_QUERIES, skip=count)
    scratch.mkdir(parents=True, exist_ok=True)
    # The embedded store is one process's at a time: this one's for the setup, then the stack's.
    store = open_store(store_settings(scratch))
    try:
        sources = [book_file(corpus, b) for b in SOURCE_BOOKS]
        missing = [p for p in sources if p.name not in ingested_file_names(store, SOURCE)]
        if missing:
            async with embedder_service(scratch) as embedder:
                await ingest_corpus(store, embedder, missing, SOURCE)
        await asyncio.to_thread(fill_bench_collection, store, chunks)
        points = store.collection_info(BENCH).points_count
    finally:
        store.close()
    bare_store = open_store(await asyncio.to_thread(copy_bench_collection, scratch))
    try:
        bare = Bare(bare_store)
        stack = await asyncio.to_thread(corpus_stack, scratch, corpus, {"QDRANT_COLLECTION": BENCH})
        try:
            # The README's stdio set-up: the client starts `alexandria mcp`, which finds the running stack.
            alexandria = str(Path(sys.executable).parent / "alexandria")
            stdio_gateway = StdioServerParameters(command=alexandria, args=["mcp"], env=stack.env)
            floor_server = StdioServerParameters(command=sys.executable, args=["-m", "bench.mcp_floor"])
            async with (
                Client(stack.mcp_url) as client,
                Client(stdio_gateway) as stdio_client,
                Client(floor_server) as floor_client,
            ):
                precise = query_tool(client, "precise")
                async with grpc_hops(StackLayout(scratch)) as hops:
                    calls = {
                        "bare": bare.hybrid,
                        "precise": precise,
                        "stdio": query_tool(stdio_client, "precise"),
                        "floor": lambda question: call_tool(floor_client, "echo", {"query": question}),
                        **hops,
                    }
                    await in_turn(calls, warm_up)
                    turns = await in_turn(calls, questions)
                modes = {"precise": turns["precise"]}
                bare_dense = await timed(bare.dense, questions)
                for mode in MODES[1:]:
                    modes[mode] = await timed(query_tool(client, mode), questions)
                idle, during = await measure_during_ingest(stack, corpus, precise, questions)
        finally:
            await asyncio.to_thread(stack.stop)
    finally:
        bare_store.close()
    return Figures(
        turns["bare"], bare_dense, turns["stdio"], turns["search"], turns["embed"], turns["floor"], turns["hop"],
        modes, idle, during, points,
    )


def over_bare(figures: Figures, p50_ms: float) -> float:
    """A p50 as a multiple of bare's."""
    return p50_ms / figures.bare.p50_ms


def floor_ratio(figures: Figures) -> float:
    """(bare + a tool doing nothing over stdio + two gRPC calls doing nothing) / bare, at p50."""
    return over_bare(figures, figures.bare.p50_ms + figures.mcp_floor.p50_ms + 2 * figures.grpc_hop.p50_ms)


def report(figures: Figures) -> str:
    rows = [
        ("bare (encode + hybrid query)", figures.bare),
        ("bare (encode + dense query)", figures.bare_dense),
        ("gRPC Search (query service)", figures.search_grpc),
        ("gRPC Embed (embedder, one query)", figures.embed_grpc),
        ("MCP tool doing nothing, stdio", figures.mcp_floor),
        ("gRPC call doing nothing", figures.grpc_hop),
        *((f"alexandria_query {name}", latency) for name, latency in figures.modes.items()),
        ("alexandria_query precise, stdio", figures.precise_stdio),
        ("alexandria_query precise, idle", figures.idle_precise),
        ("  ... during an ingest", figures.during_ingest),
    ]
    lines = [f"{figures.points:,} points in the bench collection", f"{'':<34} {'p50 ms':>8} {'p95 ms':>8} {'n':>6}"]
    lines += [f"{name:<34} {lat.p50_ms:>8.2f} {lat.p95_ms:>8.2f} {lat.count:>6}" for name, lat in rows]
    precise = figures.modes["precise"]
    lines.append(
        f"precise / bare = {over_bare(figures, precise.p50_ms):.2f} "
        f"(stdio {over_bare(figures, figures.precise_stdio.p50_ms):.2f}; floor {floor_ratio(figures):.2f}); "
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
    setting_flags(parser, SETTINGS)
    args = parser.parse_args()
    apply_setting_flags(args)
    bench_logging("query")
    figures = asyncio.run(measure(args.corpus, args.scratch.resolve(), args.chunks, args.queries))
    print(report(figures))
    precise = figures.modes["precise"]
    print(json.dumps({
        "precise_p50_ms": round(precise.p50_ms, 2),
        "precise_p95_ms": round(precise.p95_ms, 2),
        "contextual_p50_ms": round(figures.modes["contextual"].p50_ms, 2),
        "comprehensive_p50_ms": round(figures.modes["comprehensive"].p50_ms, 2),
        "bare_p50_ms": round(figures.bare.p50_ms, 2),
        "ratio": round(over_bare(figures, precise.p50_ms), 3),
        "precise_stdio_p50_ms": round(figures.precise_stdio.p50_ms, 2),
        "stdio_ratio": round(over_bare(figures, figures.precise_stdio.p50_ms), 3),
        "search_grpc_p50_ms": round(figures.search_grpc.p50_ms, 2),
        "embed_grpc_p50_ms": round(figures.embed_grpc.p50_ms, 2),
        "mcp_floor_stdio_p50_ms": round(figures.mcp_floor.p50_ms, 2),
        "grpc_hop_p50_ms": round(figures.grpc_hop.p50_ms, 2),
        "floor_ratio": round(floor_ratio(figures), 3),
        "during_ingest_p95_ms": round(figures.during_ingest.p95_ms, 2),
    }))


if __name__ == "__main__":
    main()
