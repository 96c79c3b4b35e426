"""A book's identity in one place: the key it is stored under, and which version of its file was read.

A Calibre book is keyed by its uuid; a local file by the sha256 of its bytes (`local_book_key`), so renaming
or moving it changes nothing. A file's `FileStamp` (format, size, modification time) says cheaply whether it
changed; its `FileVersion` adds the content hash, to be sure when the stamp changed (a touched or copied
file keeps its content). Each is formatted and parsed only here, the stored form included.

It lives in the kernel because the store's records (`alexandria.store.records`) read and write it, and the
kernel imports no service.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

LOCAL_KEY_PREFIX = "sha256:"  # every other book key is a Calibre uuid
STORED_SEPARATOR = "|"  # between the book key and its file version in the stored form


def local_book_key(sha256: str) -> str:
    """A local file's book key, from the sha256 of its bytes."""
    return f"{LOCAL_KEY_PREFIX}{sha256}"


def is_local_book_key(book_key: str) -> bool:
    """Whether `book_key` is a local file's (a sync never removes those: Calibre does not know them)."""
    return book_key.startswith(LOCAL_KEY_PREFIX)


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class FileStamp:
    """What says cheaply whether a book's file changed: its format, size and modification time.

    The format is a name, not always a `BookFormat`: a sync stamps the file the catalog listed, under Calibre's
    name for its format, and keeps that stamp for a book that failed, one in a format ingest cannot read
    ("MOBI") included, so that it is not tried again while the file stays the same."""

    format: str  # the format's name, as Calibre or the file's extension gives it (see below)
    size: int
    mtime_ns: int

    def __str__(self) -> str:
        return f"{self.format}:{self.size}:{self.mtime_ns}"

    @classmethod
    def parse(cls, text: str) -> FileStamp:
        """The stamp `str(stamp)` wrote; ValueError for anything else."""
        fmt, size, mtime_ns = text.split(":")
        return cls(fmt, int(size), int(mtime_ns))


@dataclass(frozen=True)
class FileVersion:
    """One version of a book's file: its stamp and the sha256 of its content."""

    stamp: FileStamp
    sha256: str

    @classmethod
    def read(cls, path: Path, fmt: str) -> FileVersion:
        """The version of the file at `path` now. Stamped before it is hashed, so a change made while it is
        read leaves a stamp older than the file, and the next sync looks at it again."""
        status = path.stat()
        return cls(FileStamp(fmt, status.st_size, status.st_mtime_ns), file_sha256(path))

    def __str__(self) -> str:
        return f"{self.stamp}:{self.sha256}"

    @classmethod
    def parse(cls, text: str) -> FileVersion:
        """The version `str(version)` wrote; ValueError for anything else."""
        stamp, _, sha256 = text.rpartition(":")
        return cls(FileStamp.parse(stamp), sha256)

    def to_stored(self, book_key: str) -> str:
        """The stored form: the book key and the version in one keyword, so one facet lists every book's."""
        return f"{book_key}{STORED_SEPARATOR}{self}"

    @classmethod
    def parse_stored(cls, value: str) -> tuple[str, FileVersion]:
        """(book key, version) of a value `to_stored` wrote."""
        book_key, _, version = value.partition(STORED_SEPARATOR)
        return book_key, cls.parse(version)
