"""`python -m gateway` as a subprocess, the way the launcher, compose and MCP clients start it."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from gateway_fakes import socket_address
from mcp import Client, StdioServerParameters

from alexandria.grpc_server import ServiceServer
from alexandria.settings import REPO_ROOT

URL_LINE = re.compile(r"listening on (http://\S+)/mcp")
START_TIMEOUT_S = 60


def gateway_env(socket_dir: Path) -> dict[str, str]:
    """This environment without any GATEWAY_* setting, pointed at the fake services."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GATEWAY_")}
    for name in ("catalog", "ingest", "query"):
        env[f"{name.upper()}_ADDR"] = socket_address(socket_dir, name)
    return env


@pytest.mark.asyncio
async def test_http_mode_logs_its_bound_url_on_stderr(
    socket_dir: Path, fake_servers: dict[str, ServiceServer]
) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "gateway", "--transport", "http", "--port", "0"),
        env=gateway_env(socket_dir),
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:

        async def announced_url() -> str:
            async for line in process.stderr:
                if match := URL_LINE.search(line.decode()):
                    return match.group(1)
            raise AssertionError("the gateway exited without announcing its URL")

        url = await asyncio.wait_for(announced_url(), START_TIMEOUT_S)
        async with httpx2.AsyncClient() as http:
            health = await http.get(f"{url}/health", timeout=10)
        assert health.status_code == 200 and health.json()["status"] == "ok"
    finally:
        process.send_signal(signal.SIGTERM)
        stdout, _ = await asyncio.wait_for(process.communicate(), START_TIMEOUT_S)
    # uvicorn stops gracefully, then re-raises the signal so the exit status says what ended it.
    assert process.returncode in (0, -signal.SIGTERM)
    assert stdout == b""


@pytest.mark.asyncio
async def test_stdio_mode_serves_mcp_on_stdin_and_stdout(
    socket_dir: Path, fake_servers: dict[str, ServiceServer]
) -> None:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway", "--transport", "stdio"],
        env=gateway_env(socket_dir),
        cwd=REPO_ROOT,
    )
    # The initialize handshake, as Claude Code and other current clients speak it.
    async with Client(server, mode="legacy") as client:
        assert len((await client.list_tools()).tools) == 14
        book = await client.call_tool("alexandria_book", {"book_id": 1})
    assert not book.is_error and book.structured_content["book"]["id"] == 1


def test_stdio_mode_writes_nothing_but_protocol_to_stdout(socket_dir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "--transport", "stdio"],
        env=gateway_env(socket_dir),
        cwd=REPO_ROOT,
        check=False,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=START_TIMEOUT_S,
    )
    assert done.stdout == b""


def test_http_mode_refuses_to_listen_beyond_loopback_without_tokens(socket_dir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "--transport", "http", "--host", "0.0.0.0", "--port", "0"],
        env=gateway_env(socket_dir),
        cwd=REPO_ROOT,
        check=False,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
    )
    assert done.returncode == 2
    assert "GATEWAY_TOKENS" in done.stderr and done.stdout == ""
