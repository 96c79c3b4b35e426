"""Sync: bring a collection in step with the Calibre library.

The plan compares the library (every book with the file ingest would read) with the books the
collection holds whole: books only in Calibre are added, Calibre books only in the collection were
deleted from Calibre and are removed (local files, keyed by their content, are never touched), and a
book whose file changed (format, size or modification time, then its content hash to be sure) is
ingested anew, the new version replacing the old one without a moment where a search finds it twice
or not at all (see BookWriter.write). A
book that failed before is skipped while its file is the same one (format, size, modification time),
so a bad file is not retried on every sync; the failures are kept per collection in a small JSON file
beside the store. Each book is ingested whole or not at all, so a sync killed at any point and run
again simply finishes the work. One sync per collection at a time: a lock file says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from alexandria.clients import ServiceClient
from alexandria.errors import FailedPrecondition
from alexandria.store import Filter
from alexandria.store import schema as f
from alexandria.v1 import catalog_pb2
from services.ingest.batch import BatchBook, BatchRow, BatchStatus, ingest_batch
from services.ingest.documents import ChunkingParams
from services.ingest.pipeline import BookFile, BookIngestor, split_source, stamp
from services.ingest.progress import Report
from services.ingest.sources import BookSources
from services.ingest.writer import BookWriter, RemovedBook

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
        return stamp(self.format, self.size_bytes, self.mtime_ns)


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
    change: list[LibraryBook] = field(default_factory=list)
    remove: list[str] = field(default_factory=list)  # book keys
    skip: list[Skipped] = field(default_factory=list)
    unchanged: int = 0


def plan_sync(library: list[LibraryBook], held: dict[str, str], failures: dict[str, Failure],
              remove_deleted: bool, retry_failed: bool) -> SyncPlan:
    """What a sync does: `held` maps the keys of the books the collection holds whole to the source they
    were read from ("" for books ingested before sources were recorded: taken as unchanged)."""
    plan = SyncPlan()
    in_library = set()
    for book in library:
        in_library.add(book.key)
        failure = failures.get(book.key)
        if book.key in held:
            stored = held[book.key]
            changed = bool(stored) and bool(book.format) and split_source(stored)[0] != book.fingerprint
            if changed:
                plan.change.append(book)
            else:
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


@dataclass(frozen=True)
class SyncRequest:
    collection: str
    params: ChunkingParams
    hierarchical: bool
    format_preference: str
    dry_run: bool = False
    remove_deleted: bool = True
    retry_failed: bool = False


@dataclass
class SyncOutcome:
    plan: SyncPlan
    removing: dict[str, str]  # book key -> title, of the books to remove
    dry_run: bool
    rows: list[BatchRow] = field(default_factory=list)  # each book added or changed
    replaced: int = 0  # changed books ingested anew
    restamped: int = 0  # changed stamps over the same content: noted, not ingested again
    removed: list[RemovedBook] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> list[BatchRow]:
        return [row for row in self.rows if row.status == BatchStatus.FAILED]

    @property
    def added(self) -> int:
        return sum(1 for row in self.rows if row.status != BatchStatus.FAILED) - self.replaced - self.restamped


class LibrarySync:
    """Runs a sync: plans it, then adds, replaces and removes books, one at a time."""

    def __init__(self, catalog: ServiceClient, sources: BookSources, ingestor: BookIngestor, state_dir: Path) -> None:
        self.catalog = catalog
        self.sources = sources
        self.ingestor = ingestor
        self.state_dir = state_dir

    async def run(self, request: SyncRequest, report: Report) -> SyncOutcome:
        started = time.perf_counter()
        state = SyncState(self.state_dir, request.collection)
        with state.locked():
            listed = await self.catalog.call(
                "ListLibraryFiles", catalog_pb2.ListLibraryFilesRequest(format_preference=request.format_preference))
            library = [LibraryBook(b.book_id, b.uuid, b.title, b.author, b.format, b.size_bytes, b.mtime_ns)
                       for b in listed.books]
            writer = BookWriter(self.ingestor.store, request.collection)
            if await asyncio.to_thread(self.ingestor.store.collection_info, request.collection) is not None:
                # Refuses a collection of another model before any work, and gives a collection made before
                # sources were recorded the payload indexes that planning reads.
                model = await self.ingestor.embedder.model_info()
                await asyncio.to_thread(writer.ensure_collection, model.dimension, model.name)
            held = await asyncio.to_thread(writer.held_sources)
            failures = state.failures()
            plan = plan_sync(library, held, failures, request.remove_deleted, request.retry_failed)
            report("plan", 1, 1, f"{len(plan.add)} to add, {len(plan.change)} changed, {len(plan.remove)} to "
                                 f"remove, {len(plan.skip)} skipped, {plan.unchanged} unchanged")
            removing = {}
            for key in plan.remove:
                _, title, _ = await asyncio.to_thread(writer.find_book_key, Filter(must={f.BOOK_KEY: key}), key)
                removing[key] = title
            outcome = SyncOutcome(plan, removing, request.dry_run)
            if request.dry_run:
                return outcome
            await self._add_and_replace(request, plan, held, failures, state, writer, outcome, report)
            for n, key in enumerate(plan.remove):
                outcome.removed.append(await asyncio.to_thread(writer.remove, key, removing[key], ""))
                report("remove", n + 1, len(plan.remove), f"removed {removing[key]}")
        outcome.seconds = round(time.perf_counter() - started, 2)
        return outcome

    async def _add_and_replace(self, request: SyncRequest, plan: SyncPlan, held: dict[str, str],
                               failures: dict[str, Failure], state: SyncState, writer: BookWriter,
                               outcome: SyncOutcome, report: Report) -> None:
        books = {book.book_id: book for book in [*plan.add, *plan.change]}
        changed = {book.book_id for book in plan.change}

        async def resolve(book: BatchBook) -> tuple[BatchBook, BookFile]:
            return await self.sources.resolve_for_batch(book, request.format_preference)

        async def ingest(source: BookFile, book_report: Report) -> int:
            if source.calibre_id in changed:
                if split_source(source.source)[1] == split_source(held[source.book_key])[1]:
                    # Only the stamp changed (the file was touched or copied): the content is the same.
                    await asyncio.to_thread(writer.restamp, source.book_key, source.source)
                    outcome.restamped += 1
                    return 0
                outcome.replaced += 1
            ingested = await self.ingestor.ingest(source, request.collection, request.params, request.hierarchical,
                                                  book_report, replace=source.calibre_id in changed)
            return ingested.chunks

        def remember(row: BatchRow) -> None:
            book = books[row.book.id]
            if row.status == BatchStatus.FAILED:
                failures[book.key] = Failure(book.book_id, row.book.title, row.error or "", book.fingerprint)
            else:
                failures.pop(book.key, None)
            state.save_failures(failures)

        batch = [BatchBook(b.book_id, b.title, b.author) for b in books.values()]
        outcome.rows = await ingest_batch(batch, resolve, ingest, report, remember, stage="sync")
