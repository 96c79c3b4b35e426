"""The automatic sync's timing: it waits for a quiet library, for a manual sync or a reindex that holds the
collection, and records where the library stood when it began (fakes stand in for the catalog and the sync)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from waiting import wait_until

from alexandria.errors import FailedPrecondition
from services.ingest.auto_sync import RECENT_RUNS, RETRY_S, AutoSync, AutoSyncRecord


class _Catalog:
    def __init__(self) -> None:
        self.signature = "v1"

    async def call(self, method: str, request: object) -> object:
        assert method == "GetLibraryState"
        return SimpleNamespace(signature=self.signature)


class _Sync:
    def __init__(self) -> None:
        self.runs = 0
        self.busy = False
        self.failure: Exception | None = None

    async def run(self, request: object, report: Callable[[str, int, int, str], None],
                  counts: object = None) -> SimpleNamespace:
        if self.failure is not None:
            raise self.failure
        if self.busy:
            raise FailedPrecondition("A reindex of collection 'alexandria' is already running; wait for it to finish.")
        self.runs += 1
        report("sync", 0, 2, "0/2 books done; Emma: 40%, embedding")
        if self.during is not None:
            await self.during()
        return SimpleNamespace(summary=f"sync {self.runs}", changed_anything=self.changes)

    changes = True
    during: Callable[[], Awaitable[None]] | None = None


def _watcher(tmp_path: Path, catalog: _Catalog, sync: _Sync, quiet_s: float) -> AutoSync:
    return AutoSync(catalog, sync, tmp_path, "alexandria", quiet_s, 0.01,  # type: ignore[arg-type]
                    lambda outcome: outcome.summary)


async def test_a_library_never_synced_is_synced_at_the_first_look_and_not_again_while_it_stays(tmp_path: Path) -> None:
    sync = _Sync()
    watcher = _watcher(tmp_path, _Catalog(), sync, quiet_s=0)
    await watcher.check()
    await watcher.check()
    assert sync.runs == 1 and not watcher.pending
    assert AutoSyncRecord.load(tmp_path / "alexandria.auto-sync.json").signature == "v1"
    assert _watcher(tmp_path, _Catalog(), sync, quiet_s=0).record.runs[0].summary == "sync 1", "kept across restarts"


async def test_the_status_says_whether_a_sync_runs_or_is_queued_and_a_no_op_hides_no_change(tmp_path: Path) -> None:
    catalog, sync = _Catalog(), _Sync()
    watcher = _watcher(tmp_path, catalog, sync, quiet_s=0)
    seen: list[tuple[bool, bool, bool, str]] = []

    async def during() -> None:
        seen.append((watcher.running, watcher.pending, watcher.queued, watcher.progress))
        catalog.signature = "v2"  # Calibre changes the library while the sync runs
        await watcher.check()
        seen.append((watcher.running, watcher.pending, watcher.queued, watcher.progress))

    sync.during = during
    await watcher.check()
    assert seen == [(True, False, False, "sync: 0/2 books done; Emma: 40%, embedding"),
                    (True, False, True, "sync: 0/2 books done; Emma: 40%, embedding")], "queued, not pending"
    assert (watcher.running, watcher.pending, watcher.queued, watcher.progress) == (False, True, False, ""), \
        "an idle watcher shows no stale step"
    sync.during, sync.changes = None, False
    await watcher.check()  # the queued sync, which finds nothing to do
    assert [run.summary for run in watcher.record.runs] == ["sync 2", "sync 1"]
    assert watcher.record.last_change is not None and watcher.record.last_change.summary == "sync 1"
    kept = _watcher(tmp_path, _Catalog(), sync, quiet_s=0).record
    assert kept.last_change == watcher.record.last_change and len(kept.runs) == 2, "kept across restarts"
    for _ in range(RECENT_RUNS + 2):
        watcher.record.signature = "older"
        await watcher.check()
    assert len(watcher.record.runs) == RECENT_RUNS and watcher.record.last_change.summary == "sync 1"


async def test_a_change_waits_for_the_quiet_period(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    monkeypatch.setattr("services.ingest.auto_sync.time.monotonic", lambda: clock[0])
    catalog, sync = _Catalog(), _Sync()
    watcher = _watcher(tmp_path, catalog, sync, quiet_s=5)
    await watcher.check()
    clock[0] += 5
    await watcher.check()
    assert sync.runs == 1
    for signature in ("v2", "v3", "v4"):  # Calibre writes again and again
        catalog.signature = signature
        clock[0] += 1
        await watcher.check()
        assert watcher.pending and sync.runs == 1
    clock[0] += 5
    await watcher.check()
    assert sync.runs == 2 and not watcher.pending and watcher.record.signature == "v4"


async def test_a_manual_sync_or_a_reindex_wins_and_the_automatic_one_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [100.0]
    monkeypatch.setattr("services.ingest.auto_sync.time.monotonic", lambda: clock[0])
    sync = _Sync()
    sync.busy = True
    watcher = _watcher(tmp_path, _Catalog(), sync, quiet_s=0)
    await watcher.check()
    assert watcher.pending and sync.runs == 0 and "reindex" in watcher.waiting_reason
    sync.busy = False
    await watcher.check()
    assert watcher.pending and sync.runs == 0, "not tried again at once: each try lists the whole library"
    clock[0] += RETRY_S
    await watcher.check()
    assert not watcher.pending and sync.runs == 1 and watcher.waiting_reason == ""


async def test_an_unexpected_failure_is_said_in_the_status_and_the_watching_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("services.ingest.auto_sync.RETRY_S", 0.0)
    sync = _Sync()
    sync.failure = OSError("No space left on device")
    watcher = _watcher(tmp_path, _Catalog(), sync, quiet_s=0)
    watching = asyncio.create_task(watcher.run())
    try:
        await wait_until(lambda: "No space left on device" in watcher.waiting_reason,
                         what="the watcher to say why it waits")
        assert watcher.waiting_reason.startswith("the last automatic sync failed") and not watcher.running
        sync.failure = None
        await wait_until(lambda: sync.runs == 1, what="the watcher to sync once")
        assert not watcher.pending and watcher.waiting_reason == ""
    finally:
        watching.cancel()

