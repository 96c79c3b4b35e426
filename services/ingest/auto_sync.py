"""The automatic sync: a library that keeps itself in step while the stack runs (AUTO_SYNC, on by default).

Every IngestSettings.auto_sync_poll_s the catalog says what the library holds (GetLibraryState: a digest of its
books, files and highlights, read again only when metadata.db was written; a write that changes none of them, as
Calibre's viewer saving the reader's place, leaves it as it was). When that differs from where it stood at the last
automatic sync, and has not changed for
AUTO_SYNC_QUIET_S (Calibre writes metadata.db many times while it adds a batch), the same sync as `alexandria
sync` runs on the default collection; once at start too when the library changed since the last one, so a new
library starts indexing as soon as the stack is up. Never two syncs at once: a manual sync or a reindex holds
the collection's lock, and the automatic one waits for it. A failing book is remembered as any sync remembers
it; a stop mid-sync loses nothing (each book is written whole or not at all). Where the library stood at the
last automatic sync, and when the last few finished and what each did (and the last that changed anything, which a
sync that found nothing to do never hides), are kept in `<collection>.auto-sync.json` beside the sync's other state.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from alexandria.book_formats import DEFAULT_PREFERENCE
from alexandria.clients import ServiceClient
from alexandria.errors import AlexandriaError, FailedPrecondition
from alexandria.v1 import catalog_pb2
from services.ingest.documents import ChunkingParams
from services.ingest.sync import LibrarySync, SyncCounts, SyncOutcome, SyncRequest

log = logging.getLogger(__name__)

# After a sync that could not run (another holds the collection, its model is not the running one, a service
# is down), the next try waits this long: each try lists the whole library.
RETRY_S = 30.0
RECENT_RUNS = 5  # the automatic syncs the status keeps, newest first


@dataclass(frozen=True)
class AutoSyncRun:
    """One automatic sync: when it finished, what it did (as `alexandria sync` says it), and whether it changed
    anything (a book or a highlight added, replaced, updated or removed, or a book that failed)."""

    finished_at: str
    summary: str
    changed: bool


@dataclass
class AutoSyncRecord:
    """What the automatic syncs left: where the library stood when the last began, the last few runs (newest first)
    and the last that changed anything."""

    signature: str = ""
    runs: list[AutoSyncRun] = field(default_factory=list)
    last_change: AutoSyncRun | None = None

    def add(self, signature: str, run: AutoSyncRun) -> None:
        self.signature, self.runs = signature, [run, *self.runs][:RECENT_RUNS]
        if run.changed:
            self.last_change = run

    @classmethod
    def load(cls, path: Path) -> AutoSyncRecord:
        try:
            kept = json.loads(path.read_text())
            last_change = kept.get("last_change")
            return cls(str(kept["signature"]), [AutoSyncRun(**run) for run in kept["runs"]],
                       AutoSyncRun(**last_change) if last_change else None)
        except (OSError, ValueError, TypeError, KeyError, AttributeError):  # none yet, or unreadable (or written by
            return cls()  # an earlier Alexandria): the next sync writes it anew

    def save(self, path: Path) -> None:
        """Written whole to a temporary file, then renamed over the old one: never half-written."""
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(self), indent=1))
        os.replace(temporary, path)


class AutoSync:
    """Watches the library through the catalog and syncs `collection` after each change, once it is quiet."""

    def __init__(self, catalog: ServiceClient, sync: LibrarySync, state_dir: Path, collection: str,
                 quiet_s: float, poll_s: float, summarise: Callable[[SyncOutcome], str]) -> None:
        self.catalog = catalog
        self.sync = sync
        self.collection = collection
        self.quiet_s = quiet_s
        self.poll_s = poll_s
        self.summarise = summarise
        self.record_path = state_dir / f"{collection}.auto-sync.json"
        self.record = AutoSyncRecord.load(self.record_path)
        self.seen = ""  # where the library stood at the last look
        self.seen_since = time.monotonic()
        self.running = False
        self.syncing = ""  # where the library stood when the running sync began
        self.progress = ""  # the running sync's latest step; "" when none runs
        self.counts = SyncCounts()  # how far the running sync has filled the collection
        self.waiting_reason = ""
        self.runs = 0  # finished since the service started
        self.retry_at = float("-inf")

    @property
    def changed(self) -> bool:
        """The library changed since the last sync began (the running one, when one runs)."""
        return bool(self.seen) and self.seen != (self.syncing if self.running else self.record.signature)

    @property
    def pending(self) -> bool:
        """No sync runs, and one will: the library changed since the last."""
        return self.changed and not self.running

    @property
    def queued(self) -> bool:
        """A sync runs, and another will once it ends: the library changed since it began."""
        return self.changed and self.running

    async def run(self) -> None:
        """Watch and sync until cancelled (when the service stops). A look that fails otherwise than `check` expects
        (a store's or a disk's own error) is logged and said in the status, and the watching goes on."""
        while True:
            try:
                await self.check()
            except Exception as exc:
                log.exception("the automatic sync of '%s' failed; it is tried again in %.0f s", self.collection, RETRY_S)
                self.waiting_reason = f"the last automatic sync failed ({exc}); it is tried again in {RETRY_S:.0f} s"
                self.retry_at = time.monotonic() + RETRY_S
            await asyncio.sleep(self.poll_s)

    async def check(self) -> None:
        """One look at the library; a sync when it changed since the last one and has been quiet long enough."""
        try:
            state = await self.catalog.call("GetLibraryState", catalog_pb2.GetLibraryStateRequest())
        except AlexandriaError as exc:  # no library, or the catalog restarting: look again later
            self.waiting_reason = exc.message
            return
        if state.signature != self.seen:
            self.seen, self.seen_since = state.signature, time.monotonic()
        now = time.monotonic()
        if self.pending and now - self.seen_since >= self.quiet_s and now >= self.retry_at:
            await self._sync(state.signature)

    async def _sync(self, signature: str) -> None:
        self.running, self.syncing, self.progress, self.counts = True, signature, "", SyncCounts()

        def report(stage: str, done: int, total: int, message: str = "") -> None:
            self.progress = f"{stage}: {message or f'{done}/{total}'}"

        request = SyncRequest(self.collection, ChunkingParams(), True, DEFAULT_PREFERENCE)
        try:
            outcome = await self.sync.run(request, report, self.counts)
        except FailedPrecondition as busy:  # a manual sync or a reindex holds the collection: wait for it
            self.waiting_reason, self.retry_at = busy.message, time.monotonic() + RETRY_S
            return
        except AlexandriaError as exc:
            log.warning("the automatic sync of '%s' failed: %s; it is tried again in %.0f s",
                        self.collection, exc.message, RETRY_S)
            self.waiting_reason, self.retry_at = exc.message, time.monotonic() + RETRY_S
            return
        finally:
            self.running, self.progress = False, ""
        self.waiting_reason = ""
        run = AutoSyncRun(datetime.now(UTC).isoformat(timespec="seconds"), self.summarise(outcome),
                          outcome.changed_anything)
        self.record.add(signature, run)
        self.record.save(self.record_path)
        self.runs += 1
        log.info("automatic sync of '%s': %s", self.collection, run.summary)
