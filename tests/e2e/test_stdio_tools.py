"""Every one of the fourteen tools over stdio (`alexandria mcp`), as Claude Code's .mcp.json runs it."""

from __future__ import annotations

import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

from e2e.mcp_calls import call
from e2e.stack import RunningStack

GUIDE_FR = 9  # the French quick-start guide: small, so every tool runs quickly


async def test_every_tool_over_stdio(stack: RunningStack, inbox: Path) -> None:
    params = StdioServerParameters(
        command=str(Path(sys.executable).with_name("alexandria")), args=["mcp"], env=stack.env
    )
    tempest = str(inbox / "the_tempest.epub")
    async with Client(params) as client:
        found, _ = await call(client, "alexandria_search", {"language": "fra"})
        assert [b["id"] for b in found["books"]] == [GUIDE_FR]
        book, _ = await call(client, "alexandria_book", {"book_id": GUIDE_FR})
        assert book["book"]["title"] == "Guide de démarrage rapide"
        preview, _ = await call(client, "alexandria_ingest_preview", {"language": "fra"})
        assert preview["books"][0]["selected_format"] == "EPUB"
        tested, is_error = await call(client, "alexandria_test_chunking", {"book_id": GUIDE_FR})
        assert not is_error and tested["stats"]["total_chunks"] >= 1 and 1 <= len(tested["samples"]) <= 3
        compared, is_error = await call(client, "alexandria_compare_chunking", {"book_id": GUIDE_FR})
        assert not is_error and [c["threshold"] for c in compared["comparisons"]] == [
            0.4,
            0.45,
            0.5,
            0.55,
            0.6,
        ]
        assert compared["recommendation"] in {0.4, 0.45, 0.5, 0.55, 0.6} and compared["recommendation_reason"]
        ingested, is_error = await call(client, "alexandria_ingest", {"book_id": GUIDE_FR})
        assert not is_error and ingested["language"] == "fra", ingested
        batch, _ = await call(client, "alexandria_batch_ingest", {"book_ids": [GUIDE_FR]})
        assert batch["skipped"] == 1 and batch["results"][0]["status"] == "skipped"
        hits, is_error = await call(
            client,
            "alexandria_query",
            {"query": "bibliothèque calibre", "book_id": GUIDE_FR, "threshold": 0.2},
        )
        assert not is_error and hits["results"] and hits["results"][0]["book_id"] == GUIDE_FR
        assert hits["results"][0]["link"].startswith(f"calibre://view-book/_hex_-{b'calibre-library'.hex()}/9/EPUB"
                                                     "?open_at=search%253A"), hits["results"][0]
        guardians, _ = await call(client, "alexandria_guardians")
        assert guardians["default"] == "zec"
        stats, _ = await call(client, "alexandria_stats")
        assert stats["qdrant"]["books"] >= 1
        listed, _ = await call(client, "alexandria_browse_local", {"recursive": True})
        assert "a_midsummer_nights_dream.epub" in {f["name"] for f in listed["files"]}
        chunked, is_error = await call(client, "alexandria_test_chunking_file", {"file_path": tempest})
        assert not is_error and chunked["title"] == "The Tempest"
        local, is_error = await call(
            client, "alexandria_ingest_file", {"file_path": tempest, "author": "William Shakespeare"}
        )
        assert not is_error and local["author"] == "William Shakespeare"
        removed, is_error = await call(client, "alexandria_remove", {"file_path": tempest})
        assert not is_error and removed["chunks_removed"] == local["chunks"] + local["parent_chunks"]
        removed, is_error = await call(client, "alexandria_remove", {"book_id": GUIDE_FR})
        assert not is_error and removed["title"] == "Guide de démarrage rapide"
