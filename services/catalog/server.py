"""The catalog service: alexandria_search, alexandria_book, alexandria_ingest_preview, the Calibre half
of alexandria_stats, and ResolveBookFile for ingest.

The servicer only maps protos to the domain (library.py, preview.py) and back. Domain
calls run in a worker thread: they may reread metadata.db, look at the disk or ask the
store, all blocking. Health is SERVING while the library can be read: NOT_SERVING from
the start when CALIBRE_LIBRARY_PATH is not a Calibre library or metadata.db cannot be read
(every call then says what is wrong with it, and the log says it once), and back to SERVING
as soon as it can be read: the library is looked at every CATALOG_RECHECK_INTERVAL_S, calls
or none.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from grpc import aio

from alexandria.book_formats import FormatPreference
from alexandria.contract import BOOK_SEARCH_LIMIT, PREVIEW_LIMIT
from alexandria.errors import FailedPrecondition, Unavailable
from alexandria.grpc_server import Health, ServiceServer, build_server
from alexandria.settings import CatalogSettings
from alexandria.store import Store
from alexandria.v1 import catalog_pb2, catalog_pb2_grpc
from services.catalog.calibre_db import CalibreLibrary, LibraryRead
from services.catalog.library import (
    Book,
    BookQuery,
    Highlight,
    LibraryFile,
    LibrarySnapshot,
    ResolvedFile,
    library_files,
    resolve_file,
)
from services.catalog.preview import PreviewEntry, preview

log = logging.getLogger(__name__)

SERVICE_NAME = catalog_pb2.DESCRIPTOR.services_by_name["CatalogService"].full_name

T = TypeVar("T")


def _shared_fields(book: Book) -> dict[str, Any]:
    """The fields BookSummary and BookDetail have in common."""
    return {
        "id": book.id,
        "title": book.title,
        "author": book.author,
        "authors": book.authors,
        "language": book.language,
        "languages": book.languages,
        "tags": book.tags,
        "series": book.series,
        "series_index": book.series_index,
        "formats": book.formats,
    }


def summary_message(book: Book) -> catalog_pb2.BookSummary:
    return catalog_pb2.BookSummary(**_shared_fields(book))


def detail_message(book: Book, missing_formats: tuple[str, ...]) -> catalog_pb2.BookDetail:
    return catalog_pb2.BookDetail(
        **_shared_fields(book),
        isbn=book.isbn,
        publisher=book.publisher,
        pubdate=book.pubdate.isoformat() if book.pubdate else None,
        rating=book.rating,
        identifiers=dict(book.identifiers),
        uuid=book.uuid,
        author_sort=book.author_sort,
        missing_formats=missing_formats,
        highlights=len(book.highlights),
    )


def highlight_message(highlight: Highlight) -> catalog_pb2.Highlight:
    return catalog_pb2.Highlight(
        uuid=highlight.uuid, format=highlight.format, text=highlight.text, notes=highlight.notes,
        chapter_titles=highlight.chapter_titles, start_cfi=highlight.start_cfi, spine_index=highlight.spine_index,
        timestamp=highlight.timestamp,
    )


def preview_message(entry: PreviewEntry) -> catalog_pb2.PreviewBook:
    book = entry.book
    return catalog_pb2.PreviewBook(
        id=book.id,
        title=book.title,
        author=book.author,
        language=book.language,
        formats=book.formats,
        selected_format=entry.file.format if entry.file else "",
        file_path=str(entry.file.path) if entry.file else "",
        already_ingested=entry.already_ingested,
        scanned=entry.scanned,
    )


def book_query(request: catalog_pb2.SearchBooksRequest | catalog_pb2.PreviewIngestRequest) -> BookQuery:
    tags = tuple(request.tags) if isinstance(request, catalog_pb2.SearchBooksRequest) else ()
    return BookQuery(author=request.author, title=request.title, language=request.language, tags=tags)


Context = aio.ServicerContext[Any, Any]


class CatalogServicer(catalog_pb2_grpc.CatalogServiceServicer):
    def __init__(self, library: CalibreLibrary, store: Store | None, default_collection: str) -> None:
        self.library = library
        self.store = store
        self.default_collection = default_collection
        self.health: Health | None = None  # set by create_server once the server exists
        self._serving: bool | None = None  # unknown until the library is first read

    async def in_library(self, work: Callable[[LibrarySnapshot], T]) -> T:
        """Run `work` on the current snapshot in a thread; health follows whether the library is readable."""
        return await self.with_read(lambda read: work(read.snapshot))

    async def with_read(self, work: Callable[[LibraryRead], T], fresh: bool = False) -> T:
        """`in_library`, handing `work` the read itself (whether it is a previous one, and why); `fresh` as
        CalibreLibrary.read has it."""

        def run() -> tuple[T, LibrarySnapshot]:
            read = self.library.read(fresh)
            return work(read), read.snapshot

        try:
            result, snapshot = await asyncio.to_thread(run)
        except (FailedPrecondition, Unavailable) as exc:
            # Unavailable: Calibre held its lock on the first read, so there is nothing to serve yet.
            if isinstance(exc, FailedPrecondition) or self._serving is None:
                await self._set_serving(False, exc.message)
            raise
        await self._set_serving(True, f"the Calibre library at {snapshot.root} ({len(snapshot.books)} books)")
        return result

    async def _set_serving(self, serving: bool, why: str) -> None:
        """Flip health, logging why once per change."""
        if self.health is not None and serving != self._serving:
            self._serving = serving
            await self.health.set_serving(serving)
            if serving:
                log.info("serving %s", why)
            else:
                log.error("catalog is NOT_SERVING: %s", why)

    async def look_at_library(self) -> None:
        """Read the library if it changed, as a call would, so that health follows it."""
        with contextlib.suppress(FailedPrecondition, Unavailable):
            await self.in_library(lambda snapshot: snapshot)

    async def watch_library(self, interval_s: float) -> None:
        """Look at the library every `interval_s`, so that health follows it with no call coming: NOT_SERVING
        (saying why) once it cannot be read, SERVING again once it can."""
        while True:
            await asyncio.sleep(interval_s)
            await self.look_at_library()

    async def SearchBooks(
        self, request: catalog_pb2.SearchBooksRequest, context: Context
    ) -> catalog_pb2.SearchBooksResponse:
        query, limit = book_query(request), BOOK_SEARCH_LIMIT.clamp(request.limit)
        books = await self.in_library(lambda s: s.search(query, limit))
        return catalog_pb2.SearchBooksResponse(books=[summary_message(b) for b in books], count=len(books))

    async def GetBook(
        self, request: catalog_pb2.GetBookRequest, context: Context
    ) -> catalog_pb2.GetBookResponse:
        def find(snapshot: LibrarySnapshot) -> tuple[Book, tuple[str, ...]]:
            book = snapshot.get(request.book_id)
            return book, book.missing_formats()

        book, missing = await self.in_library(find)
        return catalog_pb2.GetBookResponse(book=detail_message(book, missing))

    async def GetLibraryStats(
        self, request: catalog_pb2.GetLibraryStatsRequest, context: Context
    ) -> catalog_pb2.GetLibraryStatsResponse:
        stats = await self.in_library(lambda s: s.stats)
        return catalog_pb2.GetLibraryStatsResponse(
            total_books=stats.total_books,
            total_authors=stats.total_authors,
            formats=dict(stats.formats),
            languages=dict(stats.languages),
        )

    async def GetLibraryState(
        self, request: catalog_pb2.GetLibraryStateRequest, context: Context
    ) -> catalog_pb2.LibraryState:
        signature = await asyncio.to_thread(self.library.signature)
        return catalog_pb2.LibraryState(signature=signature, root=str(self.library.root))

    async def PreviewIngest(
        self, request: catalog_pb2.PreviewIngestRequest, context: Context
    ) -> catalog_pb2.PreviewIngestResponse:
        query, limit = book_query(request), PREVIEW_LIMIT.clamp(request.limit)
        wanted = FormatPreference.from_proto(request.format_filter)
        collection = request.collection or self.default_collection
        entries = await self.in_library(lambda s: preview(s, query, wanted, limit, self.store, collection))
        return catalog_pb2.PreviewIngestResponse(
            books=[preview_message(e) for e in entries], count=len(entries), format_filter=wanted.value
        )

    async def ResolveBookFile(
        self, request: catalog_pb2.ResolveBookFileRequest, context: Context
    ) -> catalog_pb2.ResolveBookFileResponse:
        preference = FormatPreference.from_proto(request.format_preference)

        def resolve(snapshot: LibrarySnapshot) -> tuple[ResolvedFile, tuple[str, ...]]:
            resolved = resolve_file(snapshot.get(request.book_id), preference)
            return resolved, resolved.book.missing_formats()

        resolved, missing = await self.in_library(resolve)
        return catalog_pb2.ResolveBookFileResponse(
            book=detail_message(resolved.book, missing),
            format=resolved.format,
            file_path=str(resolved.path),
            file_size_bytes=resolved.size_bytes,
            highlights=[highlight_message(h) for h in resolved.book.highlights],
        )

    async def ListLibraryFiles(
        self, request: catalog_pb2.ListLibraryFilesRequest, context: Context
    ) -> catalog_pb2.ListLibraryFilesResponse:
        preference = FormatPreference.from_proto(request.format_preference)

        def list_files(read: LibraryRead) -> tuple[list[LibraryFile], str]:
            return library_files(read.snapshot, preference), read.stale_reason

        # What a sync or a reindex plans from: the library as it is on disk when they start.
        listed, stale_reason = await self.with_read(list_files, fresh=True)
        return catalog_pb2.ListLibraryFilesResponse(stale_reason=stale_reason, books=[
            catalog_pb2.LibraryFile(
                book_id=f.book.id, uuid=f.book.uuid, title=f.book.title, author=f.book.author,
                format=f.file.format if f.file else "", file_path=str(f.file.path) if f.file else "",
                size_bytes=f.size_bytes, mtime_ns=f.mtime_ns, authors=f.book.authors, language=f.book.language,
                highlights=[highlight_message(h) for h in f.book.highlights],
            )
            for f in listed
        ])


def create_server(settings: CatalogSettings, *, store: Store | None = None) -> ServiceServer:
    """The catalog server over CALIBRE_LIBRARY_PATH; `store` answers the previews' already-ingested flags."""
    if store is None:
        log.warning("catalog runs without a store: previews will mark no book as already ingested")
    interval_s = settings.catalog_recheck_interval_s
    servicer = CatalogServicer(
        CalibreLibrary(settings.calibre_library_path, interval_s), store, settings.store.qdrant_collection
    )
    server = build_server(
        "catalog",
        settings.catalog_listen,
        lambda s: catalog_pb2_grpc.add_CatalogServiceServicer_to_server(servicer, s),
        [SERVICE_NAME],
    )
    servicer.health = server.health
    watching: list[asyncio.Task[None]] = []

    async def watch() -> None:  # the first look is taken before the server counts as started
        await servicer.look_at_library()
        watching.append(asyncio.create_task(servicer.watch_library(interval_s), name="catalog-library-watch"))

    async def stop_watching() -> None:
        for task in watching:
            task.cancel()

    server.on_start.append(watch)
    server.on_stop.insert(0, stop_watching)
    return server

