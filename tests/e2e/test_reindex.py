"""`alexandria reindex` against a real stack: books ingested under one model, the stack restarted under another
(the same MiniLM quantised to int8, a model of another name), a query refused naming the command, the reindex
run while searches keep answering from the old collection, and afterwards the collection holding exactly the
books that could be read, under the new model, the old collection gone.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from catalog.scratch import copy_library, edit_highlights
from mcp import Client
from waiting import wait_until

from alexandria_stack.layout import SAMPLE_LIBRARY as LIBRARY
from e2e.mcp_calls import call
from e2e.stack import RunningStack, start_stack
from e2e.test_sync import delete_book

COLLECTION = "alexandria"  # the default collection
NOTES = """# Harbour notes

The lighthouse keeper counted the herring boats every evening before the fog rolled in from the cape.

When the storm broke the old pier, the fishermen carried their nets up the hill to the chapel.

Every spring the keeper painted the lamp room white and wrote the names of the lost boats on the wall.
"""


def start_reindex(stack: RunningStack) -> subprocess.Popen:
    return subprocess.Popen([str(Path(sys.executable).with_name("alexandria")), "reindex"], env=stack.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


async def stats(stack: RunningStack) -> dict:
    async with Client(stack.mcp_url) as client:
        result, is_error = await call(client, "alexandria_stats")
    assert not is_error, result
    return result["qdrant"]


async def query(stack: RunningStack, mode: str) -> tuple[dict, bool]:
    async with Client(stack.mcp_url) as client:
        return await call(client, "alexandria_query", {"query": "lighthouse keeper herring boats",
                                                       "search_mode": mode, "guardian": "none"})


async def test_reindex_rebuilds_the_collection_under_the_running_model(tmp_path: Path) -> None:
    library = copy_library(LIBRARY, tmp_path / "library")
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "harbour_notes.md").write_text(NOTES)
    data_dir = tmp_path / "var"
    edit_highlights(library, "add", 1, "The stairs had one hundred and twelve steps.", "counted as a child", "1")

    # The torch MiniLM and its int8 quantisation: `auto` would start from `fast` and, once a precision is
    # named, from `baseline` (profiles.py), a change of backend too.
    first = start_stack(data_dir, library, inbox, extra_env={"EMBEDDER_PROFILE": "baseline"})
    try:
        ingested = first.cli("ingest", "--all")
        assert ingested.returncode == 0 and "4 added" in ingested.stdout, ingested
        notes = first.cli("ingest", "--file", str(inbox / "harbour_notes.md"), "--title", "Harbour Notes",
                          "--author", "Ann Keeper")
        assert notes.returncode == 0, notes
        before = await stats(first)
    finally:
        assert first.stop() in (0, 130)
    assert before["books"] == 5
    old_model = before["model"]
    delete_book(library, 3)  # its source is gone: the reindex reports it and leaves it out

    stack = start_stack(data_dir, library, inbox, extra_env={"EMBEDDER_PROFILE": "baseline", "EMBEDDER_QUANTIZE": "int8"})
    try:
        refused, is_error = await query(stack, "hybrid")
        assert is_error and "alexandria reindex --collection alexandria" in refused["error"], refused
        assert old_model in refused["error"] and f"{old_model}+int8" in refused["error"], refused
        noted = await stats(stack)
        assert "alexandria reindex --collection alexandria" in noted["model_note"], noted
        status = stack.cli("status")
        assert f"holds vectors of {old_model}" in status.stdout and "alexandria reindex" in status.stdout, status
        lexical = stack.cli("query", "lighthouse keeper herring boats", "--mode", "lexical")
        assert lexical.returncode == 0 and "Harbour Notes" in lexical.stdout, lexical

        state = data_dir / "sync" / f"{COLLECTION}.reindex.json"
        reindex = start_reindex(stack)
        await wait_until(lambda: state.exists() or reindex.poll() is not None, what="the reindex to write its state",
                         timeout_s=120, interval_s=0.05)
        assert state.exists(), reindex.communicate()
        during, is_error = await query(stack, "lexical")
        during_stats = await stats(stack)
        assert state.exists(), "the query ran while the reindex was under way"
        assert not is_error and during["result_count"] > 0, during
        assert during["results"][0]["book_title"] == "Harbour Notes", during
        assert during_stats["model"] == old_model and during_stats["books"] == 5, "the old collection answers"

        stdout, stderr = reindex.communicate(timeout=600)
        assert reindex.returncode == 0, (stdout, stderr)
        assert "reindex" in stderr and "ETA" in stderr, "progress with an ETA on stderr"
        assert stdout.count("  gone    ") == 1 and "deleted from the Calibre library" in stdout, stdout
        assert "now holds 4 books" in stdout and f"made by {old_model}+int8 (was {old_model}): 4 rebuilt" in stdout
        assert not state.exists()

        after = await stats(stack)
        assert after["books"] == 4 and after["model"] == f"{old_model}+int8", after
        assert not after.get("model_note"), after
        answered, is_error = await query(stack, "hybrid")
        assert not is_error and answered["results"][0]["book_title"] == "Harbour Notes", answered
        async with Client(stack.mcp_url) as client:  # the reader's highlight came along, embedded anew
            highlights, is_error = await call(client, "alexandria_query", {
                "query": "how many steps to the lamp", "search_in": "highlights", "threshold": 0.0})
        assert not is_error and [r["note"] for r in highlights["results"]] == ["counted as a child"], highlights
    finally:
        assert stack.stop() in (0, 130)

    stored = stack.stored_points(COLLECTION)
    assert (stored.books, stored.versions, stored.points) == (4, 4, after["points_count"]), stored
    aliases = json.loads((data_dir / "store" / "aliases.json").read_text())
    collections = sorted(p.name for p in (data_dir / "store").iterdir() if p.is_dir())
    assert collections == [aliases[COLLECTION]], "the old collection is dropped"
