"""Every catalog field of every book of the shared library, through the MCP gateway,
against what Calibre's own `calibredb list` reports (tests/catalog/expected_shared_library.json)."""

from __future__ import annotations

import pytest
from catalog import expected
from conftest import SHARED_LIBRARY
from mcp import Client

from e2e.mcp_calls import call
from e2e.stack import RunningStack

pytestmark = pytest.mark.usefixtures("shared_corpus")


async def test_book_and_search_fields_of_every_book(stack: RunningStack) -> None:
    rows = expected.load_rows("shared")
    async with Client(stack.mcp_url) as client:
        for row in rows:
            book, is_error = await call(client, "alexandria_book", {"book_id": row["id"]})
            assert not is_error and book["error"] is None
            assert book["book"] == expected.book_fields(row), row["title"]
            found, is_error = await call(client, "alexandria_search", {"title": row["title"]})
            assert not is_error and expected.summary_fields(row) in found["books"], row["title"]
        everything, _ = await call(client, "alexandria_search", {"limit": 100})
    assert everything["count"] == len(rows)
    assert everything["books"] == [expected.summary_fields(r) for r in sorted(rows, key=lambda r: r["id"])]


async def test_stats_calibre_half(stack: RunningStack) -> None:
    async with Client(stack.mcp_url) as client:
        stats, is_error = await call(client, "alexandria_stats")
    assert not is_error
    assert {k: v for k, v in stats["calibre"].items() if k != "error"} == expected.stats_fields(
        expected.load_rows("shared"))


@pytest.mark.parametrize("format_filter", ["epub", "pdf", "any"])
async def test_preview_fields_of_every_book(stack: RunningStack, format_filter: str) -> None:
    rows = {r["id"]: r for r in expected.load_rows("shared")}
    async with Client(stack.mcp_url) as client:
        preview, is_error = await call(client, "alexandria_ingest_preview",
                                       {"format_filter": format_filter, "limit": 50})
    assert not is_error and preview["format_filter"] == format_filter
    assert preview["count"] == len(rows)
    for book in preview["books"]:
        want = expected.preview_fields(rows[book["id"]], SHARED_LIBRARY, format_filter,
                                       already_ingested=book["already_ingested"])
        assert book == want


async def test_search_filters_and_bad_ids(stack: RunningStack) -> None:
    async with Client(stack.mcp_url) as client:
        plays, _ = await call(client, "alexandria_search", {"tags": "Drama, Tragedy"})
        german, _ = await call(client, "alexandria_search", {"language": "deu"})
        middleton, _ = await call(client, "alexandria_search", {"author": "MIDDLETON"})
        missing, is_error = await call(client, "alexandria_book", {"book_id": 4242})
    assert [b["id"] for b in plays["books"]] == [5, 6]
    assert [b["title"] for b in german["books"]] == ["Kurzanleitung"]
    assert [b["id"] for b in middleton["books"]] == [6]
    assert is_error and missing["success"] is False and "4242" in missing["error"]
