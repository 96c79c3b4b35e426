"""Sync: bring a collection in step with the Calibre library.

The plan compares the library (every book with the file ingest would read) with the books the
collection holds whole: books only in Calibre are added, Calibre books only in the collection were
deleted from Calibre and are removed (local files, keyed by their content, are never touched). A
book that failed before is skipped while its file is the same one (format, size, modification time),
so a bad file is not retried on every sync; the failures are kept per collection in a small JSON file
beside the store. Each book is ingested whole or not at all, so a sync killed at any point and run
again simply finishes the work. One sync per collection at a time: a lock file says so.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from alexandria.errors import FailedPrecondition

LOCAL_KEY_PREFIX = "sha256:"  # local files are keyed by content; every other key is a Calibre uuid
NO_FILE = "none of its files is on disk"


@dataclass(frozen=True)
class LibraryBook:
    """A Calibre book and the version of the file ingest would read ("" format: no file on disk)."""

    book_id: int
    key: str
    title: str
    author: str = ""
    format: str = ""
    size_bytes: int = 0
    mtime_ns: int = 0

    @property
    def fingerprint(self) -> str:
        return f"{self.format}:{self.size_bytes}:{self.mtime_ns}"


@dataclass(frozen=True)
class Failure:
    book_id: int
    title: str
    reason: str
    fingerprint: str  # the file that failed; a different one is tried again


@dataclass(frozen=True)
class Skipped:
    book: LibraryBook
    reason: str


@dataclass
class SyncPlan:
    add: list[LibraryBook] = field(default_factory=list)
    remove: list[str] = field(default_factory=list)  # book keys
    skip: list[Skipped] = field(default_factory=list)
    unchanged: int = 0


def plan_sync(library: list[LibraryBook], held: set[str], failures: dict[str, Failure],
              remove_deleted: bool, retry_failed: bool) -> SyncPlan:
    """What a sync does: `held` are the book keys the collection holds whole."""
    plan = SyncPlan()
    in_library = set()
    for book in library:
        in_library.add(book.key)
        failure = failures.get(book.key)
        if book.key in held:
            plan.unchanged += 1
        elif not book.format:
            plan.skip.append(Skipped(book, NO_FILE))
        elif failure is not None and failure.fingerprint == book.fingerprint and not retry_failed:
            plan.skip.append(Skipped(book, failure.reason))
        else:
            plan.add.append(book)
    if remove_deleted:
        plan.remove = sorted(key for key in held if key not in in_library and not key.startswith(LOCAL_KEY_PREFIX))
    return plan


class SyncState:
    """One collection's sync state on disk: the lock that allows one sync at a time, and the failures."""

    def __init__(self, directory: Path, collection: str) -> None:
        self.directory = directory
        self.lock_path = directory / f"{collection}.lock"
        self.failures_path = directory / f"{collection}.failures.json"
        self.collection = collection

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the collection's sync lock, or refuse at once when another sync holds it."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with self.lock_path.open("a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise FailedPrecondition(
                    f"A sync of collection '{self.collection}' is already running; wait for it to finish "
                    "(its progress is on the client that started it), then sync again if needed."
                ) from None
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def failures(self) -> dict[str, Failure]:
        if not self.failures_path.is_file():
            return {}
        try:
            recorded = json.loads(self.failures_path.read_text())
            return {key: Failure(**value) for key, value in recorded.items()}
        except (ValueError, TypeError):  # unreadable: every failed book is simply tried again
            return {}

    def save_failures(self, failures: dict[str, Failure]) -> None:
        """Written whole to a temporary file, then renamed over the old one: never half-written."""
        self.directory.mkdir(parents=True, exist_ok=True)
        temporary = self.failures_path.with_suffix(".tmp")
        temporary.write_text(json.dumps({key: asdict(f) for key, f in sorted(failures.items())}, indent=1))
        os.replace(temporary, self.failures_path)
