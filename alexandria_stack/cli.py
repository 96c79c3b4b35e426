"""`alexandria`: bring the stack up, check it, ingest books and ask questions from a terminal.

The CLI is one more client of the services: it holds no logic of its own. `compact` is the exception that
proves it: it runs the store's own compaction on the embedded store, which only a stopped stack leaves free.

  alexandria up [--stdio] [--port N]   start everything (embedded store under ./var)
  alexandria mcp                       MCP gateway on stdio against a running stack (.mcp.json)
  alexandria status                    health of every service and the collection
  alexandria ingest 1 2 | --all | --file PATH    ingest with a progress bar
  alexandria remove 1 | --file PATH              take a book out of the collection (its file stays)
  alexandria sync [--dry-run] [--retry-failed]   add new Calibre books, remove deleted ones
  alexandria reindex [--collection C]            rebuild a collection under the running model
  alexandria compact [--segment-mb N]            merge the embedded store's segments (the stack stopped)
  alexandria query "who is Mr. Darcy?"           print cited passages (--in highlights: your own)
  alexandria models pull BAAI/bge-m3 | list      fetch a model by its hub id once; what is installed
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any, TypeVar

from google.protobuf.message import Message
from grpc import aio

from alexandria.book_formats import DEFAULT_PREFERENCE, INGEST_PREFERENCE_WORDS, FormatPreference
from alexandria.clients import EmbedderClient, ServiceClient, ServiceHealth, health_status, wait_until_serving
from alexandria.contract import QUERY_LIMIT, QUERY_THRESHOLD
from alexandria.enums import enum_word
from alexandria.errors import AlexandriaError, InternalError, Unavailable
from alexandria.logs import configure_logging
from alexandria.progress import follow, progress_bar
from alexandria.settings import (
    MERGED_SEGMENT_MB,
    ClientSettings,
    CommonSettings,
    EmbedderSettings,
    GatewaySettings,
    StackSettings,
    StoreSettings,
    refuse_bad_settings,
)
from alexandria.store.factory import compact
from alexandria.v1 import common_pb2, ingest_pb2, ingest_pb2_grpc, query_pb2, query_pb2_grpc
from alexandria_stack.layout import (
    StackLayout,
    absolute_path_settings,
    library_problem,
    require_usable_data_dir,
)

R = TypeVar("R", bound=Message)


def _progress_line(progress: common_pb2.Progress, eta_s: float | None = None) -> str:
    bar = progress_bar(progress.done / progress.total if progress.total else 0.0, width=30)
    eta = f" ETA {eta_s // 60:.0f}:{eta_s % 60:02.0f}" if eta_s is not None else ""
    return f"\r{bar}{eta} {progress.stage:<6} {progress.message[:60]:<60}"


async def _follow(events: AsyncGenerator[Any, None], result_type: type[R]) -> R:
    """Draw a stream's progress (with an ETA for the books of a batch or sync) and batch rows on stderr;
    return its result message."""
    started: dict[str, float] = {}

    async def draw(progress: common_pb2.Progress) -> None:
        began = started.setdefault(progress.stage, time.monotonic())
        fraction = progress.done / progress.total if progress.total else 0.0
        eta = None
        if progress.stage in ("batch", "sync", "reindex") and 0.0 < fraction < 1.0:
            eta = (time.monotonic() - began) * (1.0 - fraction) / fraction
        print(_progress_line(progress, eta), end="", file=sys.stderr, flush=True)

    async def print_row(row: ingest_pb2.BatchIngestRow) -> None:
        status = enum_word(ingest_pb2.BatchStatus.DESCRIPTOR, row.status)
        print(f"\n  {status:<8} {row.title} ({row.chunks} chunks){' - ' + row.error if row.error else ''}",
              file=sys.stderr)

    result = await follow(events, draw, print_row)
    print(file=sys.stderr)
    if not isinstance(result, result_type):
        raise InternalError(f"The service answered a {type(result).__name__}, not a {result_type.__name__}.")
    return result


async def when_ready(name: str, address: str, timeout: float) -> None:
    """Wait for a service that is up but still starting (it waits for the embedder's model); one that
    is not running is left to fail at the call, with the message that says so."""
    if await health_status(address) is not ServiceHealth.NOT_SERVING:
        return
    print(f"waiting for the {name} service to finish starting...", file=sys.stderr, flush=True)
    try:
        await wait_until_serving(address, timeout)
    except (aio.AioRpcError, TimeoutError):
        raise Unavailable(
            f"The {name} service did not finish starting within {timeout:.0f} s; "
            "`alexandria status` shows which service is not SERVING, the stack's log says why."
        ) from None


def storage_line(stats: query_pb2.CollectionStats) -> str:
    """How the collection keeps its vectors and what it takes on disk, as `alexandria status` says it."""
    vectors = "vectors quantised " + stats.quantization if stats.quantization != "none" else "vectors not quantised"
    if not stats.HasField("disk_bytes"):
        return f"{vectors}; size on disk not known (a Qdrant server does not tell it)"
    return f"{vectors}; {stats.disk_bytes / 1e6:.1f} MB on disk, {stats.wal_bytes / 1e6:.1f} MB of it write-ahead log"


def auto_sync_line(status: ingest_pb2.AutoSyncStatus) -> str:
    """What the automatic sync has done and is doing, in one line of `alexandria status`."""
    if not status.enabled:
        return "auto-sync  off (AUTO_SYNC=false): run alexandria sync after changing the library"
    last = (f"last finished {status.last_finished_at}: {status.last_summary}" if status.last_finished_at
            else "none finished yet")
    if status.last_change.finished_at and status.last_change.finished_at != status.last_finished_at:
        last += f"; last change {status.last_change.finished_at}: {status.last_change.summary}"
    if status.running:
        now = f"running ({status.progress or 'planning'})" + ("; another queued: the library changed since it "
                                                             "began" if status.queued else "")
    elif status.pending:
        now = "pending" + (f" ({status.waiting_reason})" if status.waiting_reason else ", once the library is quiet")
    else:
        now = "in step"
    return f"auto-sync  {now}; {last}"


async def cmd_status(layout: StackLayout, settings: ClientSettings) -> int:
    healthy = True
    for name, address in layout.addresses().items():
        status = await health_status(address)
        healthy &= status is ServiceHealth.SERVING
        print(f"{name:<9} {status:<12} {address}")
        if name == "catalog" and status is ServiceHealth.NOT_SERVING and (problem := await library_problem(address, settings)):
            print(f"          {problem}")
    if healthy:
        embedder = EmbedderClient(layout.address("embedder"), settings)
        model = await embedder.model_info()
        await embedder.close()
        print(f"model      {model.name}: {model.dimension} dims, {model.max_seq_length} tokens, {model.device} "
              f"{model.dtype}{f'; reranked by {model.reranker}' if model.reranker else ''}")
        query = ServiceClient("query", layout.address("query"), query_pb2_grpc.QueryServiceStub, settings)
        stats = await query.call("GetCollectionStats", query_pb2.GetCollectionStatsRequest())
        print(f"collection {stats.collection_name}: {stats.points_count} points, {stats.books} books, "
              f"{stats.backend} store, status {stats.status}")
        if stats.quantization:
            print(f"           {storage_line(stats)}")
        for note in (stats.model_note, stats.language_note, stats.search_note):
            if note:
                print(f"           {note}")
        await query.close()
        ingest = ServiceClient("ingest", layout.address("ingest"), ingest_pb2_grpc.IngestServiceStub, settings)
        print(auto_sync_line(await ingest.call("GetAutoSyncStatus", ingest_pb2.GetAutoSyncStatusRequest())))
        await ingest.close()
    return 0 if healthy else 1


async def cmd_ingest(layout: StackLayout, settings: ClientSettings, args: argparse.Namespace) -> int:
    address = layout.address("ingest")
    await when_ready("ingest", address, settings.embedder_start_wait_s)
    ingest = ServiceClient("ingest", address, ingest_pb2_grpc.IngestServiceStub, settings)
    options = ingest_pb2.IngestOptions(format_preference=FormatPreference(args.format).to_proto())
    try:
        if args.file:
            file = ingest_pb2.IngestFileRequest(file_path=args.file, title=args.title or "",
                                                author=args.author or "", options=options)
            ingested = await _follow(ingest.stream("IngestFile", file), ingest_pb2.IngestResult)
            if ingested.needs_metadata:
                flags = " ".join(f'--{name} "..."' for name in ingested.missing_fields)
                print(f"{ingested.file_name} names no {' and no '.join(ingested.missing_fields)}: give "
                      f"{'them' if len(ingested.missing_fields) > 1 else 'it'} with {flags} and run the command again.")
            else:
                print(f"{ingested.title}: {ingested.chunks} chunks")
            return 0 if ingested.success else 1
        if args.all:  # the whole library: a sync that removes nothing
            return await _sync(ingest, ingest_pb2.SyncLibraryRequest(options=options))
        batch = ingest_pb2.BatchIngestRequest(book_ids=args.book_ids, options=options)
        result = await _follow(ingest.stream("BatchIngest", batch), ingest_pb2.BatchIngestResult)
        print(result.summary)
        return 0 if result.failed == 0 else 1
    finally:
        await ingest.close()


async def cmd_sync(layout: StackLayout, settings: ClientSettings, args: argparse.Namespace) -> int:
    address = layout.address("ingest")
    await when_ready("ingest", address, settings.embedder_start_wait_s)
    ingest = ServiceClient("ingest", address, ingest_pb2_grpc.IngestServiceStub, settings)
    options = ingest_pb2.IngestOptions(format_preference=FormatPreference(args.format).to_proto(),
                                       collection=args.collection or "")
    try:
        return await _sync(ingest, ingest_pb2.SyncLibraryRequest(
            options=options, dry_run=args.dry_run, remove_deleted=True, retry_failed=args.retry_failed))
    finally:
        await ingest.close()


async def _sync(ingest: ServiceClient, request: ingest_pb2.SyncLibraryRequest) -> int:
    result = await _follow(ingest.stream("SyncLibrary", request), ingest_pb2.SyncResult)
    if result.dry_run:
        for label, books in (("add", result.plan.add), ("change", result.plan.change), ("update", result.plan.update),
                             ("remove", result.plan.remove)):
            for book in books:
                print(f"  {label:<7} {book.title}")
    for book in [*result.plan.skip_failed, *result.skipped]:
        print(f"  skipped {book.title}: {book.reason}")
    for book in result.plan.no_file:
        print(f"  no file {book.title}: {book.reason}")
    for book in result.failed:
        print(f"  failed  {book.title}: {book.reason}")
    if result.plan.language_note:
        print(f"  note    {result.plan.language_note}")
    print(result.summary)
    return 0 if not result.failed else 1


async def cmd_reindex(layout: StackLayout, settings: ClientSettings, args: argparse.Namespace) -> int:
    address = layout.address("ingest")
    await when_ready("ingest", address, settings.embedder_start_wait_s)
    ingest = ServiceClient("ingest", address, ingest_pb2_grpc.IngestServiceStub, settings)
    try:
        request = ingest_pb2.ReindexRequest(collection=args.collection or "")
        result = await _follow(ingest.stream("ReindexCollection", request), ingest_pb2.ReindexResult)
    finally:
        await ingest.close()
    for book in result.gone:
        print(f"  gone    {book.title}: {book.reason}")
    for book in result.failed:
        print(f"  failed  {book.title}: {book.reason}")
    print(result.summary)
    return 0 if result.swapped and not result.failed else 1


def cmd_compact(args: argparse.Namespace) -> int:
    settings = StoreSettings()
    if args.collection:
        settings = settings.model_copy(update={"qdrant_collection": args.collection})
    done = compact(settings, args.segment_mb, report=lambda line: print(line, file=sys.stderr, flush=True))
    print(f"{done.collection}: {done.segments_before} -> {done.segments_after} segments in {done.seconds:.0f} s")
    if done.hnsw_ef != settings.qdrant_hnsw_ef:
        print(f"Its dense searches now visit {done.hnsw_ef} candidates in each segment, as its larger segments need "
              "for the same recall (docs/scaling.md, A large library on one machine).", file=sys.stderr)
    else:
        print(f"Its segments are small enough to be searched with QDRANT_HNSW_EF ({done.hnsw_ef}) as before.",
              file=sys.stderr)
    return 0


async def cmd_remove(layout: StackLayout, settings: ClientSettings, args: argparse.Namespace) -> int:
    address = layout.address("ingest")
    await when_ready("ingest", address, settings.embedder_start_wait_s)
    ingest = ServiceClient("ingest", address, ingest_pb2_grpc.IngestServiceStub, settings)
    try:
        removed = await ingest.call("RemoveBook", ingest_pb2.RemoveBookRequest(
            collection=args.collection or "", book_id=args.book_id, file_path=args.file))
    finally:
        await ingest.close()
    print(f"removed {removed.title} by {removed.author or 'an unknown author'} from '{removed.collection}': "
          f"{removed.chunks_removed} points")
    return 0


async def cmd_query(layout: StackLayout, settings: ClientSettings, args: argparse.Namespace) -> int:
    QUERY_LIMIT.check(args.limit)  # here: the request's 0 would mean "the default" to the service
    address = layout.address("query")
    await when_ready("query", address, settings.embedder_start_wait_s)
    query = ServiceClient("query", address, query_pb2_grpc.QueryServiceStub, settings)
    try:
        response = await query.call("Search", query_pb2.SearchRequest(
            query=args.text, limit=args.limit, threshold=args.threshold, guardian="none",
            search_mode=f"SEARCH_MODE_{(args.mode or 'unspecified').upper()}",
            hypothetical_passage=args.passage or "", search_in=f"SEARCH_IN_{args.search_in.upper()}"))
    finally:
        await query.close()
    if not response.results:
        print(response.notice or "No passage matched.")
    for i, hit in enumerate(response.results, 1):
        pages = f", pp. {hit.locator.page_start}-{hit.locator.page_end}" if hit.locator.HasField("page_start") else ""
        print(f"[{i}] {hit.book_title} — {hit.author} — {hit.section_name}{pages} (score {hit.score:.2f})")
        print(f"    {'Highlighted: ' if hit.kind == 'highlight' else ''}{hit.text[:600]}")
        if hit.note:
            print(f"    Your note: {hit.note}")
        print(f"    {hit.link}\n" if hit.link else "")
    return 0


def _port(text: str) -> int:
    port = int(text) if text.isdigit() else -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is no port: give a number from 0 (any free one) to 65535")
    return port


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="alexandria", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the whole stack")
    up.add_argument("--stdio", action="store_true", help="serve MCP on stdio instead of HTTP")
    up.add_argument("--port", type=_port, help="0 = any free port (default: GATEWAY_PORT, 8765)")
    up.add_argument("--host", help="where the HTTP gateway listens (default: GATEWAY_HOST, 127.0.0.1)")
    sub.add_parser("mcp", help="MCP gateway on stdio against a running stack")
    sub.add_parser("status", help="health of every service")
    ingest = sub.add_parser("ingest", help="ingest Calibre books or a local file")
    ingest.add_argument("book_ids", nargs="*", type=int)
    ingest.add_argument("--all", action="store_true", help="every book of the library not in yet (a sync that removes nothing)")
    ingest.add_argument("--file")
    ingest.add_argument("--title")
    ingest.add_argument("--author")
    ingest.add_argument("--format", default=DEFAULT_PREFERENCE.value, choices=INGEST_PREFERENCE_WORDS)
    remove = sub.add_parser("remove", help="take a book out of the collection (its file is not touched)")
    remove.add_argument("book_id", nargs="?", type=int, help="its Calibre id")
    remove.add_argument("--file", help="the local file it was ingested from")
    remove.add_argument("--collection", help="default: QDRANT_COLLECTION")
    sync = sub.add_parser("sync", help="bring the collection in step with the Calibre library")
    sync.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    sync.add_argument("--retry-failed", action="store_true", help="retry books that failed with the same file")
    sync.add_argument("--collection", help="default: QDRANT_COLLECTION")
    sync.add_argument("--format", default=DEFAULT_PREFERENCE.value, choices=INGEST_PREFERENCE_WORDS,
                      help="preferred format")
    reindex = sub.add_parser("reindex", help="rebuild a collection under the running model, then swap it in")
    reindex.add_argument("--collection", help="default: QDRANT_COLLECTION")
    compact = sub.add_parser("compact", help="merge the embedded collection's segments into fewer, larger ones "
                                              "for faster queries on a large library (stop the stack first)")
    compact.add_argument("--segment-mb", type=int, default=MERGED_SEGMENT_MB,
                         help=f"the largest merged segment, in MB of vectors (default {MERGED_SEGMENT_MB})")
    compact.add_argument("--collection", help="default: QDRANT_COLLECTION")
    models = sub.add_parser("models", help="fetch models by their Hugging Face id, list those fetched")
    models_sub = models.add_subparsers(dest="models_command", required=True)
    pull = models_sub.add_parser("pull", help="fetch a model once into EMBEDDER_MODELS_DIR (resumable)")
    pull.add_argument("model_id", nargs="?", help="as the hub names it, e.g. BAAI/bge-m3; default: those the settings "
                                                  "(EMBEDDER_PROFILE, EMBEDDER_MODEL, EMBEDDER_RERANKER_MODEL) name")
    pull.add_argument("--revision", help="a branch, tag or commit (default: main)")
    models_sub.add_parser("list", help="the models fetched by name: size, revision, dimensions, collections")
    query = sub.add_parser("query", help="ask a question, print cited passages")
    query.add_argument("text")
    query.add_argument("--limit", type=int, default=QUERY_LIMIT.default)
    query.add_argument("--threshold", type=float, default=QUERY_THRESHOLD.default)
    query.add_argument("--mode", choices=("hybrid", "semantic", "lexical"), help="default: the mode measured best")
    query.add_argument("--passage", help="what you expect the answering passage to say, in the book's words "
                                         "(searched beside the question, never printed)")
    query.add_argument("--in", dest="search_in", choices=("passages", "highlights", "both"), default="passages",
                       help="the books' text (default), your highlights in Calibre's viewer, or both")
    args = parser.parse_args(argv)

    refuse_bad_settings()
    # Once, here: the stack's processes run in the repository (launcher.py) and would read a relative path there.
    os.environ.update(absolute_path_settings(os.environ, Path.cwd()))
    common, gateway, clients = CommonSettings(), GatewaySettings(), ClientSettings()
    configure_logging("cli", common.alexandria_log_level)
    layout = StackLayout.from_settings(StackSettings())
    try:
        if args.command == "up":
            from alexandria_stack.launcher import Stack, prepare_embedder, require_named_models, run_stack
            from gateway.binding import bind_socket, require_safe_binding

            given = {"gateway_host": args.host, "gateway_port": args.port}
            listen = gateway.model_copy(update={name: value for name, value in given.items() if value is not None})
            listening = None
            if not args.stdio:
                # Checked and bound before anything starts: the gateway would refuse either after the model loaded.
                require_safe_binding(listen)
                listening = bind_socket(listen.gateway_host, listen.gateway_port)
                listen = listen.model_copy(update={"gateway_port": listening.getsockname()[1]})
            require_usable_data_dir(layout.data_dir)
            require_named_models(layout)
            store = StoreSettings()
            profile = prepare_embedder(layout, store)
            stack = Stack(layout, listen, store, clients, "stdio" if args.stdio else "http", profile, listening)
            code = asyncio.run(run_stack(stack))
        elif args.command == "mcp":
            addresses = {f"{n.upper()}_ADDR": a for n, a in layout.addresses().items()}
            os.execve(sys.executable, [sys.executable, "-m", "gateway", "--transport", "stdio"],
                      {**os.environ, **addresses})
        elif args.command == "models":
            from alexandria_stack.models import cmd_list, cmd_pull, fetch_missing

            if args.models_command == "list":
                code = cmd_list()
            elif args.model_id:
                code = cmd_pull(args.model_id, args.revision)
            else:
                code = fetch_missing(EmbedderSettings())
        elif args.command == "status":
            code = asyncio.run(cmd_status(layout, clients))
        elif args.command == "sync":
            code = asyncio.run(cmd_sync(layout, clients, args))
        elif args.command == "compact":
            code = cmd_compact(args)
        elif args.command == "reindex":
            code = asyncio.run(cmd_reindex(layout, clients, args))
        elif args.command == "ingest":
            if sum(map(bool, (args.book_ids, args.all, args.file))) != 1:
                parser.error("ingest takes one of: book ids, --all or --file")
            if (args.title or args.author) and not args.file:
                parser.error("--title and --author name a local file's book: give them with --file")
            code = asyncio.run(cmd_ingest(layout, clients, args))
        elif args.command == "remove":
            if (args.book_id is None) == (args.file is None):
                parser.error("remove takes one of: a Calibre book id or --file")
            code = asyncio.run(cmd_remove(layout, clients, args))
        else:
            code = asyncio.run(cmd_query(layout, clients, args))
    except AlexandriaError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)
