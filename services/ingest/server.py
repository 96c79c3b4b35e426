"""The ingest service: extract, chunk, embed and write books, streaming progress.

The servicer maps protos to the pipeline (pipeline.py), the local-file roots
(local_files.py) and the writer (writer.py), and back. Health is SERVING once the
embedder answers: nothing can be ingested or chunked without it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from google.protobuf.message import Message
from grpc import aio

from alexandria.book_formats import FormatPreference
from alexandria.clients import EmbedderClient, ServiceClient
from alexandria.enums import enum_number
from alexandria.errors import AlexandriaError, FailedPrecondition, InvalidArgument, NotFound
from alexandria.grpc_server import ServiceServer, build_server
from alexandria.progress import progress_bar
from alexandria.settings import IngestSettings
from alexandria.store import Filter, Store, finish_before_cancel, open_store
from alexandria.store import schema as f
from alexandria.store.model import check_collection_name
from alexandria.v1 import catalog_pb2, catalog_pb2_grpc, common_pb2, ingest_pb2, ingest_pb2_grpc
from alexandria.v1.catalog_pb2 import LibraryFile
from services.ingest.auto_sync import AutoSync, AutoSyncRun
from services.ingest.batch import (
    BatchBook,
    BatchRow,
    BatchSelection,
    BatchStatus,
    count,
    ingest_batch,
    select_books,
    summary,
)
from services.ingest.chunking import validate_params
from services.ingest.documents import ChunkingParams
from services.ingest.extract.ocr import OcrOptions
from services.ingest.local_files import LocalRoots
from services.ingest.pipeline import BookIngestor, BookToIngest, IngestOutcome, ocr_options
from services.ingest.progress import Report, run_with_progress
from services.ingest.reindex import CollectionReindex, ReindexOutcome
from services.ingest.sources import BookSources
from services.ingest.sync import NO_FILE, LibrarySync, SyncOutcome, SyncRequest
from services.ingest.writer import BookWriter

log = logging.getLogger(__name__)
E = TypeVar("E", bound=Message)  # a streaming call's event message

def params_message(params: ChunkingParams) -> common_pb2.ChunkingParams:
    return common_pb2.ChunkingParams(threshold=params.threshold, min_chunk_size=params.min_chunk_size,
                                     max_chunk_size=params.max_chunk_size)


def result_message(outcome: IngestOutcome) -> ingest_pb2.IngestResult:
    return ingest_pb2.IngestResult(
        success=True, title=outcome.title, author=outcome.author, language=outcome.language,
        chunks=outcome.chunks, parent_chunks=outcome.parents, hierarchical=outcome.hierarchical,
        chunking_params=params_message(outcome.params), file_size_mb=outcome.file_size_mb,
        collection=outcome.collection, format=outcome.format, progress=outcome.progress, steps=outcome.steps,
        book_key=outcome.book_key, book_id=outcome.calibre_id, file_path=outcome.file_path,
        truncated_chunks=outcome.truncated, seconds=outcome.seconds,
    )


class IndexMaintainer:
    """Runs store.optimize() after books are written, one collection at a time, off the event loop."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._pending: set[str] = set()
        self._task: asyncio.Task[None] | None = None

    def request(self, collection: str) -> None:
        self._pending.add(collection)
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while self._pending:
            collection = self._pending.pop()
            try:
                await asyncio.to_thread(self.store.optimize, collection)
            except Exception:  # indexing is an optimisation; queries stay correct without it
                log.exception("optimizing %s failed", collection)

    async def drain(self) -> None:
        if self._task is not None:
            await self._task


class IngestServicer(ingest_pb2_grpc.IngestServiceServicer):
    def __init__(self, settings: IngestSettings, store: Store, embedder: EmbedderClient,
                 catalog: ServiceClient, indexer: IndexMaintainer) -> None:
        self.settings = settings
        self.store = store
        self.catalog = catalog
        self.roots = LocalRoots.from_settings(settings)
        self.sources = BookSources(catalog, self.roots)
        self.ocr = OcrOptions.from_settings(settings)
        self.ingestor = BookIngestor(store, embedder, indexer.request, self.ocr)
        state_dir = settings.store.alexandria_data_dir / "sync"
        self.sync = LibrarySync(catalog, self.ingestor, state_dir)
        self.reindex = CollectionReindex(catalog, self.sources, self.ingestor, state_dir)
        self.auto_sync = AutoSync(catalog, self.sync, state_dir, settings.store.qdrant_collection,
                                  settings.auto_sync_quiet_s, settings.auto_sync_poll_s,
                                  lambda outcome: sync_result(outcome).summary)

    def _collection(self, name: str) -> str:
        return check_collection_name(name.strip() or self.settings.store.qdrant_collection)

    def _options(self, options: ingest_pb2.IngestOptions) -> tuple[str, ChunkingParams, bool, FormatPreference]:
        params = validate_params(options.chunking.threshold, options.chunking.min_chunk_size,
                                 options.chunking.max_chunk_size)
        hierarchical = options.hierarchical if options.HasField("hierarchical") else True
        return self._collection(options.collection), params, hierarchical, FormatPreference.from_proto(options.format_preference)

    async def _source(self, source: ingest_pb2.BookSource, report: Report) -> BookToIngest:
        kind = source.WhichOneof("source")
        if kind == "book_id":
            return await self.sources.calibre(source.book_id, FormatPreference.from_proto(source.format_preference))
        if kind == "file_path":
            ocr = ocr_options(report, None, self.ocr)
            return await self.sources.local(source.file_path, ocr=ocr)
        raise InvalidArgument("Give a book: either book_id (a Calibre id) or file_path (a local file).")

    @staticmethod
    async def _stream(work: Callable[[Report], Awaitable[Message]], wrap: Callable[..., E]) -> AsyncIterator[E]:
        """The events of a streaming call: `work`'s progress, then its result, each wrapped in the call's event
        message (`wrap(progress=...)` or `wrap(result=...)`)."""
        async for item in run_with_progress(work):
            yield wrap(progress=item) if isinstance(item, common_pb2.Progress) else wrap(result=item)

    async def IngestBook(
        self, request: ingest_pb2.IngestBookRequest,
        context: aio.ServicerContext[ingest_pb2.IngestBookRequest, ingest_pb2.IngestEvent],
    ) -> AsyncIterator[ingest_pb2.IngestEvent]:
        collection, params, hierarchical, fmt = self._options(request.options)

        async def work(report: Report) -> ingest_pb2.IngestResult:
            source = await self.sources.calibre(request.book_id, fmt)
            return result_message(await self.ingestor.ingest(source, collection, params, hierarchical, report))

        async for event in self._stream(work, ingest_pb2.IngestEvent):
            yield event

    async def IngestFile(
        self, request: ingest_pb2.IngestFileRequest,
        context: aio.ServicerContext[ingest_pb2.IngestFileRequest, ingest_pb2.IngestEvent],
    ) -> AsyncIterator[ingest_pb2.IngestEvent]:
        collection, params, hierarchical, _ = self._options(request.options)

        async def work(report: Report) -> ingest_pb2.IngestResult:
            report("extract", 0, 1, "reading the file's metadata")
            ocr = ocr_options(report, request.language or None, self.ocr)
            source = await self.sources.local(request.file_path, request.title, request.author, request.language, ocr)
            await asyncio.to_thread(BookWriter(self.store, collection).refuse_if_ingested, source.book_key,
                                    source.title or source.path.name)
            missing = [name for name, value in (("title", source.title), ("author", source.authors)) if not value]
            if missing:
                return needs_metadata_result(source, missing)
            return result_message(await self.ingestor.ingest(source, collection, params, hierarchical, report))

        async for event in self._stream(work, ingest_pb2.IngestEvent):
            yield event

    async def BatchIngest(
        self, request: ingest_pb2.BatchIngestRequest,
        context: aio.ServicerContext[ingest_pb2.BatchIngestRequest, ingest_pb2.BatchIngestEvent],
    ) -> AsyncIterator[ingest_pb2.BatchIngestEvent]:
        collection, params, hierarchical, fmt = self._options(request.options)
        selection = BatchSelection(tuple(request.book_ids), request.author, request.title, request.language,
                                   request.limit)
        finished: asyncio.Queue[BatchRow] = asyncio.Queue()

        async def resolve(book: BatchBook) -> tuple[BatchBook, BookToIngest]:
            return await self.sources.resolve_for_batch(book, fmt)

        async def ingest(source: BookToIngest, report: Report) -> int:
            return (await self.ingestor.ingest(source, collection, params, hierarchical, report)).chunks

        async def work(report: Report) -> ingest_pb2.BatchIngestResult:
            books = await select_books(selection, self.catalog)
            rows = await ingest_batch(books, resolve, ingest, report, finished.put_nowait)
            counted = count(rows)
            return ingest_pb2.BatchIngestResult(
                total=len(rows), succeeded=counted[BatchStatus.SUCCESS], skipped=counted[BatchStatus.SKIPPED],
                failed=counted[BatchStatus.FAILED], results=[row_message(row) for row in rows], summary=summary(rows),
            )

        async for item in run_with_progress(work):
            while not finished.empty():
                yield ingest_pb2.BatchIngestEvent(row=row_message(finished.get_nowait()))
            if isinstance(item, common_pb2.Progress):
                yield ingest_pb2.BatchIngestEvent(progress=item)
            else:
                yield ingest_pb2.BatchIngestEvent(result=item)

    async def SyncLibrary(
        self, request: ingest_pb2.SyncLibraryRequest,
        context: aio.ServicerContext[ingest_pb2.SyncLibraryRequest, ingest_pb2.SyncEvent],
    ) -> AsyncIterator[ingest_pb2.SyncEvent]:
        collection, params, hierarchical, fmt = self._options(request.options)
        sync = SyncRequest(collection, params, hierarchical, fmt, request.dry_run, request.remove_deleted,
                           request.retry_failed)

        async def work(report: Report) -> ingest_pb2.SyncResult:
            return sync_result(await self.sync.run(sync, report))

        async for event in self._stream(work, ingest_pb2.SyncEvent):
            yield event

    async def ReindexCollection(
        self, request: ingest_pb2.ReindexRequest,
        context: aio.ServicerContext[ingest_pb2.ReindexRequest, ingest_pb2.ReindexEvent],
    ) -> AsyncIterator[ingest_pb2.ReindexEvent]:
        collection = self._collection(request.collection)

        async def work(report: Report) -> ingest_pb2.ReindexResult:
            return reindex_result(await self.reindex.run(collection, report))

        async for event in self._stream(work, ingest_pb2.ReindexEvent):
            yield event

    async def GetAutoSyncStatus(
        self, request: ingest_pb2.GetAutoSyncStatusRequest,
        context: aio.ServicerContext[ingest_pb2.GetAutoSyncStatusRequest, ingest_pb2.AutoSyncStatus],
    ) -> ingest_pb2.AutoSyncStatus:
        watcher = self.auto_sync
        runs = [auto_sync_run(run) for run in watcher.record.runs]
        last_change = watcher.record.last_change
        return ingest_pb2.AutoSyncStatus(
            enabled=self.settings.auto_sync, collection=watcher.collection, pending=watcher.pending,
            running=watcher.running, progress=watcher.progress,
            last_finished_at=runs[0].finished_at if runs else "", last_summary=runs[0].summary if runs else "",
            waiting_reason=watcher.waiting_reason, runs=watcher.runs, queued=watcher.queued, recent_runs=runs,
            last_change=auto_sync_run(last_change) if last_change else None,
            books_indexed=watcher.counts.indexed if watcher.running else 0,
            books_total=watcher.counts.total if watcher.running else 0,
            seconds_left=watcher.counts.seconds_left(time.monotonic()) if watcher.running else None,
        )

    async def TestChunking(
        self, request: ingest_pb2.TestChunkingRequest,
        context: aio.ServicerContext[ingest_pb2.TestChunkingRequest, ingest_pb2.TestChunkingEvent],
    ) -> AsyncIterator[ingest_pb2.TestChunkingEvent]:
        params = validate_params(request.chunking.threshold, request.chunking.min_chunk_size,
                                 request.chunking.max_chunk_size)

        async def work(report: Report) -> ingest_pb2.TestChunkingResult:
            source = await self._source(request.source, report)
            prepared, preview = await self.ingestor.preview(source, params, report)
            stats = preview.stats
            return ingest_pb2.TestChunkingResult(
                success=True, title=source.title or prepared.book.title or source.path.name,
                author=" & ".join(source.authors),
                parameters=ingest_pb2.ChunkingParameters(threshold=params.threshold, min=params.min_chunk_size,
                                                         max=params.max_chunk_size),
                stats=ingest_pb2.ChunkStats(total_chunks=stats.total_chunks, avg_words=stats.avg_words,
                                            min_words=stats.min_words, max_words=stats.max_words),
                samples=[ingest_pb2.ChunkSample(chunk_num=s.chunk_num, words=s.words, text=s.text,
                                                locator=s.locator.to_proto()) for s in preview.samples],
                chapters=len(prepared.book.chapters), total_sentences=len(prepared.sentences),
                total_words=prepared.book.word_count, format=source.format,
            )

        async for event in self._stream(work, ingest_pb2.TestChunkingEvent):
            yield event

    async def CompareChunking(
        self, request: ingest_pb2.CompareChunkingRequest,
        context: aio.ServicerContext[ingest_pb2.CompareChunkingRequest, ingest_pb2.CompareChunkingEvent],
    ) -> AsyncIterator[ingest_pb2.CompareChunkingEvent]:
        validate_params(None, request.min_chunk_size, request.max_chunk_size)

        async def work(report: Report) -> ingest_pb2.CompareChunkingResult:
            source = await self._source(request.source, report)
            prepared, result = await self.ingestor.compare(source, request.min_chunk_size,
                                                           request.max_chunk_size, report)
            d = result.similarity_distribution
            return ingest_pb2.CompareChunkingResult(
                success=True, title=source.title or prepared.book.title or source.path.name,
                author=" & ".join(source.authors), total_sentences=result.total_sentences,
                total_words=result.total_words,
                similarity_distribution=ingest_pb2.SimilarityDistribution(min=d.min, max=d.max, mean=d.mean,
                                                                          median=d.median),
                comparisons=[
                    ingest_pb2.ThresholdComparison(
                        threshold=c.threshold, chunks=c.chunks, avg_words=c.avg_words, coherence=c.coherence,
                        semantic_breaks=c.semantic_breaks, forced_breaks=c.forced_breaks,
                        sample_breaks=[ingest_pb2.SampleBreak(sentence_index=b.sentence_index,
                                                              similarity=b.similarity, before=b.before,
                                                              after=b.after) for b in c.sample_breaks])
                    for c in result.comparisons
                ],
                recommendation=result.recommendation, recommendation_reason=result.recommendation_reason,
            )

        async for event in self._stream(work, ingest_pb2.CompareChunkingEvent):
            yield event

    async def BrowseLocal(
        self, request: ingest_pb2.BrowseLocalRequest,
        context: aio.ServicerContext[ingest_pb2.BrowseLocalRequest, ingest_pb2.BrowseLocalResponse],
    ) -> ingest_pb2.BrowseLocalResponse:
        folder, files = await asyncio.to_thread(self.roots.browse, request.path or None, request.recursive)
        return ingest_pb2.BrowseLocalResponse(
            path=str(folder), count=len(files),
            files=[ingest_pb2.LocalFile(name=x.name, size_mb=x.size_mb, format=x.format, full_path=x.full_path)
                   for x in files])

    async def RemoveBook(
        self, request: ingest_pb2.RemoveBookRequest,
        context: aio.ServicerContext[ingest_pb2.RemoveBookRequest, ingest_pb2.RemoveBookResponse],
    ) -> ingest_pb2.RemoveBookResponse:
        collection = self._collection(request.collection)
        writer = BookWriter(self.store, collection)
        kind = request.WhichOneof("book")
        if kind == "book_id":
            where, what = Filter(must={f.CALIBRE_ID: request.book_id}), f"Calibre book id {request.book_id}"
        elif kind == "file_path":
            where, what = await self.sources.local_filter(request.file_path), f"file {request.file_path}"
        else:
            raise InvalidArgument("Say which book to remove: book_id (Calibre id) or file_path.")
        try:
            key, title, author = await asyncio.to_thread(writer.find_book_key, where, what)
        except NotFound:
            if self.ingestor.is_claimed(collection, await self._book_key(request, where)):
                raise FailedPrecondition(f"Nothing of {what} is stored yet: it is being ingested into '{collection}' "
                                         "for the first time right now; remove it once that ends.") from None
            raise
        # Removed under the ingest's claim: a removal amid an ingest's writes would leave its later batches, made
        # visible at its end, as a part of the book.
        busy = FailedPrecondition(f"'{title}' is being ingested into '{collection}' right now; remove it once that "
                                  "ends.")
        with self.ingestor.claimed(collection, key, busy):
            removed = await finish_before_cancel(asyncio.to_thread(writer.remove, key, title, author))
        return ingest_pb2.RemoveBookResponse(success=True, title=removed.title, author=removed.author,
                                             book_key=removed.book_key, chunks_removed=removed.points,
                                             collection=collection)

    async def _book_key(self, request: ingest_pb2.RemoveBookRequest, where: Filter) -> str:
        """The key a book to remove is stored under before any of it is: its Calibre uuid, or the content key of the
        local file that `where` found (empty when neither is known)."""
        if request.WhichOneof("book") == "file_path":
            return str(where.must.get(f.BOOK_KEY, ""))
        try:
            found = await self.catalog.call("GetBook", catalog_pb2.GetBookRequest(book_id=request.book_id))
        except AlexandriaError:  # an id the library lacks, or a catalog down: no ingest of it to tell of
            return ""
        return str(found.book.uuid)


def auto_sync_run(run: AutoSyncRun) -> ingest_pb2.AutoSyncRun:
    return ingest_pb2.AutoSyncRun(finished_at=run.finished_at, summary=run.summary, changed=run.changed)


def sync_book(book: LibraryFile, reason: str = "") -> ingest_pb2.SyncBook:
    return ingest_pb2.SyncBook(book_id=book.book_id, title=book.title, reason=reason)


def sync_result(outcome: SyncOutcome) -> ingest_pb2.SyncResult:
    plan = outcome.plan
    plan_message = ingest_pb2.SyncPlan(
        add=[sync_book(b) for b in plan.add],
        change=[sync_book(b) for b in plan.change],
        update=[sync_book(b) for b in plan.update],
        remove=[ingest_pb2.SyncBook(title=outcome.removing[key]) for key in plan.remove],
        skip_failed=[sync_book(s.book, s.reason) for s in plan.failed_before],
        no_file=[sync_book(b, NO_FILE) for b in plan.no_file],
        unchanged=plan.unchanged,
        language_note=plan.language_note,
    )
    failed, skipped = outcome.failed, outcome.skipped
    done = ("to add", "to remove") if outcome.dry_run else ("added", "removed")
    highlights = (f"; highlights: {outcome.highlights_added} {done[0]}, {outcome.highlights_removed} {done[1]}"
                  if outcome.highlights_added or outcome.highlights_removed else "")
    if outcome.dry_run:
        summary_line = f"🔎 Sync plan: {plan.counts()}{highlights}; nothing was changed."
    else:
        summary_line = (f"🔄 Sync complete in {outcome.seconds:.1f} s: {outcome.added} added, {outcome.replaced} "
                        f"replaced, {len(outcome.updated)} updated, {len(outcome.removed)} removed, {len(failed)} "
                        f"failed, {len(plan.failed_before) + len(skipped)} skipped, {outcome.unchanged} unchanged, {len(plan.no_file)} with no file on disk{plan.staleness()}"
                        f"{highlights}.")
    return ingest_pb2.SyncResult(
        plan=plan_message, dry_run=outcome.dry_run, added=outcome.added, replaced=outcome.replaced,
        removed=len(outcome.removed), updated=len(outcome.updated),
        failed=[ingest_pb2.SyncBook(book_id=r.book.id, title=r.book.title, reason=r.error or "") for r in failed],
        skipped=[ingest_pb2.SyncBook(book_id=r.book.id, title=r.book.title, reason=r.error or "") for r in skipped],
        summary=summary_line, seconds=outcome.seconds, highlights_added=outcome.highlights_added,
        highlights_removed=outcome.highlights_removed,
    )


def reindex_result(outcome: ReindexOutcome) -> ingest_pb2.ReindexResult:
    return ingest_pb2.ReindexResult(
        collection=outcome.collection, model=outcome.model, previous_model=outcome.previous_model,
        rebuilt=outcome.rebuilt, resumed=len(outcome.plan.done),
        gone=[ingest_pb2.ReindexBook(title=g.book.title, book_key=g.book.book_key, reason=g.reason)
              for g in outcome.plan.gone],
        failed=[ingest_pb2.ReindexBook(title=row.book.title, reason=row.error or "") for row in outcome.failed],
        swapped=outcome.swapped, books=outcome.books, points=outcome.points, summary=outcome.summary(),
        seconds=outcome.seconds,
    )


def row_message(row: BatchRow) -> ingest_pb2.BatchIngestRow:
    return ingest_pb2.BatchIngestRow(
        id=row.book.id, title=row.book.title, author=row.book.author,
        # By name: the generated stubs type an enum field as the enum or its value's name, not a bare number.
        status=ingest_pb2.BatchStatus.Name(enum_number(ingest_pb2.BatchStatus.DESCRIPTOR, row.status)),
        chunks=row.chunks, error=row.error,
    )


def needs_metadata_result(source: BookToIngest, missing: list[str]) -> ingest_pb2.IngestResult:
    call = ", ".join([f'file_path="{source.path}"', *(f'{name}="..."' for name in missing)])
    extracted = source.extracted
    return ingest_pb2.IngestResult(
        success=False, needs_metadata=True, file_path=str(source.path), file_name=source.path.name,
        file_size_mb=source.size_mb, format=source.format, book_key=source.book_key,
        extracted=ingest_pb2.ExtractedMetadata(title=extracted.title if extracted else None,
                                               author=extracted.author if extracted else None,
                                               language=extracted.language if extracted else None),
        missing_fields=missing, progress=progress_bar(0.5),
        steps=[f"📖 Read '{source.path.name}' ({source.format}, {source.size_mb} MB)",
               f"⚠️ The file names no {' and no '.join(missing)}"],
        error=f"Missing required metadata: {', '.join(missing)}. Please provide: alexandria_ingest_file({call})",
    )


def create_server(
    settings: IngestSettings, *, store: Store | None = None, embedder: EmbedderClient | None = None,
    catalog: ServiceClient | None = None,
) -> ServiceServer:
    """The ingest server, SERVING once the embedder answers; it opens (and then owns) the store and the
    embedder and catalog clients it is not given."""
    server_store = store or open_store(settings.store)
    client = embedder or EmbedderClient(settings.embedder_addr, settings.clients)
    catalog_client = catalog or ServiceClient("catalog", settings.catalog_addr, catalog_pb2_grpc.CatalogServiceStub,
                                              settings.clients)
    indexer = IndexMaintainer(server_store)
    servicer = IngestServicer(settings, server_store, client, catalog_client, indexer)
    service = build_server(
        "ingest", settings.ingest_listen,
        lambda server: ingest_pb2_grpc.add_IngestServiceServicer_to_server(servicer, server),
        [ingest_pb2.DESCRIPTOR.services_by_name["IngestService"].full_name],
    )

    watching: list[asyncio.Task[None]] = []

    async def embedder_answers() -> None:
        info = await client.wait_until_ready()
        log.info("embedder ready: %s (%d dims) on %s", info.name, info.dimension, info.device)
        if settings.auto_sync:
            watching.append(asyncio.create_task(servicer.auto_sync.run(), name="auto-sync"))

    async def stop_watching() -> None:
        for task in watching:
            task.cancel()

    service.serve_when_ready(embedder_answers)
    service.on_stop.insert(0, stop_watching)
    service.on_stop.append(indexer.drain)
    if catalog is None:
        service.close_on_stop(catalog_client)
    if embedder is None:
        service.close_on_stop(client)
    if store is None:
        service.close_on_stop(server_store)
    return service
