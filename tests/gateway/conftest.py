"""Fixtures for the gateway tests: fake services on unix sockets and the gateway in front of them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from gateway_fakes import FakeBackend, gateway_settings, start_fake

from alexandria.grpc_server import ServiceServer
from gateway.app import Gateway, create_app

SERVICES = ("catalog", "ingest", "query")


@pytest.fixture
def socket_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # A short path: unix socket paths are limited to ~100 characters.
    return tmp_path_factory.mktemp("gw")


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture
async def fake_servers(socket_dir: Path, backend: FakeBackend) -> AsyncIterator[dict[str, ServiceServer]]:
    servers = {name: await start_fake(name, socket_dir, backend) for name in SERVICES}
    yield servers
    for server in servers.values():
        await server.stop(0)


@pytest.fixture
def gateway(socket_dir: Path) -> Gateway:
    return create_app(gateway_settings(socket_dir))


@pytest.fixture
def served_gateway(gateway: Gateway, fake_servers: dict[str, ServiceServer]) -> Gateway:
    """The gateway with its three fake services running. Tests connect with `async with Client(gateway.mcp)`:
    the client's task group must be entered and left in the same task, which a fixture cannot promise."""
    return gateway
