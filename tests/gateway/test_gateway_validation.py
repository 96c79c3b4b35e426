"""Bad arguments, tool by tool: each comes back as isError in the contract's shape, naming the
parameter (and, for enums, the allowed values), and nothing reaches the services.
"""

from __future__ import annotations

from typing import Any

import pytest
from gateway_fakes import FakeBackend
from mcp import Client

from gateway.app import Gateway
from gateway.shutdown import ToolCalls
from gateway.tools import build_tools

# tool, arguments, text the error must contain
BAD_ARGUMENTS: list[tuple[str, dict[str, Any], list[str]]] = [
    ("alexandria_query", {}, ["'query' is required"]),
    ("alexandria_query", {"query": ""}, ["'query'"]),
    ("alexandria_query", {"query": "q", "limit": 0}, ["'limit'", "greater than or equal to 1"]),
    ("alexandria_query", {"query": "q", "limit": 21}, ["'limit'", "less than or equal to 20"]),
    ("alexandria_query", {"query": "q", "limit": "many"}, ["'limit'", "integer"]),
    ("alexandria_query", {"query": "q", "threshold": 1.5}, ["'threshold'"]),
    (
        "alexandria_query",
        {"query": "q", "context_mode": "deep"},
        ["'context_mode'", "'precise'", "'comprehensive'"],
    ),
    ("alexandria_query", {"query": "q", "search_mode": "fuzzy"}, ["'search_mode'", "'hybrid'", "'lexical'"]),
    ("alexandria_query", {"query": "q", "book_id": 0}, ["'book_id'"]),
    ("alexandria_query", {"query": "q", "top_k": 3}, ["'top_k'", "it takes: query, limit"]),
    ("alexandria_guardians", {"verbose": True}, ["'verbose'", "takes no parameters"]),
    ("alexandria_search", {"limit": 101}, ["'limit'", "100"]),
    ("alexandria_search", {"tags": 5}, ["'tags'", "string"]),
    ("alexandria_book", {}, ["'book_id' is required"]),
    ("alexandria_book", {"book_id": "abc"}, ["'book_id'"]),
    ("alexandria_book", {"book_id": -1}, ["'book_id'"]),
    ("alexandria_stats", {"collection": ""}, ["'collection'"]),
    ("alexandria_ingest_preview", {"format_filter": "mobi"}, ["'format_filter'", "'epub'", "'pdf'", "'any'"]),
    ("alexandria_ingest_preview", {"limit": 51}, ["'limit'", "50"]),
    ("alexandria_ingest", {"book_id": 1, "threshold": 0}, ["'threshold'", "greater than 0"]),
    (
        "alexandria_ingest",
        {"book_id": 1, "format_preference": "mobi"},
        ["'format_preference'", "'epub'", "'pdf'"],
    ),
    ("alexandria_ingest", {"book_id": 1, "hierarchical": "maybe"}, ["'hierarchical'", "boolean"]),
    ("alexandria_ingest", {"book_id": 1, "min_chunk_size": 0}, ["'min_chunk_size'"]),
    ("alexandria_batch_ingest", {"book_ids": "1 and 2"}, ["'book_ids'", "list"]),
    ("alexandria_batch_ingest", {"book_ids": [1, 0]}, ["'book_ids.1'"]),
    ("alexandria_batch_ingest", {"book_ids": list(range(1, 52))}, ["'book_ids'", "50"]),
    ("alexandria_batch_ingest", {"limit": 100}, ["'limit'"]),
    ("alexandria_test_chunking", {}, ["'book_id' is required"]),
    ("alexandria_test_chunking", {"book_id": 1, "max_chunk_size": 0}, ["'max_chunk_size'"]),
    ("alexandria_compare_chunking", {"book_id": 1, "format_preference": "txt"}, ["'format_preference'"]),
    ("alexandria_browse_local", {"recursive": "sometimes"}, ["'recursive'"]),
    ("alexandria_ingest_file", {}, ["'file_path' is required"]),
    ("alexandria_ingest_file", {"file_path": "", "title": "T"}, ["'file_path'"]),
    ("alexandria_test_chunking_file", {"file_path": "/x.epub", "threshold": 2}, ["'threshold'"]),
    ("alexandria_remove", {"book_id": "x"}, ["'book_id'"]),
    # JSON's true is no id: pydantic alone would take it as book 1.
    ("alexandria_remove", {"book_id": True}, ["'book_id' takes no true or false (got true)"]),
    ("alexandria_book", {"book_id": True}, ["'book_id' takes no true or false"]),
    ("alexandria_batch_ingest", {"book_ids": [2, True]}, ["'book_ids' takes no true or false (got [2, true])"]),
    ("alexandria_query", {"query": "q", "limit": False}, ["'limit' takes no true or false (got false)"]),
    ("alexandria_remove", {"book_id": 1, "force": True}, ["'force'"]),
]

# What the gateway itself asks at start-up (the prompts); anything else would be a tool call that got through.
START_UP_CALLS = {"ListGuardians", "ListResponsePatterns"}


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    BAD_ARGUMENTS,
    ids=[f"{t}-{'-'.join(a) or 'none'}" for t, a, _ in BAD_ARGUMENTS],
)
async def test_bad_arguments_are_refused_naming_the_parameter(
    served_gateway: Gateway, backend: FakeBackend, tool: str, arguments: dict[str, Any], expected: list[str]
) -> None:
    async with Client(served_gateway.mcp) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error
    data = result.structured_content
    assert data["success"] is False
    for text in expected:
        assert text in data["error"], data["error"]
    assert set(backend.requests) <= START_UP_CALLS


def test_every_tool_is_in_the_suite() -> None:
    assert {tool.name for tool in build_tools(4096, ToolCalls(30.0))} == {tool for tool, _, _ in BAD_ARGUMENTS}
