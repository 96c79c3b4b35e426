"""Ingest through the MCP gateway against the real stack, as a user would drive it."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pymupdf
import pytest
from conftest import SHARED_LIBRARY
from ingest.helpers import scanned_pdf
from mcp import Client

from e2e.mcp_calls import call
from e2e.stack import GUIDES, HAMLET, MACBETH, RunningStack, StoredPoints, start_stack

pytestmark = pytest.mark.usefixtures("shared_corpus")


async def points(client: Client) -> int:
    stats, _ = await call(client, "alexandria_stats")
    return stats["qdrant"]["points_count"] if stats["qdrant"]["connected"] else 0


async def test_ingest_refuse_duplicate_remove_and_reingest_with_other_parameters(stack: RunningStack) -> None:
    async with Client(stack.mcp_url) as client:
        progress: list = []
        first, is_error = await call(client, "alexandria_ingest", {"book_id": MACBETH, "format_preference": "pdf"},
                                     progress)
        assert not is_error, first
        assert first["success"] is True and first["title"] == "Macbeth" and first["format"] == "PDF"
        assert first["author"] == "William Shakespeare & Thomas Middleton" and first["language"] == "eng"
        assert first["chunks"] > 0 and first["hierarchical"] is True and first["collection"] == "alexandria"
        assert first["chunking_params"] == {"threshold": 0.55, "min_chunk_size": 200, "max_chunk_size": 1200}
        assert first["progress"].endswith("100%") and first["steps"][-1] == "✅ Successfully ingested!"
        assert progress and progress[-1][0] == progress[-1][1], "progress notifications reach the client"
        assert [p[0] for p in progress] == sorted(p[0] for p in progress)
        count = await points(client)
        preview, _ = await call(client, "alexandria_ingest_preview", {"title": "Macbeth", "format_filter": "pdf"})
        assert preview["books"][0]["already_ingested"] is True

        again, is_error = await call(client, "alexandria_ingest", {"book_id": MACBETH, "format_preference": "pdf"})
        assert is_error and again["success"] is False and "already ingested" in again["error"]
        assert await points(client) == count

        removed, is_error = await call(client, "alexandria_remove", {"book_id": MACBETH})
        assert not is_error and removed["title"] == "Macbeth"
        assert removed["chunks_removed"] == first["chunks"] + first["parent_chunks"]
        assert await points(client) == count - removed["chunks_removed"]

        finer, is_error = await call(client, "alexandria_ingest", {
            "book_id": MACBETH, "format_preference": "pdf", "threshold": 0.4, "min_chunk_size": 60,
            "max_chunk_size": 300})
        assert not is_error, finer
        assert finer["chunks"] > first["chunks"]
        assert await points(client) == count - removed["chunks_removed"] + finer["chunks"] + finer["parent_chunks"]


async def test_two_ingests_of_one_book_at_once_write_it_once(stack: RunningStack) -> None:
    collection = "concurrent"
    coarse = {"book_id": GUIDES[0], "collection": collection}
    fine = {**coarse, "threshold": 0.9, "min_chunk_size": 20, "max_chunk_size": 200}
    async with Client(stack.mcp_url) as client:
        await client.list_tools()
        results = await asyncio.gather(call(client, "alexandria_ingest", fine), call(client, "alexandria_ingest", coarse))
        try:
            written = [result for result, is_error in results if not is_error]
            refused = [result for result, is_error in results if is_error]
            assert len(written) == 1 and len(refused) == 1, results
            assert "being ingested" in refused[0]["error"] or "already ingested" in refused[0]["error"]
            stats, _ = await call(client, "alexandria_stats", {"collection": collection})
            assert stats["qdrant"]["points_count"] == written[0]["chunks"] + written[0]["parent_chunks"]
            found, is_error = await call(client, "alexandria_query", {
                "query": "calibre books library", "collection": collection, "threshold": 0.0, "limit": 20,
                "search_mode": "lexical"})
            assert not is_error and found["result_count"] > 0, found
            texts = [r["text"] for r in found["results"]]
            assert len(texts) == len(set(texts)), "a passage came back twice"
        finally:
            await call(client, "alexandria_remove", {"book_id": GUIDES[0], "collection": collection})


async def test_batch_ingest_reports_each_book_and_progress(stack: RunningStack) -> None:
    async with Client(stack.mcp_url) as client:
        progress: list = []
        batch, is_error = await call(client, "alexandria_batch_ingest", {"book_ids": [*GUIDES, 999]}, progress)
    assert not is_error, batch
    assert (batch["total"], batch["succeeded"], batch["failed"]) == (3, 2, 1)
    rows = {row["id"]: row for row in batch["results"]}
    assert rows[7]["status"] == "success" and rows[7]["chunks"] > 0 and rows[7]["title"] == "Quick Start Guide"
    assert rows[999]["status"] == "failed" and "999" in rows[999]["error"]
    assert batch["summary"] == "📚 Batch ingest complete: 2/3 succeeded, 0 skipped, 1 failed"
    assert len(progress) >= 6 and any("Kurzanleitung" in (m or "") for _, _, m in progress)


async def test_local_file_needs_metadata_then_ingests(stack: RunningStack, inbox: Path) -> None:
    pdf = str(inbox / "julius_caesar.pdf")
    async with Client(stack.mcp_url) as client:
        asked, is_error = await call(client, "alexandria_ingest_file", {"file_path": pdf})
        assert is_error and asked["needs_metadata"] is True and asked["success"] is False
        assert asked["missing_fields"] == ["title", "author"] and asked["format"] == "PDF"
        assert asked["file_name"] == "julius_caesar.pdf" and "alexandria_ingest_file(" in asked["error"]
        done, is_error = await call(client, "alexandria_ingest_file", {
            "file_path": pdf, "title": "Julius Caesar", "author": "William Shakespeare"})
        assert not is_error, done
        assert done["title"] == "Julius Caesar" and done["format"] == "PDF" and done["chunks"] > 0


async def test_a_local_book_and_the_calibre_books_share_one_language_code(stack: RunningStack, inbox: Path) -> None:
    """The Tempest's EPUB says "en" where Calibre says "eng": stored as "eng", found by any spelling."""
    epub = str(inbox / "the_tempest.epub")
    question = "Prospero's magic and the spirit Ariel on the island"
    async with Client(stack.mcp_url) as client:
        done, is_error = await call(client, "alexandria_ingest_file", {
            "file_path": epub, "title": "The Tempest", "author": "William Shakespeare"})
        assert not is_error, done
        try:
            assert done["language"] == "eng"
            for spelling in ("eng", "en", "English"):
                found, is_error = await call(client, "alexandria_query", {
                    "query": question, "language": spelling, "threshold": 0.0, "limit": 20})
                assert not is_error and "The Tempest" in {r["book_title"] for r in found["results"]}, spelling
            german, is_error = await call(client, "alexandria_query", {
                "query": question, "language": "German", "threshold": 0.0, "limit": 20})
            assert not is_error and "The Tempest" not in {r["book_title"] for r in german["results"]}
        finally:
            await call(client, "alexandria_remove", {"file_path": epub})


@pytest.mark.parametrize("escape", ["../../etc/passwd", "/etc/passwd", "{inbox}/../outside.txt", "{inbox}/link.txt"])
async def test_paths_outside_the_allowed_folder_are_refused(stack: RunningStack, inbox: Path, escape: str) -> None:
    outside = inbox.parent / "outside.txt"
    outside.write_text("secret")
    link = inbox / "link.txt"
    if not link.exists():
        link.symlink_to(outside)
    async with Client(stack.mcp_url) as client:
        for tool in ("alexandria_ingest_file", "alexandria_test_chunking_file"):
            result, is_error = await call(client, tool, {"file_path": escape.format(inbox=inbox)})
            assert is_error and "outside the allowed folders" in result["error"], result
            assert str(inbox) in result["error"]
        listed, is_error = await call(client, "alexandria_browse_local", {"path": "/etc"})
        assert is_error and "outside the allowed folders" in listed["error"]


async def test_a_scanned_pdf_is_read_by_ocr_and_found_with_its_page(stack: RunningStack, inbox: Path) -> None:
    scan = inbox / "scanned_almanac.pdf"
    scan.write_bytes(scanned_pdf([
        ("The Almanac. In the first week of March the keeper recorded eleven ships passing the northern reef, "
        "and wrote that the herring had come early to the bay that year."),
        ("On the fourth of April a whale was seen from the lantern room, blowing twice before it turned south "
        "towards the open sea, and the keeper's daughter drew it in the margin of the logbook."),
        "In May the lamp was cleaned and its brass polished, and a new wick was fitted before the summer.",
        "By June the nights were short, and the keeper slept while the gulls quarrelled on the gallery rail.",
    ]))  # four scanned pages: read in worker processes
    async with Client(stack.mcp_url) as client:
        preview, is_error = await call(client, "alexandria_test_chunking_file", {"file_path": str(scan)})
        assert not is_error, preview
        assert {sample["locator"]["text_source"] for sample in preview["samples"]} == {"ocr"}
        progress: list = []
        done, is_error = await call(client, "alexandria_ingest_file", {
            "file_path": str(scan), "title": "The Almanac", "author": "A Keeper"}, progress)
        assert not is_error, done
        try:
            # test_chunking read the pages; the ingest finds them kept (ocr_cache.py) and reads none again
            assert [message for _, _, message in progress if message.startswith("ocr ")] == ["ocr 4/4 pages"], progress
            found, is_error = await call(client, "alexandria_query", {
                "query": "whale seen from the lantern room", "threshold": 0.0, "search_mode": "lexical"})
            assert not is_error, found
            top = found["results"][0]
            assert top["book_title"] == "The Almanac" and "whale was seen from the lantern room" in top["text"]
            locator = top["locator"]
            assert locator["page_start"] <= 2 <= locator["page_end"] and locator["text_source"] == "ocr"
        finally:
            await call(client, "alexandria_remove", {"file_path": str(scan)})


async def test_a_scanned_page_of_a_real_book_is_found_by_a_phrase_on_it(stack: RunningStack, inbox: Path) -> None:
    pride = SHARED_LIBRARY / "Jane Austen" / "Pride and Prejudice (1)" / "Pride and Prejudice - Jane Austen.pdf"
    with pymupdf.open(pride) as book:
        page = book[40]
        words = page.get_text().split()
        pixmap = page.get_pixmap(dpi=300, colorspace=pymupdf.csGRAY)
        scan = pymupdf.open()
        scan.new_page(width=page.rect.width, height=page.rect.height).insert_image(page.rect, pixmap=pixmap)
    path = inbox / "pride_page_41_scanned.pdf"
    path.write_bytes(scan.tobytes())
    start = next(i for i in range(40, len(words)) if all(w.isalpha() and w.islower() for w in words[i : i + 6]))
    phrase = " ".join(words[start : start + 6])
    async with Client(stack.mcp_url) as client:
        done, is_error = await call(client, "alexandria_ingest_file", {
            "file_path": str(path), "title": "Pride and Prejudice, page 41 (scan)", "author": "Jane Austen"})
        assert not is_error, done
        try:
            found, is_error = await call(client, "alexandria_query", {
                "query": phrase, "threshold": 0.0, "search_mode": "lexical", "limit": 3})
            top = found["results"][0]
            assert top["book_title"] == "Pride and Prejudice, page 41 (scan)", found
            assert phrase in " ".join(top["text"].split()), (phrase, top["text"])
            assert top["locator"]["page_start"] == 1 and top["locator"]["text_source"] == "ocr"
        finally:
            await call(client, "alexandria_remove", {"file_path": str(path)})


async def test_a_name_longer_than_any_file_can_have_is_refused_by_name(stack: RunningStack, inbox: Path) -> None:
    too_long = "a" * 300
    async with Client(stack.mcp_url) as client:
        for tool in ("alexandria_ingest_file", "alexandria_test_chunking_file"):
            result, is_error = await call(client, tool, {"file_path": str(inbox / f"{too_long}.epub")})
            assert is_error and "over 255 bytes long" in result["error"], result
        listed, is_error = await call(client, "alexandria_browse_local", {"path": str(inbox / too_long)})
        assert is_error and "over 255 bytes long" in listed["error"], listed


async def test_a_service_killed_during_an_ingest_restarts_and_shows_nothing_of_the_book(
        tmp_path: Path, inbox: Path) -> None:
    stack = start_stack(tmp_path / "var", SHARED_LIBRARY, inbox)
    writing = asyncio.Event()

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        if message and message.startswith("writing"):
            writing.set()

    try:
        async with Client(stack.mcp_url) as client:
            await client.list_tools()
            ingest = asyncio.ensure_future(client.call_tool("alexandria_ingest", {"book_id": HAMLET},
                                                            progress_callback=on_progress))
            await asyncio.wait_for(writing.wait(), timeout=600)
            killed = stack.services_pid()
            os.kill(killed, signal.SIGKILL)
            broken = await asyncio.wait_for(ingest, 60)
            assert broken.is_error, "the tool answers, with an error, when its service dies under it"

            await stack.until_healthy()  # the launcher restarted the services process
            assert stack.services_pid() != killed and stack.process.poll() is None
            stats, _ = await call(client, "alexandria_stats")
            assert (stats["qdrant"]["books"], stats["qdrant"]["points_count"]) == (0, 0), "no half book counted"
            found, is_error = await call(client, "alexandria_query", {
                "query": "To be, or not to be", "book_id": HAMLET, "threshold": 0.0, "search_mode": "lexical"})
            assert (is_error and "ingest" in found["error"].lower()) or found["result_count"] == 0, found
            retried, is_error = await call(client, "alexandria_ingest", {"book_id": HAMLET})
            assert not is_error, retried
            assert await points(client) == retried["chunks"] + retried["parent_chunks"], "the book counted once"
    finally:
        assert stack.stop() == 0
    written = retried["chunks"] + retried["parent_chunks"]
    assert stack.stored_points() == StoredPoints(written, 1, 1), "nothing left of the killed ingest, complete or not"
