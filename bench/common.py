"""What the benches share: where the corpus and the scratch folders are, percentiles and latencies, logging,
the settings a bench turns by flag, a store and an embedder in this process, the corpus ingested into a scratch
store, a stack on the corpus, MCP tool calls timed, and a process's memory."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client

from alexandria.book_identity import FileVersion, local_book_key
from alexandria.clients import EmbedderClient
from alexandria.logs import configure_logging
from alexandria.settings import ClientSettings, EmbedderProfile, EmbedderSettings, StoreSettings
from alexandria.store import Filter, Store
from alexandria.store import schema as f
from bench.basics import ROOT, percentile_ms
from services.ingest.documents import ChunkingParams
from services.ingest.extract import extract_book
from services.ingest.pipeline import BookIngestor, BookToIngest
from tests.e2e.stack import RunningStack, start_stack

DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus"
CALIBRE_LIBRARY = DEFAULT_CORPUS / "calibre-library"
PRIDE_EPUB = CALIBRE_LIBRARY / "Jane Austen" / "Pride and Prejudice (1)" / "Pride and Prejudice - Jane Austen.epub"

# The store's tuned constants (StoreSettings fields no environment variable sets), which a bench that builds or
# serves a collection takes as flags (setting_flags), beside the one store setting of its layout.
STORE_TUNING = ("qdrant_hnsw_ef", "qdrant_quantization_oversampling", "qdrant_on_disk", "qdrant_hnsw_m",
                "qdrant_hnsw_ef_construct", "embedded_search_threads", "embedded_max_segment_mb",
                "embedded_merged_segment_mb")
STORE_SETTINGS = ("QDRANT_QUANTIZATION", *STORE_TUNING)

log = logging.getLogger("bench")


def bench_logging(name: str) -> None:
    """Warnings from everything, and the benches' own progress (every `bench.*` logger), as bench `name`."""
    configure_logging(f"bench.{name}", "WARNING")
    log.setLevel(logging.INFO)


@dataclass(frozen=True)
class Latency:
    p50_ms: float
    p95_ms: float
    count: int

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Latency:
        return cls(percentile_ms(seconds, 50), percentile_ms(seconds, 95), len(seconds))


# The store's tuned constants this bench's flags replaced (apply_setting_flags), for every store it opens.
_store_tuning: dict[str, str] = {}


def setting_flags(parser: argparse.ArgumentParser, names: Sequence[str]) -> None:
    """A flag for each setting or tuned constant (`--qdrant-hnsw-ef` for StoreSettings.qdrant_hnsw_ef);
    apply_setting_flags puts them in place. The settings class checks the value."""
    group = parser.add_argument_group("settings", "an environment setting is set for this bench and the stack it "
                                      "starts; a tuned constant of the store for the stores this bench opens")
    for name in names:
        group.add_argument(f"--{name.lower().replace('_', '-')}", dest=f"setting_{name}", metavar=name.upper())


def apply_setting_flags(args: argparse.Namespace) -> None:
    """Put the values of setting_flags' flags in place: a setting in this process's environment (a stack
    inherits it), a tuned constant of the store in every store_settings() after this."""
    for key, value in vars(args).items():
        if key.startswith("setting_") and value is not None:
            name = key.removeprefix("setting_")
            if name in STORE_TUNING:
                _store_tuning[name] = value
            else:
                os.environ[name] = value


def store_settings(scratch: Path) -> StoreSettings:
    """The embedded store in `scratch`, with the tuned constants given as flags."""
    return StoreSettings(alexandria_data_dir=scratch, qdrant_url=None, qdrant_local_path=None, **_store_tuning)


@asynccontextmanager
async def embedder_service(
    scratch: Path, model: str | None = None, profile: EmbedderProfile | None = None
) -> AsyncIterator[EmbedderClient]:
    """The real embedder server (`model` under `profile`, else the environment's) in this process, on a unix
    socket in `scratch`."""
    # Imported here: torch and the model's libraries, which a bench that starts no embedder need not load.
    from services.embedder import server as embedder_server

    settings = EmbedderSettings(embedder_listen=f"unix://{scratch.resolve() / 'embedder.sock'}", embedder_model=model,
                                **({"embedder_profile": profile} if profile else {}))
    server = embedder_server.create_server(settings)
    await server.start()
    client = EmbedderClient(server.address, ClientSettings())
    try:
        await client.wait_until_ready()
        yield client
    finally:
        await client.close()
        await server.stop(grace=1)


def ingested_file_names(store: Store, collection: str) -> set[str]:
    if store.collection_info(collection) is None:
        return set()
    paths = store.facet_counts(collection, f.FILE_PATH, Filter(must={f.COMPLETE: True}))
    return {Path(str(p)).name for p in paths}


async def ingest_corpus(
    store: Store, embedder: EmbedderClient, files: Sequence[Path], collection: str,
    on_written: Callable[[str], None] = lambda collection: None,
) -> None:
    """Ingest `files` into `collection` with the ingest pipeline, as local files, default parameters.

    `on_written` is called with the collection after each book, as the ingest service does to
    keep the index up to date.
    """
    ingestor = BookIngestor(store, embedder, on_written)
    for path in files:
        started = time.perf_counter()
        source = await asyncio.to_thread(local_book_file, path)
        await ingestor.ingest(source, collection, ChunkingParams(), True, lambda *progress: None)
        log.info("ingested %s in %.1f s", path.name, time.perf_counter() - started)


def local_book_file(path: Path) -> BookToIngest:
    """A corpus file as the ingest service reads a local file: its metadata from the file itself."""
    extracted = extract_book(path)
    version = FileVersion.read(path, extracted.format)
    return BookToIngest(path, version, local_book_key(version.sha256), extracted.title, extracted.authors,
                        extracted.language, None, extracted)


def corpus_stack(data_dir: Path, corpus: Path, extra_env: dict[str, str] | None = None) -> RunningStack:
    """`alexandria up` on `data_dir`, serving the corpus's Calibre library and its local files."""
    return start_stack(data_dir, corpus / "calibre-library", corpus / "local-files", extra_env)


async def call_tool(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The tool's structured result; a tool error stops the benchmark, naming it."""
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise SystemExit(f"{tool} failed: {result.structured_content or result.content}")
    return result.structured_content or {}


def query_tool(client: Client, context_mode: str) -> Callable[[str], Awaitable[object]]:
    """alexandria_query in `context_mode`, every other argument at its default."""
    return lambda question: call_tool(client, "alexandria_query", {"query": question, "context_mode": context_mode})


async def in_turn(calls: dict[str, Callable[[str], Awaitable[object]]], questions: list[str]) -> dict[str, Latency]:
    """Latency of each call over the same questions, taking turns, the order rotated every question."""
    names = list(calls)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for index, question in enumerate(questions):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            started = time.perf_counter()
            await calls[name](question)
            seconds[name].append(time.perf_counter() - started)
    return {name: Latency.of(values) for name, values in seconds.items()}


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """A process's resident memory (or another kB line of /proc/PID/status: VmHWM, its peak), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0
