"""Errors through the MCP SDK's own client: a service's error, a stopped service and an oversized argument each come
back as isError in the contract's shape, leaking no internals."""

from __future__ import annotations

from pathlib import Path

import pytest
from gateway_fakes import FakeBackend, assert_clean_error
from mcp import Client

from alexandria.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from alexandria.grpc_server import ServiceServer
from gateway.app import Gateway


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (
            NotFound("Book 99 is not in the library; find ids with alexandria_search."),
            "Book 99 is not in the library",
        ),
        (InvalidArgument("min_chunk_size (900) is above max_chunk_size (800)."), "min_chunk_size (900)"),
        (Unavailable("The Calibre library is busy; try again in a moment."), "The Calibre library is busy"),
        (RuntimeError("secret at 10.9.8.7"), "Internal error in the catalog service"),
    ],
    ids=["not-found", "invalid-argument", "unavailable", "crash"],
)
async def test_service_errors_become_contract_errors_without_internals(
    served_gateway: Gateway, backend: FakeBackend, failure: BaseException, expected: str
) -> None:
    async with Client(served_gateway.mcp) as client:
        backend.failures["GetBook"] = failure
        data = assert_clean_error(await client.call_tool("alexandria_book", {"book_id": 99}))
        assert expected in data["error"]


@pytest.mark.asyncio
async def test_a_streaming_tool_reports_the_services_error(
    served_gateway: Gateway, backend: FakeBackend
) -> None:
    async with Client(served_gateway.mcp) as client:
        backend.failures["IngestBook"] = FailedPrecondition(
            "Book 1 is already in 'alexandria'; remove it first."
        )
        data = assert_clean_error(await client.call_tool("alexandria_ingest", {"book_id": 1}))
        assert data["error"] == "Book 1 is already in 'alexandria'; remove it first."


@pytest.mark.asyncio
async def test_a_service_that_is_down_gives_a_clean_message(
    served_gateway: Gateway, fake_servers: dict[str, ServiceServer], socket_dir: Path
) -> None:
    async with Client(served_gateway.mcp) as client:
        await fake_servers["ingest"].stop(0)
        data = assert_clean_error(
            await client.call_tool("alexandria_browse_local", {}), leaked=str(socket_dir)
        )
        assert data["error"].startswith("The ingest service is unavailable (stopped, or restarting")


@pytest.mark.asyncio
async def test_a_one_megabyte_query_is_refused_before_any_call(
    served_gateway: Gateway, backend: FakeBackend
) -> None:
    async with Client(served_gateway.mcp) as client:
        result = await client.call_tool("alexandria_query", {"query": "x" * 1_000_000})
        data = assert_clean_error(result)
        assert "'query'" in data["error"] and "4096" in data["error"]
        assert "Search" not in backend.requests


@pytest.mark.asyncio
async def test_long_strings_inside_lists_are_refused_too(
    served_gateway: Gateway, backend: FakeBackend
) -> None:
    async with Client(served_gateway.mcp) as client:
        result = await client.call_tool("alexandria_batch_ingest", {"book_ids": ["1" * 5000]})
        assert "'book_ids'" in assert_clean_error(result)["error"]
        assert "BatchIngest" not in backend.requests
