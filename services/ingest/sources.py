"""Where a book to ingest comes from: a Calibre book (its file resolved by the catalog service, or listed by
it for a sync) or a local file under the allowed folders (read once for its metadata), as a `BookToIngest`
the pipeline ingests.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from alexandria.book_formats import FormatPreference
from alexandria.book_identity import FileVersion, file_sha256, local_book_key
from alexandria.clients import ServiceClient
from alexandria.errors import NotFound
from alexandria.store import Filter
from alexandria.store import schema as f
from alexandria.v1 import catalog_pb2
from services.ingest.batch import BatchBook
from services.ingest.extract import extract_book
from services.ingest.extract.ocr import NO_OPTIONS, OcrOptions
from services.ingest.local_files import LocalRoots
from services.ingest.pipeline import BookToIngest


async def read_version(path: Path, fmt: str) -> FileVersion:
    """The version of a Calibre book's file as it is read now, or NotFound when it has gone since the catalog
    named it."""
    try:
        return await asyncio.to_thread(FileVersion.read, path, fmt)
    except FileNotFoundError:
        raise NotFound(f"{path} is no longer on disk; Calibre may have moved or removed it.") from None


async def listed_book(entry: catalog_pb2.LibraryFile) -> BookToIngest:
    """A book as the catalog listed it for a sync, with the version of its file read now: the catalog is not
    asked again, and the version recorded is the one read even when the file changed since it was listed."""
    path = Path(entry.file_path)
    return BookToIngest(path, await read_version(path, entry.format), entry.uuid, entry.title,
                        tuple(entry.authors), entry.language or None, entry.book_id, highlights=tuple(entry.highlights))


class BookSources:
    def __init__(self, catalog: ServiceClient, roots: LocalRoots) -> None:
        self.catalog = catalog
        self.roots = roots

    async def calibre(self, book_id: int, preference: FormatPreference) -> BookToIngest:
        """A Calibre book and the file of it to read (the preferred format when it has several)."""
        request = catalog_pb2.ResolveBookFileRequest(book_id=book_id, format_preference=preference.to_proto())
        resolved = await self.catalog.call("ResolveBookFile", request)
        book, path = resolved.book, Path(resolved.file_path)
        version = await read_version(path, resolved.format)
        return BookToIngest(path, version, book.uuid, book.title, tuple(book.authors), book.language or None, book.id,
                            highlights=tuple(resolved.highlights))

    async def resolve_for_batch(self, book: BatchBook, preference: FormatPreference) -> tuple[BatchBook, BookToIngest]:
        """A book of a batch, named as the library names it, and its file."""
        source = await self.calibre(book.id, preference)
        return BatchBook(book.id, source.title or book.title, " & ".join(source.authors)), source

    async def local(self, file_path: str, title: str = "", author: str = "", language: str = "",
                    ocr: OcrOptions = NO_OPTIONS) -> BookToIngest:
        """A local file, keyed by its content, read once (its scanned pages by OCR, as `ocr` says); what is
        given overrides what the file says of itself."""
        path, fmt = self.roots.file(file_path)
        version = await asyncio.to_thread(FileVersion.read, path, fmt)
        extracted = await asyncio.to_thread(extract_book, path, fmt, ocr)
        authors = tuple(a.strip() for a in author.split("&") if a.strip()) if author.strip() else extracted.authors
        return BookToIngest(path, version, local_book_key(version.sha256), title.strip() or extracted.title,
                            authors, language.strip() or extracted.language, None, extracted)

    async def local_filter(self, file_path: str) -> Filter:
        """A local book's points: by its content when the file is still there, else by the path it was
        ingested from."""
        try:
            path, _ = self.roots.file(file_path)
        except NotFound:
            return Filter(must={f.FILE_PATH: file_path})
        return Filter(must={f.BOOK_KEY: local_book_key(await asyncio.to_thread(file_sha256, path))})
