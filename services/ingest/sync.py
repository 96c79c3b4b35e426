"""Sync: bring a collection in step with the Calibre library.

The plan compares the library (the catalog's list of every book with the file ingest would read, which
the sync then reads without asking the catalog again) with the books the collection holds whole: books
only in Calibre are added, Calibre books only in the collection were deleted from Calibre and are removed
(local files, keyed by their content, are never touched) before any book is added, and a book whose file changed
(its `FileStamp`, then its content hash to be sure) is ingested anew, the new version replacing the old one without a
moment where a search finds it twice or not at all (see BookWriter.write). A book whose file is the same but
whose Calibre record says otherwise than its points (a title or an author changed, and with them the path Calibre
moved the file to) has what Calibre says set on its points in place, nothing embedded again. A book that failed before is
skipped while its file has the same stamp, so a bad file is not retried on every sync; the failures are kept per collection in a small JSON file
beside the store. Each book is ingested whole or not at all, so a sync killed at any point and run
again simply finishes the work. A book ingested brings the reader's highlights with it; then those of every
book the collection holds are brought in step with Calibre's (highlights.py). One sync per collection at a time: a lock file says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from alexandria.book_formats import FormatPreference
from alexandria.book_identity import FileStamp, FileVersion, is_local_book_key
from alexandria.clients import ServiceClient
from alexandria.errors import FailedPrecondition, Unavailable
from alexandria.languages import language_code
from alexandria.model_languages import coverage_note
from alexandria.store import Filter, finish_before_cancel
from alexandria.store import schema as f
from alexandria.store.records import BookRecord
from alexandria.v1 import catalog_pb2
from alexandria.v1.catalog_pb2 import LibraryFile
from services.ingest.batch import BatchBook, BatchRow, BatchStatus, ingest_batch
from services.ingest.documents import ChunkingParams
from services.ingest.highlights import HighlightPlan, HighlightSync
from services.ingest.pipeline import BookIngestor, BookToIngest
from services.ingest.progress import Report
from services.ingest.sources import listed_book
from services.ingest.writer import BookWriter, CalibreMetadata, HeldBooks, RemovedBook

NO_FILE = "none of its files is on disk"


def listed_stamp(entry: LibraryFile) -> FileStamp:
    """The stamp of the file the catalog listed for a book (its format is "" when no file is on disk)."""
    return FileStamp(entry.format, entry.size_bytes, entry.mtime_ns)


def listed_metadata(entry: LibraryFile) -> CalibreMetadata:
    """What the catalog's listing says of a book that its points carry, as an ingest of it would write it."""
    return CalibreMetadata(entry.title or Path(entry.file_path).stem, tuple(entry.authors),
                           language_code(entry.language) if entry.language else "", entry.file_path)


@dataclass(frozen=True)
class Failure:
    book_id: int
    title: str
    reason: str
    stamp: FileStamp  # the file that failed; a different one is tried again

    def to_json(self) -> dict[str, str | int]:
        """The failure as the failures file keeps it, its stamp in its one text form."""
        return {"book_id": self.book_id, "title": self.title, "reason": self.reason, "stamp": str(self.stamp)}

    @classmethod
    def from_json(cls, value: dict[str, str | int]) -> Failure:
        """The failure `to_json` wrote; KeyError or ValueError for anything else."""
        return cls(int(value["book_id"]), str(value["title"]), str(value["reason"]),
                   FileStamp.parse(str(value["stamp"])))


@dataclass(frozen=True)
class Skipped:
    book: LibraryFile
    reason: str


@dataclass
class SyncPlan:
    add: list[LibraryFile] = field(default_factory=list)
    change: list[LibraryFile] = field(default_factory=list)
    update: list[LibraryFile] = field(default_factory=list)  # the same file; Calibre's record of it changed
    remove: list[str] = field(default_factory=list)  # book keys
    failed_before: list[Skipped] = field(default_factory=list)  # skipped: failed before with this same file
    no_file: list[LibraryFile] = field(default_factory=list)  # nothing to ingest: none of its files is on disk
    unchanged: int = 0
    stale_reason: str = ""  # why the library listed is the catalog's previous read ("": a fresh one)
    language_note: str = ""  # many books in languages the model was not trained on (model_languages.py)

    def counts(self) -> str:
        """The plan in one line, as the plan's progress and a dry run's summary say it."""
        return (f"{len(self.add)} to add, {len(self.change)} changed, {len(self.update)} to update, "
                f"{len(self.remove)} to remove, "
                f"{len(self.failed_before)} skipped, {self.unchanged} unchanged, {len(self.no_file)} with no file "
                f"on disk{self.staleness()}")

    def staleness(self) -> str:
        """Says, when it was, that the plan was made from the catalog's previous read of the library."""
        return f" (planned from the catalog's previous read: {self.stale_reason})" if self.stale_reason else ""


def plan_sync(library: catalog_pb2.ListLibraryFilesResponse, held: dict[str, FileVersion | None],
              failures: dict[str, Failure], remove_deleted: bool, retry_failed: bool, model_name: str = "",
              records: dict[str, BookRecord] | None = None) -> SyncPlan:
    """What a sync does: `held` maps the keys of the books the collection holds whole to the version of the
    file each was read from (None for books ingested before versions were recorded: taken as unchanged), and
    `records` to what their points say of them (a book whose file is unchanged but whose Calibre record says
    otherwise is to be updated). The plan notes when many of the library's books are in languages `model_name`
    was not trained on."""
    # The library's books with a file are what the collection holds once the sync is done.
    languages = Counter(book.language for book in library.books if book.format)
    plan = SyncPlan(stale_reason=library.stale_reason, language_note=coverage_note(model_name, languages))
    in_library = set()
    for book in library.books:
        in_library.add(book.uuid)
        failure = failures.get(book.uuid)
        if book.uuid in held:
            stored = held[book.uuid]
            record = (records or {}).get(book.uuid)
            if stored is not None and book.format and stored.stamp != listed_stamp(book):
                plan.change.append(book)
            elif record is not None and book.format and listed_metadata(book).differs_from(record):
                plan.update.append(book)
            else:
                plan.unchanged += 1
        elif not book.format:
            plan.no_file.append(book)
        elif failure is not None and failure.stamp == listed_stamp(book) and not retry_failed:
            plan.failed_before.append(Skipped(book, failure.reason))
        else:
            plan.add.append(book)
    if remove_deleted:
        plan.remove = sorted(key for key in held if key not in in_library and not is_local_book_key(key))
    return plan


class SyncState:
    """One collection's sync state on disk: the lock that allows one sync at a time, and the failures."""

    def __init__(self, directory: Path, collection: str) -> None:
        self.directory = directory
        self.lock_path = directory / f"{collection}.lock"
        self.failures_path = directory / f"{collection}.failures.json"
        self.collection = collection

    @contextlib.contextmanager
    def locked(self, holder: str = "sync") -> Iterator[None]:
        """Hold the collection's lock for a `holder` (a sync, or a reindex, which must not run beside one),
        or refuse at once when another holds it, naming what holds it."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with self.lock_path.open("a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.seek(0)
                raise FailedPrecondition(
                    f"A {lock.read().strip() or 'sync'} of collection '{self.collection}' is already running; wait "
                    "for it to finish (its progress is on the client that started it), then try again if needed."
                ) from None
            lock.truncate(0)
            lock.write(holder)
            lock.flush()
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def failures(self) -> dict[str, Failure]:
        if not self.failures_path.is_file():
            return {}
        try:
            recorded = json.loads(self.failures_path.read_text())
            return {key: Failure.from_json(value) for key, value in recorded.items()}
        except (ValueError, TypeError, KeyError):  # unreadable: every failed book is simply tried again
            return {}

    def save_failures(self, failures: dict[str, Failure]) -> None:
        """Written whole to a temporary file, then renamed over the old one: never half-written."""
        self.directory.mkdir(parents=True, exist_ok=True)
        temporary = self.failures_path.with_suffix(".tmp")
        temporary.write_text(json.dumps({key: f.to_json() for key, f in sorted(failures.items())}, indent=1))
        os.replace(temporary, self.failures_path)


@dataclass(frozen=True)
class SyncRequest:
    collection: str
    params: ChunkingParams
    hierarchical: bool
    format_preference: FormatPreference
    dry_run: bool = False
    remove_deleted: bool = True
    retry_failed: bool = False


@dataclass
class SyncOutcome:
    plan: SyncPlan
    removing: dict[str, str]  # book key -> title, of the books to remove
    dry_run: bool
    rows: list[BatchRow] = field(default_factory=list)  # each book added or changed
    restamped: set[str] = field(default_factory=set)  # changed stamps over the same content: noted, not ingested again
    updated: set[str] = field(default_factory=set)  # books whose points took what Calibre now says of them, in place
    removed: list[RemovedBook] = field(default_factory=list)
    highlights_added: int = 0
    highlights_removed: int = 0
    seconds: float = 0.0

    def _rows(self, status: BatchStatus) -> list[BatchRow]:
        return [row for row in self.rows if row.status == status]

    @property
    def failed(self) -> list[BatchRow]:
        return self._rows(BatchStatus.FAILED)

    @property
    def skipped(self) -> list[BatchRow]:
        """Books already in the collection when their turn came: another ingest wrote them meanwhile."""
        return self._rows(BatchStatus.SKIPPED)

    @property
    def added(self) -> int:
        changed = {book.book_id for book in self.plan.change}
        return sum(1 for row in self._rows(BatchStatus.SUCCESS) if row.book.id not in changed)

    @property
    def replaced(self) -> int:
        """Changed books ingested anew (a restamped one succeeded without being ingested again)."""
        changed = {book.book_id for book in self.plan.change}
        return sum(1 for row in self._rows(BatchStatus.SUCCESS) if row.book.id in changed) - len(self.restamped)

    @property
    def changed_anything(self) -> bool:
        """Whether the sync added, replaced, updated or removed a book or a highlight, or a book failed."""
        done = [self.added, self.replaced, len(self.failed), len(self.updated), len(self.removed),
                self.highlights_added, self.highlights_removed]
        return not self.dry_run and any(done)

    @property
    def unchanged(self) -> int:
        """Books left as they were: planned so, or only restamped."""
        return self.plan.unchanged + len(self.restamped - self.updated)


@dataclass
class SyncCounts:
    """How far a running sync has filled the collection, in books: `indexed` of the `total` the library holds with a
    file are in the collection (the books to add count once written; one that fails leaves the total), and the time
    the books to ingest took so far, for an estimate of the rest."""

    indexed: int = 0
    total: int = 0
    ingested: int = 0  # books to add or replace done so far
    to_ingest: int = 0
    ingest_began: float = 0.0  # time.monotonic() when the first book to ingest began

    def seconds_left(self, now: float) -> float | None:
        """The rest at the pace of the books done so far; None before the first is done."""
        if not self.ingested:
            return None
        return (now - self.ingest_began) / self.ingested * (self.to_ingest - self.ingested)


class LibrarySync:
    """Runs a sync: plans it, then adds, replaces and removes books, one at a time."""

    def __init__(self, catalog: ServiceClient, ingestor: BookIngestor, state_dir: Path) -> None:
        self.catalog = catalog
        self.ingestor = ingestor
        self.state_dir = state_dir

    async def run(self, request: SyncRequest, report: Report, counts: SyncCounts | None = None) -> SyncOutcome:
        """Plan and run a sync; `counts`, when given, is kept up to date with how far it is, in books."""
        started = time.perf_counter()
        state = SyncState(self.state_dir, request.collection)
        with state.locked():
            preference = request.format_preference.to_proto()
            # Long: it looks at every book's file on disk, 10,000 of them on a network share take a minute or more.
            listed = await self.catalog.call("ListLibraryFiles",
                                             catalog_pb2.ListLibraryFilesRequest(format_preference=preference),
                                             timeout=self.catalog.settings.long_rpc_timeout_s)
            writer = BookWriter(self.ingestor.store, request.collection)
            model = await self.ingestor.embedder.model_info()
            if await asyncio.to_thread(self.ingestor.store.collection_info, request.collection) is not None:
                # Refuses a collection of another model before any work, and gives a collection made before
                # file versions were recorded the payload indexes that planning reads.
                await asyncio.to_thread(writer.ensure_collection, model.dimension, model.name)
            held = await asyncio.to_thread(writer.held_books)
            failures = state.failures()
            plan = plan_sync(listed, held.file_versions, failures, request.remove_deleted, request.retry_failed,
                             model.name, held.records)
            report("plan", 1, 1, plan.counts())
            if counts is not None:
                counts.to_ingest, counts.ingest_began = len(plan.add) + len(plan.change), time.monotonic()
                counts.total = plan.unchanged + len(plan.update) + counts.to_ingest
                counts.indexed = counts.total - len(plan.add)
            removing = {}
            for key in plan.remove:
                _, title, _ = await asyncio.to_thread(writer.find_book_key, Filter(must={f.BOOK_KEY: key}), key)
                removing[key] = title
            outcome = SyncOutcome(plan, removing, request.dry_run)
            highlights = HighlightSync(self.ingestor.store, self.ingestor.embedder, request.collection)
            if request.dry_run:  # and the highlights the books to add or replace bring with them
                await self._plan_highlights(highlights, listed, outcome)
                outcome.highlights_added += sum(len(book.highlights) for book in [*plan.add, *plan.change])
                return outcome
            await self._drop_older_versions(writer, held)
            # Removals first: a book deleted from Calibre stops answering searches at once, not after the books to add.
            for n, key in enumerate(plan.remove):
                busy = FailedPrecondition(f"'{removing[key]}' is being ingested into '{request.collection}' right "
                                          "now; sync again once that ends to remove it.")
                with self.ingestor.claimed(request.collection, key, busy):
                    removed = await finish_before_cancel(asyncio.to_thread(writer.remove, key, removing[key], ""))
                    outcome.removed.append(removed)
                report("remove", n + 1, len(plan.remove), f"removed {removing[key]}")
            await self._update_metadata(writer, plan.update, outcome, report)
            await self._add_and_replace(request, plan, held, failures, state, writer, outcome, report,
                                        counts or SyncCounts())
            highlights_plan = await self._plan_highlights(highlights, listed, outcome)
            await highlights.apply(highlights_plan)
            report("highlights", 1, 1, f"{outcome.highlights_added} highlights added, "
                                       f"{outcome.highlights_removed} removed")
        outcome.seconds = round(time.perf_counter() - started, 2)
        return outcome

    async def _drop_older_versions(self, writer: BookWriter, held: HeldBooks) -> None:
        """Leave each book held whole in more than one version with its newest (HeldBooks); one being ingested
        right now is left to the next sync."""
        for key in held.held_twice:
            if not self.ingestor.claim(writer.collection, key):
                continue
            try:
                await finish_before_cancel(asyncio.to_thread(writer.keep_newest, key))
            finally:
                self.ingestor.release(writer.collection, key)

    async def _update_metadata(self, writer: BookWriter, books: list[LibraryFile], outcome: SyncOutcome,
                               report: Report) -> None:
        """Set what Calibre now says of each book on its points; one being ingested right now is left to the next
        sync (its ingest writes what Calibre said when it began)."""
        for n, book in enumerate(books):
            if not self.ingestor.claim(writer.collection, book.uuid):
                continue
            try:
                await finish_before_cancel(asyncio.to_thread(writer.update_metadata, book.uuid, listed_metadata(book)))
            finally:
                self.ingestor.release(writer.collection, book.uuid)
            outcome.updated.add(book.uuid)
            report("update", n + 1, len(books), f"updated {book.title}")

    @staticmethod
    async def _plan_highlights(highlights: HighlightSync, listed: catalog_pb2.ListLibraryFilesResponse,
                               outcome: SyncOutcome) -> HighlightPlan:
        plan = await asyncio.to_thread(highlights.plan, list(listed.books))
        outcome.highlights_added += len(plan.add)
        outcome.highlights_removed += len(plan.remove)
        return plan

    async def _add_and_replace(self, request: SyncRequest, plan: SyncPlan, held: HeldBooks,
                               failures: dict[str, Failure], state: SyncState, writer: BookWriter,
                               outcome: SyncOutcome, report: Report, counts: SyncCounts) -> None:
        books = {book.book_id: book for book in [*plan.add, *plan.change]}
        changed = {book.book_id for book in plan.change}

        async def resolve(book: BatchBook) -> tuple[BatchBook, BookToIngest]:
            return book, await listed_book(books[book.id])

        async def ingest(source: BookToIngest, book_report: Report) -> int:
            if source.calibre_id in changed:
                stored = held.file_versions[source.book_key]
                if stored is not None and stored.sha256 == source.file_version.sha256:
                    # Only the stamp changed (the file was touched, copied or moved): the content is the same.
                    await asyncio.to_thread(writer.restamp, source.book_key, source.file_version)
                    outcome.restamped.add(source.book_key)
                    metadata, record = listed_metadata(books[source.calibre_id]), held.records.get(source.book_key)
                    if record is not None and metadata.differs_from(record):
                        await asyncio.to_thread(writer.update_metadata, source.book_key, metadata)
                        outcome.updated.add(source.book_key)
                    return 0
            ingested = await self.ingestor.ingest(source, request.collection, request.params, request.hierarchical,
                                                  book_report, replace=source.calibre_id in changed)
            outcome.highlights_added += ingested.highlights
            return ingested.chunks

        def remember(row: BatchRow) -> None:
            book = books[row.book.id]
            counts.ingested += 1
            if book.book_id not in changed:
                counts.indexed += row.status == BatchStatus.SUCCESS
                counts.total -= row.status == BatchStatus.FAILED
            if row.status == BatchStatus.FAILED:
                failures[book.uuid] = Failure(book.book_id, row.book.title, row.error or "", listed_stamp(book))
            else:
                failures.pop(book.uuid, None)
            state.save_failures(failures)

        batch = [BatchBook(b.book_id, b.title, b.author) for b in books.values()]
        # A service that cannot be reached fails every book alike, in a fraction of a second each: that ends the sync
        # (the next one resumes) instead of recording each book as failed, which later syncs would skip. A deadline
        # or a refused size may be the book's own doing, and is recorded as its failure.
        try:
            outcome.rows = await ingest_batch(batch, resolve, ingest, report, remember, stage="sync", fatal=(Unavailable,))
        except Unavailable as exc:
            raise Unavailable(f"The sync stopped: {exc.message} The books it finished are kept; run it again (or let "
                              "the automatic sync go on) once the service is back.") from exc
