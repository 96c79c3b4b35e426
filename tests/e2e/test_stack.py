"""The stack as a new user meets it: up, healthy, fourteen tools on both transports, clean stop."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import httpx
import pytest
from conftest import SHARED_LIBRARY, require_shared
from mcp import Client, StdioServerParameters

from e2e.mcp_calls import call
from e2e.stack import RunningStack, start_stack

TOOLS = {
    "alexandria_query", "alexandria_guardians", "alexandria_search", "alexandria_book", "alexandria_stats",
    "alexandria_ingest_preview", "alexandria_ingest", "alexandria_batch_ingest", "alexandria_test_chunking",
    "alexandria_compare_chunking", "alexandria_browse_local", "alexandria_ingest_file",
    "alexandria_test_chunking_file", "alexandria_remove",
}


def test_health_endpoint_reports_every_service_serving(stack: RunningStack) -> None:
    response = httpx.get(f"{stack.url}/health", timeout=10)
    assert response.status_code == 200
    assert response.json()["services"] == {name: "SERVING" for name in ("catalog", "ingest", "query")}


async def test_http_lists_exactly_the_fourteen_tools(stack: RunningStack) -> None:
    async with Client(stack.mcp_url) as client:
        tools = (await client.list_tools()).tools
    assert {t.name for t in tools} == TOOLS
    remove = next(t for t in tools if t.name == "alexandria_remove")
    assert remove.annotations.destructive_hint is True
    query = next(t for t in tools if t.name == "alexandria_query")
    assert query.annotations.read_only_hint is True


async def test_stdio_gateway_against_the_running_stack(stack: RunningStack) -> None:
    params = StdioServerParameters(
        command=str(Path(sys.executable).with_name("alexandria")), args=["mcp"], env=stack.env
    )
    async with Client(params) as client:
        tools = (await client.list_tools()).tools
        stats, is_error = await call(client, "alexandria_stats")
    assert {t.name for t in tools} == TOOLS
    assert not is_error and stats["calibre"]["total_books"] == 9


async def test_ctrl_c_stops_every_process_and_keeps_the_store(tmp_path: Path, inbox: Path) -> None:
    first = start_stack(tmp_path / "var", SHARED_LIBRARY, inbox)
    try:
        async with Client(first.mcp_url) as client:
            ingested, is_error = await call(
                client, "alexandria_ingest_file",
                {"file_path": str(inbox / "twelfth_night_act1.md"), "author": "William Shakespeare"})
            assert not is_error, ingested
            before, _ = await call(client, "alexandria_stats")
    finally:
        children = list(first.children())
        assert first.stop(signal.SIGINT) == 0
    assert len(children) == 3
    assert not [pid for pid in children if Path(f"/proc/{pid}").exists()], "a process was left behind"
    second = start_stack(tmp_path / "var", SHARED_LIBRARY, inbox)  # nobody holds the store any more
    try:
        async with Client(second.mcp_url) as client:
            after, _ = await call(client, "alexandria_stats")
        assert after["qdrant"]["points_count"] == before["qdrant"]["points_count"] > 0
    finally:
        assert second.stop(signal.SIGTERM) == 0


@pytest.fixture(autouse=True)
def _needs_shared() -> None:
    require_shared()
