"""A Calibre library whose metadata.db cannot be read (a copy cut short): the stack comes up all the same, every
catalog tool and `alexandria status` say why, the other tools keep working, and the catalog serves once the
file is whole again."""

from __future__ import annotations

from pathlib import Path

from catalog.scratch import copy_library
from mcp import Client

from alexandria_stack.layout import SAMPLE_LIBRARY
from e2e.mcp_calls import call
from e2e.stack import start_stack

REASON = "cannot be read as a Calibre database (database disk image is malformed)"
LOGBOOK = """# The Keeper's Logbook

## The Storm

On the second night a storm came from the west, and the keeper watched the copper weathervane spin above
the harbour until the morning bells rang. The boats stayed in, and the lamp burned until dawn.
"""
CATALOG_TOOLS = {
    "alexandria_search": {"author": "holloway"},
    "alexandria_book": {"book_id": 1},
    "alexandria_ingest_preview": {},
    "alexandria_ingest": {"book_id": 1},
}


async def test_a_library_that_cannot_be_read_leaves_the_stack_up_saying_why(tmp_path: Path) -> None:
    library = copy_library(SAMPLE_LIBRARY, tmp_path / "library")
    database = library / "metadata.db"
    whole = database.read_bytes()
    database.write_bytes(whole[:8192])
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "logbook.md").write_text(LOGBOOK)
    stack = start_stack(tmp_path / "var", library, inbox, {"CATALOG_RECHECK_INTERVAL_S": "0.2"})
    try:
        status = stack.cli("status")
        assert status.returncode == 1, status
        assert "NOT_SERVING" in status.stdout and REASON in status.stdout and "CALIBRE_LIBRARY_PATH" in status.stdout
        async with Client(stack.mcp_url) as client:
            for tool, arguments in CATALOG_TOOLS.items():
                answer, is_error = await call(client, tool, arguments)
                assert is_error and REASON in answer["error"], (tool, answer)
            stats, is_error = await call(client, "alexandria_stats")
            assert not is_error and REASON in stats["calibre"]["error"] and stats["qdrant"]["connected"], stats
            guardians, is_error = await call(client, "alexandria_guardians")
            assert not is_error and guardians["guardians"], guardians
            ingested, is_error = await call(client, "alexandria_ingest_file", {
                "file_path": str(inbox / "logbook.md"), "title": "The Keeper's Logbook", "author": "Edith Marlow"})
            assert not is_error and ingested["success"], ingested
            found, is_error = await call(client, "alexandria_query", {
                "query": "copper weathervane", "threshold": 0.0, "search_mode": "lexical"})
            assert not is_error and found["result_count"] > 0, found

            database.write_bytes(whole)
            await stack.until_healthy()  # the catalog looks at the library again, with no call needed
            books, is_error = await call(client, "alexandria_search", {"author": "holloway"})
            assert not is_error and books["count"] > 0, books
        assert stack.cli("status").returncode == 0
        assert stack.process.poll() is None, "the launcher keeps running"
    finally:
        assert stack.stop() == 0
    assert not [line for line in stack.log if "Traceback" in line], "".join(stack.log)
