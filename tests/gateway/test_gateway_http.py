"""The HTTP transport on a real socket: tokens and scopes, the body and argument limits, Host header
protection, the health endpoint, and the refusal to listen beyond loopback without tokens.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from gateway_fakes import FakeBackend, gateway_settings
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from starlette.responses import PlainTextResponse
from starlette.types import Receive, Scope, Send
from waiting import wait_until

from alexandria.errors import FailedPrecondition
from alexandria.grpc_server import ServiceServer
from gateway.app import Gateway, create_app
from gateway.binding import bind_socket
from gateway.http import BearerTokenGuard, create_http_app, http_server

TOKENS = {"read-secret": ["read"], "full-secret": ["read", "ingest"]}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


@asynccontextmanager
async def serving(gateway: Gateway) -> AsyncIterator[str]:
    """Serve the gateway over HTTP on a free port of its GATEWAY_HOST; yields its base URL."""
    host = gateway.settings.gateway_host
    server = http_server(gateway)
    sock = bind_socket(host, 0)
    # The socket already listens, so requests queue until uvicorn accepts them: nothing to wait for.
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task


@asynccontextmanager
async def mcp_client(
    url: str, headers: dict[str, str] | None = None, mode: str = "auto"
) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers=headers or {}, timeout=30) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode) as client,
    ):
        yield client


@pytest.mark.asyncio
async def test_connections_to_the_gateway_socket_send_without_nagle_delay() -> None:
    # With Nagle on, each streamed response's last chunk waited ~40 ms for the client's delayed ACK.
    nodelay: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            accepted = transport.get_extra_info("socket")
            nodelay.set_result(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    sock = bind_socket("127.0.0.1", 0)
    server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
    try:
        _reader, writer = await asyncio.open_connection("127.0.0.1", sock.getsockname()[1])
        assert await asyncio.wait_for(nodelay, 10) != 0
        writer.close()
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture
def tokened_gateway(socket_dir: Path, fake_servers: dict[str, ServiceServer]) -> Gateway:
    return create_app(gateway_settings(socket_dir, gateway_tokens=TOKENS))


@pytest.mark.asyncio
async def test_requests_without_a_valid_token_get_401(tokened_gateway: Gateway) -> None:
    async with serving(tokened_gateway) as url, httpx2.AsyncClient() as http:
        body = tool_call("alexandria_query", {"query": "lamp"})
        missing = await http.post(f"{url}/mcp", json=body, headers=ACCEPT)
        wrong = await http.post(f"{url}/mcp", json=body, headers={**ACCEPT, "Authorization": "Bearer nope"})
        not_bearer = await http.post(
            f"{url}/mcp", json=body, headers={**ACCEPT, "Authorization": "Basic cmVhZA=="}
        )
    for response in (missing, wrong, not_bearer):
        assert response.status_code == 401
        challenge = response.headers["www-authenticate"]
        assert challenge.startswith("Bearer") and 'error="invalid_token"' in challenge
        assert "error_description=\"A valid 'Authorization: Bearer <token>'" in challenge
        assert "Authorization: Bearer" in response.json()["error"]["message"]


@pytest.mark.asyncio
async def test_a_read_token_cannot_call_an_ingest_tool(
    tokened_gateway: Gateway, backend: FakeBackend
) -> None:
    async with serving(tokened_gateway) as url, httpx2.AsyncClient() as http:
        headers = {**ACCEPT, "Authorization": "Bearer read-secret"}
        for tool in ("alexandria_ingest", "alexandria_remove", "not_a_tool"):
            response = await http.post(f"{url}/mcp", json=tool_call(tool, {"book_id": 1}), headers=headers)
            assert response.status_code == 403
            assert 'error="insufficient_scope"' in response.headers["www-authenticate"]
            error = response.json()
            assert error["id"] == 1 and f"lacks the 'ingest' scope that {tool} needs" in error["error"]["message"]
    assert "IngestBook" not in backend.requests and "RemoveBook" not in backend.requests


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["auto", "legacy"])  # legacy: the initialize handshake today's clients use
async def test_the_right_token_calls_tools_with_progress_over_http(
    tokened_gateway: Gateway, backend: FakeBackend, mode: str
) -> None:
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async with serving(tokened_gateway) as url:
        async with mcp_client(url, {"Authorization": "Bearer read-secret"}, mode) as client:
            assert len((await client.list_tools()).tools) == 14
            query = await client.call_tool("alexandria_query", {"query": "lamp"})
            assert not query.is_error and query.structured_content["result_count"] == 1
        async with mcp_client(url, {"Authorization": "Bearer full-secret"}, mode) as client:
            ingest = await client.call_tool(
                "alexandria_ingest", {"book_id": 1}, progress_callback=on_progress
            )
            assert not ingest.is_error and ingest.structured_content["chunks"] == 202
    assert backend.last("IngestBook").book_id == 1
    assert "embedded 100/202" in progress


@pytest.mark.asyncio
async def test_health_reports_each_service(
    served_gateway: Gateway, fake_servers: dict[str, ServiceServer]
) -> None:
    async with serving(served_gateway) as url, httpx2.AsyncClient() as http:
        healthy = await http.get(f"{url}/health")
        assert healthy.status_code == 200
        assert healthy.json() == {
            "status": "ok",
            "services": {"catalog": "SERVING", "ingest": "SERVING", "query": "SERVING"},
        }
        await fake_servers["ingest"].health.set_serving(False)
        await fake_servers["query"].stop(0)
        degraded = await http.get(f"{url}/health")
    assert degraded.status_code == 503
    assert degraded.json()["services"] == {
        "catalog": "SERVING",
        "ingest": "NOT_SERVING",
        "query": "UNREACHABLE",
    }


@pytest.mark.asyncio
async def test_health_is_open_on_loopback_even_with_tokens(tokened_gateway: Gateway) -> None:
    async with serving(tokened_gateway) as url, httpx2.AsyncClient() as http:
        assert (await http.get(f"{url}/health")).status_code == 200


async def _ok(scope: Scope, receive: Receive, send: Send) -> None:
    await PlainTextResponse("ok")(scope, receive, send)


@pytest.mark.asyncio
async def test_health_needs_a_token_from_beyond_loopback() -> None:
    guard = BearerTokenGuard(_ok, TOKENS, scope_of=lambda name: "read")
    transport = httpx2.ASGITransport(app=guard, client=("10.1.2.3", 40000))
    async with httpx2.AsyncClient(transport=transport, base_url="http://gateway:8765") as http:
        assert (await http.get("/health")).status_code == 401
        assert (await http.get("/health", headers={"Authorization": "Bearer read-secret"})).status_code == 200


def test_listening_beyond_loopback_without_tokens_is_refused(socket_dir: Path) -> None:
    with pytest.raises(FailedPrecondition, match="GATEWAY_TOKENS"):
        create_http_app(create_app(gateway_settings(socket_dir, gateway_host="0.0.0.0")))
    create_http_app(create_app(gateway_settings(socket_dir, gateway_host="0.0.0.0", gateway_tokens=TOKENS)))
    create_http_app(create_app(gateway_settings(socket_dir, gateway_host="localhost")))


@pytest.mark.asyncio
async def test_unknown_host_headers_are_rejected(
    socket_dir: Path, fake_servers: dict[str, ServiceServer]
) -> None:
    gateway = create_app(gateway_settings(socket_dir, gateway_allowed_hosts=["gateway:8765"]))
    async with serving(gateway) as url:
        async with httpx2.AsyncClient() as http:
            rebound = await http.post(
                f"{url}/mcp",
                json=tool_call("alexandria_stats", {}),
                headers={**ACCEPT, "Host": "evil.example:8765"},
            )
            assert rebound.status_code == 421
        async with mcp_client(url, {"Host": "gateway:8765"}) as client:
            assert len((await client.list_tools()).tools) == 14


@pytest.mark.asyncio
async def test_a_body_over_the_limit_gets_413(tokened_gateway: Gateway, backend: FakeBackend) -> None:
    query = "x" * (tokened_gateway.settings.gateway_max_body_bytes + 1)
    async with serving(tokened_gateway) as url, httpx2.AsyncClient() as http:
        response = await http.post(
            f"{url}/mcp",
            content=json.dumps(tool_call("alexandria_query", {"query": query})),
            headers={**ACCEPT, "Authorization": "Bearer read-secret"},
        )
    assert response.status_code == 413
    assert "Search" not in backend.requests


@pytest.mark.asyncio
async def test_a_one_megabyte_query_under_the_body_limit_is_refused_by_name(
    socket_dir: Path, fake_servers: dict[str, ServiceServer], backend: FakeBackend
) -> None:
    gateway = create_app(gateway_settings(socket_dir, gateway_max_body_bytes=4 * 1024 * 1024))
    async with serving(gateway) as url, mcp_client(url) as client:
        result = await client.call_tool("alexandria_query", {"query": "x" * 1_000_000})
    assert result.is_error and "'query'" in result.structured_content["error"]
    assert "Search" not in backend.requests


@pytest.mark.asyncio
async def test_an_mcp_client_shows_why_its_token_was_refused(tokened_gateway: Gateway) -> None:
    async with serving(tokened_gateway) as url:
        # The client's connection handshake fails inside its task groups, hence the nesting.
        refused = pytest.RaisesGroup(
            pytest.RaisesExc(MCPError, match="Authorization: Bearer <token>"), flatten_subgroups=True
        )
        with refused:
            async with mcp_client(url, {"Authorization": "Bearer nope"}) as client:
                await client.list_tools()
        async with mcp_client(url, {"Authorization": "Bearer read-secret"}) as client:
            with pytest.raises(MCPError, match="lacks the 'ingest' scope that alexandria_ingest needs"):
                await client.call_tool("alexandria_ingest", {"book_id": 1})


@pytest.mark.asyncio
async def test_deeply_nested_json_with_a_token_is_a_parse_error(tokened_gateway: Gateway) -> None:
    async with serving(tokened_gateway) as url, httpx2.AsyncClient() as http:
        response = await http.post(
            f"{url}/mcp", content="[" * 100_000, headers={**ACCEPT, "Authorization": "Bearer full-secret"}
        )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700


@pytest.mark.asyncio
async def test_a_gateway_bound_to_another_loopback_address_accepts_its_own_name(
    socket_dir: Path, fake_servers: dict[str, ServiceServer]
) -> None:
    gateway = create_app(gateway_settings(socket_dir, gateway_host="127.0.0.2", gateway_tokens=TOKENS))
    async with serving(gateway) as url:
        assert url.startswith("http://127.0.0.2:")
        async with mcp_client(url, {"Authorization": "Bearer read-secret"}) as client:
            assert len((await client.list_tools()).tools) == 14


async def _stop_during_an_ingest(gateway: Gateway, backend: FakeBackend, finish: bool) -> Any:
    """Start an ingest, stop the gateway the way SIGINT/SIGTERM do while the ingest runs, then let it
    finish (or not); returns what the client got."""
    backend.hold = asyncio.Event()
    started = asyncio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        started.set()

    server = http_server(gateway)
    sock = bind_socket("127.0.0.1", 0)
    serving_task = asyncio.create_task(server.serve(sockets=[sock]))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        async with mcp_client(url) as client:
            await client.list_tools()  # the client checks results against the tools' schemas, listed now
            ingest = asyncio.ensure_future(
                client.call_tool("alexandria_ingest", {"book_id": 1}, progress_callback=on_progress)
            )
            await asyncio.wait_for(started.wait(), 30)
            server.should_exit = True  # what uvicorn's SIGINT/SIGTERM handler does
            await wait_until(lambda: gateway.calls.stopping, what="the gateway to begin stopping")
            if finish:
                backend.hold.set()
            return await asyncio.wait_for(ingest, 60)
    finally:
        server.should_exit = True
        await serving_task


@pytest.mark.asyncio
async def test_a_call_running_when_the_gateway_stops_finishes_and_answers(
    socket_dir: Path, fake_servers: dict[str, ServiceServer], backend: FakeBackend
) -> None:
    gateway = create_app(gateway_settings(socket_dir, gateway_shutdown_grace_s=30))
    result = await _stop_during_an_ingest(gateway, backend, finish=True)
    assert not result.is_error and result.structured_content["chunks"] == 202
    assert backend.cancelled == []


@pytest.mark.asyncio
async def test_a_call_still_running_after_the_grace_period_is_cancelled_with_a_clear_error(
    socket_dir: Path, fake_servers: dict[str, ServiceServer], backend: FakeBackend
) -> None:
    gateway = create_app(gateway_settings(socket_dir, gateway_shutdown_grace_s=0.5))
    result = await _stop_during_an_ingest(gateway, backend, finish=False)
    assert result.is_error
    error = result.structured_content["error"]
    assert "within the 0.5 s grace period (GATEWAY_SHUTDOWN_GRACE_S)" in error and "alexandria_ingest" in error
    await wait_until(lambda: backend.cancelled, what="the cancellation to travel to the service")
    assert backend.cancelled == ["IngestBook"]


@pytest.mark.asyncio
async def test_a_stopping_gateway_refuses_new_calls(served_gateway: Gateway) -> None:
    async with Client(served_gateway.mcp) as client:
        served_gateway.calls.stop()
        result = await client.call_tool("alexandria_stats", {})
    assert result.is_error and "shutting down" in result.structured_content["error"]
