"""The reader's highlights: written into a Calibre library by Calibre's own API (as its viewer saves them),
searchable through a real stack and a real MCP client, and kept in step by the automatic sync."""

from __future__ import annotations

import shutil

import pytest
from catalog.scratch import copy_library, edit_highlights
from mcp import Client

from alexandria_stack.layout import SAMPLE_LIBRARY as LIBRARY
from e2e.mcp_calls import call
from e2e.stack import RunningStack, start_stack
from e2e.test_auto_sync import AUTO_SYNC, until_in_step
from e2e.test_sync import calibredb

pytestmark = pytest.mark.skipif(shutil.which("calibre-debug") is None,
                                reason="needs Calibre's calibre-debug (make setup installs calibre)")

STAIRS = "The stairs had one hundred and twelve steps."
STAIRS_NOTE = "She still counts them, the way people count heartbeats."
QUESTION = "how many steps does the lighthouse staircase have"


async def search(stack: RunningStack, search_in: str, query: str = QUESTION) -> dict:
    async with Client(stack.mcp_url) as client:
        found, is_error = await call(client, "alexandria_query", {
            "query": query, "search_in": search_in, "threshold": 0.0, "limit": 10})
    assert not is_error, found
    return found


async def test_highlights_are_searchable_with_their_note_and_link_and_follow_calibre(tmp_path) -> None:
    library = copy_library(LIBRARY, tmp_path / "library")
    edit_highlights(library, "add", 1, STAIRS, STAIRS_NOTE, "1", "Chapter 2. The Lamp")
    edit_highlights(library, "add", 2, "The storm broke over Kelby Head at dusk.", "")
    stack = start_stack(tmp_path / "var", library, extra_env=AUTO_SYNC)
    try:
        started = await until_in_step(stack, runs=1)
        assert "4 added" in started["last_summary"] and "highlights: 2 added, 0 removed" in started["last_summary"]

        found = await search(stack, "highlights")
        best = found["results"][0]
        assert {r["kind"] for r in found["results"]} == {"highlight"} and found["result_count"] == 2
        assert (best["text"], best["note"], best["book_id"]) == (STAIRS, STAIRS_NOTE, 1)
        assert best["section_name"] == "Chapter 2. The Lamp" and best["book_title"] == "The Lighthouse Keeper's Almanac"
        # Calibre's viewer opens the highlight's spine item (index 1: the CFI's step /4) at its start CFI.
        assert best["link"].startswith("calibre://view-book/_hex_-") and best["link"].endswith(
            "/1/EPUB?open_at=epubcfi%2528%252F4%252F4%252F2%252F4%252F1%253A0%2529")

        passages = await search(stack, "passages")
        assert {r["kind"] for r in passages["results"]} == {"passage"} and all(r["note"] == "" for r in passages["results"])
        both = await search(stack, "both")
        assert {r["kind"] for r in both["results"]} == {"passage", "highlight"}
        async with Client(stack.mcp_url) as client:
            book, _ = await call(client, "alexandria_book", {"book_id": 1})
        assert book["book"]["highlights"] == 1

        edit_highlights(library, "remove", 1)  # the reader deletes it in the viewer
        state = await until_in_step(stack, runs=started["runs"] + 1)
        assert "highlights: 0 added, 1 removed" in state["last_summary"], state
        assert [r["book_id"] for r in (await search(stack, "highlights"))["results"]] == [2]

        calibredb(library, "remove", "2", "--permanent")  # a book's highlights go with it
        state = await until_in_step(stack, runs=state["runs"] + 1)
        gone = await search(stack, "highlights")
        assert gone["result_count"] == 0 and "No highlight matched" in gone["notice"], gone
        print(f"highlights found: {best['text']!r} ({best['score']:.2f}); after removal: {gone['notice']}")
    finally:
        stack.stop()


async def test_a_book_ingested_on_its_own_brings_its_highlights(tmp_path) -> None:
    library = copy_library(LIBRARY, tmp_path / "library")
    edit_highlights(library, "add", 1, STAIRS, STAIRS_NOTE, "1", "Chapter 2. The Lamp")
    stack = start_stack(tmp_path / "var", library)  # no automatic sync: only the ingest below writes
    try:
        async with Client(stack.mcp_url) as client:
            ingested, is_error = await call(client, "alexandria_ingest", {"book_id": 1})
        assert not is_error and "🖍️ Made the reader's highlights searchable (1)" in ingested["steps"], ingested
        found = await search(stack, "highlights")
        assert [(r["text"], r["note"]) for r in found["results"]] == [(STAIRS, STAIRS_NOTE)], found
        planned = stack.cli("sync", "--dry-run")
        assert "highlights" not in planned.stdout.split("Sync plan:")[-1], planned  # nothing left to do
    finally:
        stack.stop()
