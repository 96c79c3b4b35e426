"""Where a book to ingest comes from: a Calibre book (its file resolved by the catalog service) or a local
file under the allowed folders (read once for its metadata), as a `BookFile` the pipeline ingests.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from alexandria.clients import ServiceClient
from alexandria.errors import NotFound
from alexandria.store import Filter
from alexandria.store import schema as f
from alexandria.v1 import catalog_pb2
from services.ingest.batch import BatchBook
from services.ingest.extract import extract_book
from services.ingest.extract.ocr import NO_OPTIONS, OcrOptions
from services.ingest.local_files import LocalRoots
from services.ingest.pipeline import BookFile, content_hash, content_key, file_source, file_stamp


class BookSources:
    def __init__(self, catalog: ServiceClient, roots: LocalRoots) -> None:
        self.catalog = catalog
        self.roots = roots

    async def calibre(self, book_id: int, preferred_format: str) -> BookFile:
        """A Calibre book and the file of it to read (the preferred format when it has several)."""
        resolved = await self.catalog.call(
            "ResolveBookFile", catalog_pb2.ResolveBookFileRequest(book_id=book_id, format_preference=preferred_format))
        book, path = resolved.book, Path(resolved.file_path)
        source = await asyncio.to_thread(file_source, resolved.format, path)
        return BookFile(path, resolved.format, book.uuid, book.title, tuple(book.authors), book.language or None,
                        book.id, source=source)

    async def resolve_for_batch(self, book: BatchBook, preferred_format: str) -> tuple[BatchBook, BookFile]:
        """A book of a batch or sync, named as the library names it, and its file."""
        source = await self.calibre(book.id, preferred_format)
        return BatchBook(book.id, source.title or book.title, " & ".join(source.authors)), source

    async def local(self, file_path: str, title: str = "", author: str = "", language: str = "",
                    ocr: OcrOptions = NO_OPTIONS) -> BookFile:
        """A local file, keyed by its content, read once (its scanned pages by OCR, as `ocr` says); what is
        given overrides what the file says of itself."""
        path, fmt = self.roots.file(file_path)
        digest = await asyncio.to_thread(content_hash, path)
        extracted = await asyncio.to_thread(extract_book, path, fmt, ocr)
        authors = tuple(a.strip() for a in author.split("&") if a.strip()) if author.strip() else extracted.authors
        return BookFile(path, fmt, f"sha256:{digest}", title.strip() or extracted.title, authors,
                        language.strip() or extracted.language, None, extracted, f"{file_stamp(fmt, path)}:{digest}")

    async def local_filter(self, file_path: str) -> Filter:
        """A local book's points: by its content when the file is still there, else by the path it was
        ingested from."""
        try:
            path, _ = self.roots.file(file_path)
        except NotFound:
            return Filter(must={f.FILE_PATH: file_path})
        return Filter(must={f.BOOK_KEY: await asyncio.to_thread(content_key, path)})
