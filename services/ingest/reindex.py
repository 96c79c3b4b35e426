"""Reindex: rebuild a collection under the running model from its books' own sources, then swap it in.

The books are those the collection holds whole, each read again from where it came from (a Calibre book
through the catalog, in the format it was ingested from; a local file from its path, with the title, author
and language it was ingested with) and chunked with the parameters it was ingested with, into a new
collection (`<collection>-r<hex>`), while every search given the collection's name still reaches the old
one. Once every book has had its turn, the name moves onto the new collection at once
(`Store.replace_collection`) and the old one is dropped.

Which books the rebuilt collection holds: exactly those that could be read and ingested. A book whose
source is gone (deleted from Calibre, none of its files on disk, a local file missing or changed since) is
reported and left out, as is a book that failed to ingest, named with its reason: both are listed in the
summary, to ingest again once their file is back or fixed. Two cases swap nothing and keep the old
collection whole: no book could be rebuilt out of a collection that held some (a library not mounted, an
embedder that fails every book), and a service that stops answering (Unavailable, DeadlineExceeded) ends
the reindex, to be resumed.

Killed half-way, a reindex resumes: what it is doing (the collection, the collection it rebuilds, the one
it builds, the model) is kept in `<collection>.reindex.json` beside the sync state, and the writer writes
each book whole or not at all, so a book already whole in the new collection is not ingested again. A state
left by another model, or by a reindex whose swap has happened since, is dropped with its half-built
collection and the reindex starts anew. A reindex holds the collection's sync lock: no sync runs beside it.
Other writes to the collection meanwhile (a book removed, or ingested by a model that matches it) reach the
old collection only and are lost at the swap; an ingest under the running model is refused there anyway, and
one writing at the moment of the swap takes back what reached the new collection and is refused (writer.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import time
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path

from alexandria.book_formats import FormatPreference
from alexandria.book_identity import file_sha256, is_local_book_key, local_book_key
from alexandria.clients import ServiceClient
from alexandria.errors import DeadlineExceeded, NotFound, Unavailable
from alexandria.store import collection_not_found
from alexandria.store.records import (
    BookRecord,
    CollectionModel,
    complete,
    complete_book_records,
    complete_books,
)
from alexandria.v1 import catalog_pb2
from services.ingest.batch import BatchBook, BatchRow, BatchStatus, ingest_batch
from services.ingest.documents import ChunkingParams
from services.ingest.highlights import HighlightSync
from services.ingest.pipeline import BookIngestor, BookToIngest, ocr_options
from services.ingest.progress import Report
from services.ingest.sources import BookSources
from services.ingest.sync import NO_FILE, SyncState
from services.ingest.writer import BookWriter

DELETED = "deleted from the Calibre library"
STAGE = "reindex"


@dataclass(frozen=True)
class ReindexState:
    """A reindex under way, as its state file keeps it."""

    collection: str  # the name users give
    source: str  # the collection it rebuilds (what the name reached when it began)
    target: str  # the collection it builds
    model: str  # the model it builds with

    @classmethod
    def start(cls, collection: str, source: str, model: str) -> ReindexState:
        """A new reindex, building into a fresh collection name (at most 64 characters, like every name)."""
        return cls(collection, source, f"{collection[:52]}-r{secrets.token_hex(5)}", model)


@dataclass(frozen=True)
class Resumption:
    """What a reindex does first, given the state a previous one left."""

    state: ReindexState
    resumed: bool  # the state's target holds what an earlier run rebuilt
    drop: tuple[str, ...] = ()  # collections to drop before anything else
    swapped: bool = False  # the earlier run had swapped: only `drop` is left to do
    swap_left: bool = False  # the earlier run was killed amid its swap: only the swap is left to do


def resume_or_start(saved: ReindexState | None, collection: str, source: str, model: str,
                    source_exists: bool = True) -> Resumption:
    """Resume `saved` when it rebuilds the same collection under the same model, finish it when its swap
    happened already or was under way, else start anew (dropping a half-built collection of another model)."""
    if saved is not None and saved.collection == collection:
        if saved.target == source:  # killed between the swap and the drop of the old collection
            return Resumption(saved, resumed=True, drop=(saved.source,), swapped=True)
        if saved.source == source and saved.model == model:
            # A server store's first swap drops the collection of the user's name before the alias takes the name
            # (ServerStore.replace_collection): killed between the two, the rebuilt collection is whole and nameless.
            return Resumption(saved, resumed=True, swap_left=not source_exists and source == collection)
        return Resumption(ReindexState.start(collection, source, model), resumed=False, drop=(saved.target,))
    return Resumption(ReindexState.start(collection, source, model), resumed=False)


@dataclass(frozen=True)
class Gone:
    book: BookRecord
    reason: str


@dataclass
class ReindexPlan:
    rebuild: list[BookRecord] = field(default_factory=list)
    done: list[BookRecord] = field(default_factory=list)  # whole in the new collection already (resumed)
    gone: list[Gone] = field(default_factory=list)

    def counts(self) -> str:
        """The plan in one line, as its progress says it."""
        resumed = f", {len(self.done)} rebuilt before (resumed)" if self.done else ""
        return f"{len(self.rebuild)} to rebuild{resumed}, {len(self.gone)} whose source is gone"


def plan_reindex(held: list[BookRecord], rebuilt: Collection[str], gone: dict[str, str]) -> ReindexPlan:
    """What a reindex does with each book the collection holds whole: `rebuilt` are the keys of the books
    the new collection holds whole already, `gone` the reason for each book whose source is gone."""
    plan = ReindexPlan()
    for book in held:
        if book.book_key in rebuilt:
            plan.done.append(book)
        elif book.book_key in gone:
            plan.gone.append(Gone(book, gone[book.book_key]))
        else:
            plan.rebuild.append(book)
    return plan


def calibre_gone(book: BookRecord, library: dict[str, catalog_pb2.LibraryFile]) -> str | None:
    """Why a Calibre book cannot be read again (None: it can), from the catalog's listing by uuid."""
    listed = library.get(book.book_key)
    if listed is None:
        return DELETED
    return None if listed.format else NO_FILE


def local_gone(book: BookRecord) -> str | None:
    """Why a local file cannot be read again (None: it can): it is no longer there, or holds another text
    (a local book is its content, so a changed file is another book)."""
    path = Path(book.file_path)
    if not path.is_file():
        return f"{path} is no longer on disk"
    if local_book_key(file_sha256(path)) != book.book_key:
        return f"{path} changed since it was ingested: it is another book now (ingest it again)"
    return None


class ReindexStateFile:
    """The state file of one collection's reindex, replaced whole (written aside, renamed over)."""

    def __init__(self, directory: Path, collection: str) -> None:
        self.path = directory / f"{collection}.reindex.json"

    def load(self) -> ReindexState | None:
        try:
            return ReindexState(**json.loads(self.path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None
        except (ValueError, TypeError):  # unreadable: start anew (its half-built collection stays)
            return None

    def save(self, state: ReindexState) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staging = self.path.with_suffix(".tmp")
        staging.write_text(json.dumps(asdict(state), indent=1), encoding="utf-8")
        os.replace(staging, self.path)

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


@dataclass
class ReindexOutcome:
    collection: str
    model: str
    previous_model: str
    plan: ReindexPlan
    rows: list[BatchRow] = field(default_factory=list)  # each book rebuilt by this run, or that failed
    swapped: bool = False
    books: int = 0  # what the collection holds once done
    points: int = 0
    seconds: float = 0.0

    def _rows(self, status: BatchStatus) -> list[BatchRow]:
        return [row for row in self.rows if row.status == status]

    @property
    def rebuilt(self) -> int:
        return len(self._rows(BatchStatus.SUCCESS)) + len(self._rows(BatchStatus.SKIPPED))

    @property
    def failed(self) -> list[BatchRow]:
        return self._rows(BatchStatus.FAILED)

    def summary(self) -> str:
        left_out = len(self.plan.gone) + len(self.failed)
        if not self.swapped:
            return (f"⚠️ Reindex of '{self.collection}' not swapped: no book could be rebuilt under {self.model} "
                    f"({len(self.plan.gone)} gone, {len(self.failed)} failed); the collection is unchanged.")
        return (f"🔁 Reindex of '{self.collection}' complete in {self.seconds:.1f} s: it now holds {self.books} books "
                f"({self.points} points) made by {self.model} (was {self.previous_model}): {self.rebuilt} rebuilt"
                f"{f', {len(self.plan.done)} resumed' if self.plan.done else ''}, {len(self.plan.gone)} whose source "
                f"is gone, {len(self.failed)} failed" + (f"; {left_out} left out, no longer in the collection"
                                                          if left_out else "") + ".")


class CollectionReindex:
    """Runs a reindex: plans it, rebuilds each book into the new collection, swaps it in."""

    def __init__(self, catalog: ServiceClient, sources: BookSources, ingestor: BookIngestor,
                 state_dir: Path) -> None:
        self.catalog = catalog
        self.sources = sources
        self.ingestor = ingestor
        self.state_dir = state_dir

    async def run(self, collection: str, report: Report) -> ReindexOutcome:
        started = time.perf_counter()
        store = self.ingestor.store
        state_file = ReindexStateFile(self.state_dir, collection)
        with SyncState(self.state_dir, collection).locked(STAGE):
            model = await self.ingestor.embedder.model_info()
            source = await asyncio.to_thread(store.collection_target, collection)
            info = await asyncio.to_thread(store.collection_info, source)
            resumption = resume_or_start(state_file.load(), collection, source, model.name, info is not None)
            for stale in resumption.drop:
                await asyncio.to_thread(store.delete_collection, stale)
            state = resumption.state
            if resumption.swap_left:
                await asyncio.to_thread(store.replace_collection, collection, state.target)
            if resumption.swapped or resumption.swap_left:  # nothing left but the drop or the swap above
                state_file.clear()
                return await self._finished(collection, model.name, "", ReindexPlan(), [], started)
            if info is None:
                raise collection_not_found(collection)
            previous_model = CollectionModel.of(info).name or "an unnamed model"
            state_file.save(state)
            await asyncio.to_thread(BookWriter(store, state.target).ensure_collection, model.dimension, model.name)
            held = await asyncio.to_thread(complete_book_records, store, source)
            rebuilt = await asyncio.to_thread(complete_books, store, state.target)
            plan = plan_reindex(held, rebuilt, await self._gone(held))
            report("plan", 1, 1, plan.counts())
            rows = await self._rebuild(plan, state.target, report)
            swap = bool(plan.done) or any(row.status != BatchStatus.FAILED for row in rows) or not held
            if swap:
                await self._add_highlights(state.target, held)
                await asyncio.to_thread(store.replace_collection, collection, state.target)
            else:
                await asyncio.to_thread(store.delete_collection, state.target)
            state_file.clear()
            return await self._finished(collection, model.name, previous_model, plan, rows, started, swap)

    async def _finished(self, collection: str, model: str, previous_model: str, plan: ReindexPlan,
                        rows: list[BatchRow], started: float, swapped: bool = True) -> ReindexOutcome:
        store = self.ingestor.store
        outcome = ReindexOutcome(collection, model, previous_model, plan, rows, swapped)
        outcome.books = len(await asyncio.to_thread(complete_books, store, collection))
        outcome.points = await asyncio.to_thread(store.count, collection, complete())
        outcome.seconds = round(time.perf_counter() - started, 2)
        return outcome

    async def _add_highlights(self, target: str, held: list[BookRecord]) -> None:
        """The reader's highlights of the rebuilt books, embedded by the new model before the swap: searches
        of highlights answer on either side of it."""
        if all(is_local_book_key(book.book_key) for book in held):
            return
        listed = await self.catalog.call("ListLibraryFiles", catalog_pb2.ListLibraryFilesRequest(),
                                         timeout=self.catalog.settings.long_rpc_timeout_s)
        highlights = HighlightSync(self.ingestor.store, self.ingestor.embedder, target)
        await highlights.apply(await asyncio.to_thread(highlights.plan, list(listed.books)))

    async def _gone(self, held: list[BookRecord]) -> dict[str, str]:
        """Book key -> why its source is gone, for each book that cannot be read again."""
        gone: dict[str, str] = {}
        library: dict[str, catalog_pb2.LibraryFile] = {}
        if any(not is_local_book_key(book.book_key) for book in held):
            listed = await self.catalog.call("ListLibraryFiles", catalog_pb2.ListLibraryFilesRequest(),
                                             timeout=self.catalog.settings.long_rpc_timeout_s)
            library = {entry.uuid: entry for entry in listed.books}
        for book in held:
            if is_local_book_key(book.book_key):
                reason = await asyncio.to_thread(local_gone, book)
            else:
                reason = calibre_gone(book, library)
            if reason is not None:
                gone[book.book_key] = reason
        return gone

    async def _rebuild(self, plan: ReindexPlan, target: str, report: Report) -> list[BatchRow]:
        """Each book of the plan ingested into `target` as it was ingested before; the batch's `id` is its place
        here. A book whose source went away since the plan (deleted from Calibre meanwhile) joins `plan.gone`."""
        books = plan.rebuild
        vanished: dict[int, str] = {}

        async def resolve(batch_book: BatchBook) -> tuple[BatchBook, tuple[BookToIngest, BookRecord]]:
            book = books[batch_book.id]
            try:
                if book.calibre_id is None:
                    # Scanned pages read as an ingest reads them (INGEST_OCR_MAX_PAGES, TESSDATA_PREFIX), each page
                    # reported: a stream that sends nothing for STREAM_IDLE_S is given up on.
                    ocr = ocr_options(report, book.language or None, self.ingestor.ocr)
                    source = await self.sources.local(book.file_path, book.title, book.author, book.language, ocr)
                else:
                    source = await self.sources.calibre(book.calibre_id, FormatPreference.to_read_again(book.format))
            except NotFound:
                vanished[batch_book.id] = ("deleted from Calibre during the reindex" if book.calibre_id is not None
                                           else "its file went away during the reindex")
                raise
            return batch_book, (source, book)

        async def ingest(resolved: tuple[BookToIngest, BookRecord], book_report: Report) -> int:
            source, book = resolved
            params, hierarchical = ChunkingParams.from_stored(book.chunking)
            return (await self.ingestor.ingest(source, target, params, hierarchical, book_report)).chunks

        batch = [BatchBook(n, book.title, book.author) for n, book in enumerate(books)]
        rows = await ingest_batch(batch, resolve, ingest, report, lambda row: None, stage=STAGE,
                                  fatal=(Unavailable, DeadlineExceeded))
        plan.gone.extend(Gone(books[n], reason) for n, reason in sorted(vanished.items()))
        return [row for row in rows if row.book.id not in vanished]
