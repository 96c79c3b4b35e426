"""What OCR read of a scanned book's pages, kept so that each page is read by OCR once.

A scanned page takes a second or two of a core; every call that extracts a book reads its pages again:
alexandria_test_chunking and alexandria_compare_chunking before an ingest, the ingest itself, a re-ingest with
other parameters, a reindex under another model. So each page read is kept as soon as it is read (an ingest
stopped midway keeps the pages it had read), in `<ALEXANDRIA_DATA_DIR>/ocr/<book>/<page>.json`, where `<book>`
names the file's content (its sha256) and all that decides what OCR reads from it: the language data, the
resolution, PyMuPDF's version (which carries Tesseract) and the format of what is kept. A changed file, or a
book read in another language, is another folder. A file replaced or rewritten after it was hashed keeps no more
pages there: what OCR reads of it from then on is not what that hash names. The folder is held to
IngestSettings.ingest_ocr_cache_mb: past it, the books read longest ago are dropped whole. A page file that cannot be read is read
by OCR again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pymupdf

from alexandria.book_identity import file_sha256
from alexandria.store.common import disk_usage, write_json_atomically

log = logging.getLogger(__name__)

# Raised whenever what a page file holds changes meaning: older files are then another book's folder, unread.
CACHE_FORMAT = 1

T = TypeVar("T")


class OcrCache:
    """The pages OCR read, by book, in `folder`, held to `max_bytes` (one per process: it counts what it holds)."""

    def __init__(self, folder: Path, max_bytes: int) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._sizes: dict[Path, int] | None = None  # each book's bytes: measured at first use, then counted

    def book(self, path: Path, language: str, tessdata: Path, dpi: int) -> CachedBook | None:
        """The pages kept for this file read with `language`'s data in `tessdata` at `dpi`; None when nothing can be
        kept (the data dir unwritable, say: the pages are then read by OCR, as without a cache)."""
        try:
            hashed = _file_state(path)
            identity = "|".join((file_sha256(path), language, _data_identity(tessdata, language), str(dpi),
                                 pymupdf.VersionBind, str(CACHE_FORMAT)))
            folder = self.folder / hashlib.sha256(identity.encode()).hexdigest()[:32]
            folder.mkdir(parents=True, exist_ok=True)
            now = time.time_ns()  # to the nanosecond: a file system's own clock for it can tick in milliseconds
            os.utime(folder, ns=(now, now))  # read now: the last of the books to drop
            with self._lock:
                self._measured().setdefault(folder, disk_usage(folder))
        except OSError as exc:
            log.warning("OCR text cannot be kept in %s (%s); %s's scanned pages are read by OCR", self.folder, exc,
                        path.name)
            return None
        return CachedBook(folder, self, path, hashed)

    def added(self, book: Path, size: int) -> None:
        """`size` more bytes kept for `book`: past `max_bytes`, the books read longest ago are dropped (not `book`)."""
        with self._lock:
            sizes = self._measured()
            sizes[book] = sizes.get(book, 0) + size
            total = sum(sizes.values())
            if total <= self.max_bytes:
                return
            for oldest in sorted((other for other in sizes if other != book), key=_read_at):
                shutil.rmtree(oldest, ignore_errors=True)
                total -= sizes.pop(oldest)
                log.info("dropped the OCR text kept in %s: the cache is held to %d MB",
                         oldest.name, self.max_bytes // 2**20)
                if total <= self.max_bytes:
                    break

    def _measured(self) -> dict[Path, int]:
        if self._sizes is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._sizes = {book: disk_usage(book) for book in self.folder.iterdir() if book.is_dir()}
        return self._sizes


def _data_identity(tessdata: Path, language: str) -> str:
    """Which language data OCR reads with: another folder (TESSDATA_PREFIX) or an updated package is another book."""
    data = tessdata / f"{language}.traineddata"
    status = data.stat()
    return f"{data.resolve()}:{status.st_size}:{status.st_mtime_ns}"


def _file_state(path: Path) -> tuple[int, int, int, int] | None:
    """Which file `path` names and how it was last written (None: gone): any change to its bytes, in place or by a
    file moved over it, changes this."""
    try:
        status = path.stat()
    except FileNotFoundError:
        return None
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


def _read_at(book: Path) -> float:
    """When `book`'s pages were last asked for (0 for a book gone meanwhile: dropped first)."""
    try:
        return book.stat().st_mtime
    except FileNotFoundError:
        return 0.0


class CachedBook:
    """One book's pages as OCR read them, by 0-based page number: what `keep` was given, as JSON gives it back."""

    def __init__(self, folder: Path, cache: OcrCache, source: Path, hashed: tuple[int, int, int, int] | None) -> None:
        self.folder = folder
        self._cache = cache
        self._source = source
        self._hashed = hashed  # the source's state when its hash named `folder`
        self._source_changed = False

    def pages(self, numbers: list[int], parse: Callable[[Any], T]) -> dict[int, T]:
        """The kept pages among `numbers`, each made what it was by `parse` (which raises on what it cannot take)."""
        found = {}
        for number in numbers:
            try:
                found[number] = parse(json.loads((self.folder / f"{number}.json").read_text(encoding="utf-8")))
            except FileNotFoundError:
                continue
            except (OSError, ValueError, TypeError) as exc:  # damaged: read by OCR again, and kept anew
                log.warning("OCR text kept for page %d in %s is unreadable (%s); reading the page again",
                            number + 1, self.folder, exc)
        return found

    def keep(self, number: int, page: Any) -> None:
        """Keep what OCR read of one page (JSON-able). A page that cannot be kept (a full disk) is only read again
        next time: the read itself goes on. Nothing more is kept once the source file has changed since it was
        hashed (the page may be the new file's)."""
        if not self._source_changed and _file_state(self._source) != self._hashed:
            log.warning("%s changed while its scanned pages were read by OCR; what is read of it from now on is not "
                        "kept", self._source.name)
            self._source_changed = True
        if self._source_changed:
            return
        path = self.folder / f"{number}.json"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)  # dropped meanwhile to make room for another book
            before = disk_usage(path)
            write_json_atomically(path, page)
            size = disk_usage(path) - before
        except OSError as exc:
            log.warning("OCR text of page %d not kept in %s (%s)", number + 1, self.folder, exc)
            return
        self._cache.added(self.folder, size)
