"""The automatic sync's timing: it waits for a quiet library, for a manual sync or a reindex that holds the
collection, and records where the library stood when it began (fakes stand in for the catalog and the sync)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest
from waiting import wait_until

from alexandria.errors import FailedPrecondition
from services.ingest.auto_sync import RETRY_S, AutoSync, AutoSyncRecord


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

    async def run(self, request: object, report: object) -> str:
        if self.failure is not None:
            raise self.failure
        if self.busy:
            raise FailedPrecondition("A reindex of collection 'alexandria' is already running; wait for it to finish.")
        self.runs += 1
        return f"sync {self.runs}"


def _watcher(tmp_path: Path, catalog: _Catalog, sync: _Sync, quiet_s: float) -> AutoSync:
    return AutoSync(catalog, sync, tmp_path, "alexandria", quiet_s, 0.01, str)  # type: ignore[arg-type]


async def test_a_library_never_synced_is_synced_at_the_first_look_and_not_again_while_it_stays(tmp_path: Path) -> None:
    sync = _Sync()
    watcher = _watcher(tmp_path, _Catalog(), sync, quiet_s=0)
    await watcher.check()
    await watcher.check()
    assert sync.runs == 1 and not watcher.pending
    assert AutoSyncRecord.load(tmp_path / "alexandria.auto-sync.json").signature == "v1"
    assert _watcher(tmp_path, _Catalog(), sync, quiet_s=0).record.summary == "sync 1", "kept across restarts"


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

