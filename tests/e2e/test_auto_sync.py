"""A library that keeps itself in step: a real stack with AUTO_SYNC on, its Calibre library changed by calibredb
and by Calibre's own triggers, and no command run."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from catalog.scratch import copy_library, open_for_writing
from conftest import LOCAL_FILES
from mcp import Client
from waiting import wait_until

from alexandria_stack.layout import SAMPLE_LIBRARY as LIBRARY
from e2e.mcp_calls import call
from e2e.stack import RunningStack, StoredPoints, start_stack
from e2e.test_sync import calibredb, ingested, seven_book_library

QUIET_S = 2.0
# The fast profile: these tests check when the library is synced, not which model embeds it, and on a CPU without
# bf16 units the multilingual model that auto picks for the sample library took over three minutes for seven books.
AUTO_SYNC = {"AUTO_SYNC": "true", "AUTO_SYNC_QUIET_S": str(QUIET_S), "EMBEDDER_PROFILE": "fast"}


async def auto_sync(stack: RunningStack) -> dict:
    async with Client(stack.mcp_url) as client:
        stats, is_error = await call(client, "alexandria_stats")
    assert not is_error, stats
    return stats["auto_sync"]


async def until_in_step(stack: RunningStack, runs: int, timeout: float = 180) -> dict:
    """The automatic sync's state once it has finished `runs` syncs and nothing is pending."""
    return await wait_until(lambda: auto_sync(stack),
                            lambda state: state["runs"] >= runs and not state["pending"] and not state["running"],
                            what=f"the automatic sync to be in step after {runs} runs", timeout_s=timeout,
                            interval_s=0.2)


async def the_tempest_found(stack: RunningStack) -> bool:
    """Whether a lexical search finds The Tempest (Calibre id 5)."""
    async with Client(stack.mcp_url) as client:
        found, _ = await call(client, "alexandria_query", {
            "query": "Prospero Ariel island", "book_id": 5, "threshold": 0.0, "search_mode": "lexical"})
    return bool(found["result_count"])


@pytest.mark.usefixtures("shared_corpus")  # the book added comes from its loose files
async def test_books_added_and_removed_in_calibre_are_searchable_and_gone_with_no_command(tmp_path: Path) -> None:
    library = copy_library(LIBRARY, tmp_path / "library")
    stack = start_stack(tmp_path / "var", library, extra_env=AUTO_SYNC)
    try:
        started = await until_in_step(stack, runs=1)  # a library never synced is synced at start
        assert "4 added" in started["last_summary"], started
        assert set((await ingested(stack)).values()) == {True}

        calibredb(library, "add", str(LOCAL_FILES / "the_tempest.epub"))
        added_at = time.monotonic()
        await wait_until(lambda: the_tempest_found(stack), what="the book added in Calibre to become searchable",
                         timeout_s=120, interval_s=0.2)
        print(f"added in Calibre, searchable {time.monotonic() - added_at:.1f} s later (quiet period {QUIET_S} s)")

        calibredb(library, "remove", "3", "--permanent")
        state = await until_in_step(stack, runs=3)
        assert "1 removed" in state["last_summary"], state
        assert await ingested(stack) == {1: True, 2: True, 4: True, 5: True}
        status = stack.cli("status")
        assert "auto-sync  in step; last finished" in status.stdout and "1 removed" in status.stdout, status
    finally:
        stack.stop()


async def test_a_library_changed_twenty_times_in_ten_seconds_is_synced_once_or_twice(tmp_path: Path) -> None:
    library = copy_library(LIBRARY, tmp_path / "library")
    stack = start_stack(tmp_path / "var", library, extra_env=AUTO_SYNC)
    try:
        before = (await until_in_step(stack, runs=1))["runs"]
        for n in range(20):  # Calibre writing metadata.db again and again, as while it adds a batch
            with open_for_writing(library) as db:
                db.execute("UPDATE books SET title = ? WHERE id = 2", (f"Renamed {n}",))
            await asyncio.sleep(0.5)
        state = await until_in_step(stack, runs=before + 1)
        await asyncio.sleep(QUIET_S + 1)  # anything still to come has come
        state = await auto_sync(stack)
        assert 1 <= state["runs"] - before <= 2, state
    finally:
        stack.stop()


@pytest.mark.usefixtures("shared_corpus")  # seven_book_library adds three of its loose files
async def test_a_stack_stopped_mid_sync_loses_nothing_and_finishes_when_started_again(tmp_path: Path) -> None:
    library = seven_book_library(tmp_path)
    stack = start_stack(tmp_path / "var", library, extra_env=AUTO_SYNC)
    try:
        # Stopped while the fourth or fifth of the seven books is being ingested.
        state = await wait_until(lambda: auto_sync(stack), lambda state: state["runs"] > 0 or (
            state["running"] and any(f" {n}/7 " in state["progress"] for n in (4, 5))),
            what="the first sync to ingest the fourth or fifth book", timeout_s=300, interval_s=0.05)
        assert state["runs"] == 0, f"the first sync ended before the stack could be stopped: {state}"
    finally:
        stack.stop()
    partial = stack.stored_points()
    stack = start_stack(tmp_path / "var", library, extra_env=AUTO_SYNC)
    try:
        state = await until_in_step(stack, runs=1)
        assert "0 failed" in state["last_summary"], state
        assert set((await ingested(stack)).values()) == {True} and len(await ingested(stack)) == 7
    finally:
        stack.stop()
    held = stack.stored_points()
    assert partial.books < 7 and (held.books, held.versions) == (7, 7), (partial, held)
    assert held == StoredPoints(held.points, 7, 7), "no book written twice, nor half"
