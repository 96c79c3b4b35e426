"""The stack as a new user meets it: up, healthy, fourteen tools on both transports, clean stop; a crashed
service restarted, one that keeps crashing stopping the stack; Ctrl-C letting a running ingest answer."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from conftest import SHARED_LIBRARY
from mcp import Client, StdioServerParameters
from waiting import wait_until, wait_until_blocking

from alexandria_stack.launcher import MAX_RESTARTS
from e2e.mcp_calls import call
from e2e.stack import HAMLET, RunningStack, start_stack

pytestmark = pytest.mark.usefixtures("shared_corpus")

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


async def test_the_terminal_commands_reach_the_running_stack(stack: RunningStack, inbox: Path) -> None:
    status = stack.cli("status")
    assert status.returncode == 0 and status.stdout.count("SERVING") >= 4, status
    missing = stack.cli("ingest", "999")
    assert missing.returncode == 1 and "failed" in missing.stderr and "999" in missing.stderr, missing
    assert "0/1 succeeded, 0 skipped, 1 failed" in missing.stdout
    play = inbox / "romeo_and_juliet.txt"
    ingested = stack.cli("ingest", "--file", str(play), "--title", "Romeo and Juliet", "--author", "William Shakespeare")
    try:
        assert ingested.returncode == 0 and ingested.stdout.startswith("Romeo and Juliet: "), ingested
        found = stack.cli("query", "two households in fair Verona", "--threshold", "0")
        assert found.returncode == 0 and "Romeo and Juliet — William Shakespeare" in found.stdout, found
    finally:
        async with Client(stack.mcp_url) as client:
            await call(client, "alexandria_remove", {"file_path": str(play)})


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


def test_a_closed_terminal_stops_the_stack_and_a_killed_launcher_leaves_no_process_behind(
    tmp_path: Path, inbox: Path
) -> None:
    stacks: list[RunningStack] = []
    children: list[int] = []
    try:
        # As from a terminal, whatever the tests inherited (a CI job may run under nohup).
        stacks.append(start_stack(tmp_path / "var", SHARED_LIBRARY, inbox,
                                  dispositions={signal.SIGHUP: signal.SIG_DFL, signal.SIGINT: signal.SIG_DFL}))
        children += stacks[-1].children()
        assert stacks[-1].stop(signal.SIGHUP) == 0
        assert len(children) == 3
        assert not [pid for pid in children if _running(pid)], "a process was left behind"

        stacks.append(start_stack(tmp_path / "var", SHARED_LIBRARY, inbox))
        killed = list(stacks[-1].children())
        children += killed
        stacks[-1].process.kill()
        stacks[-1].process.wait(10)
        wait_until_blocking(lambda: [pid for pid in killed if _running(pid)], lambda left: not left,
                            what="every child of the killed launcher to exit (the kernel's parent-death signal, alexandria/lifetime.py)", timeout_s=2, interval_s=0.1)
        # The port and the store are free again. Started as `nohup alexandria up &` is: a closed terminal leaves
        # it running, and Ctrl-C's signal, ignored by the shell for a background job, still stops it.
        stacks.append(start_stack(tmp_path / "var", SHARED_LIBRARY, inbox,
                                  dispositions={signal.SIGHUP: signal.SIG_IGN, signal.SIGINT: signal.SIG_IGN}))
        stacks[-1].process.send_signal(signal.SIGHUP)
        with pytest.raises(subprocess.TimeoutExpired):
            stacks[-1].process.wait(3)
        assert stacks[-1].stop(signal.SIGINT) == 0
    finally:  # whatever failed above, nothing of it runs on
        for stack in stacks:
            if stack.process.poll() is None:
                stack.process.kill()
                stack.process.wait(10)
        for pid in children:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    """Whether `pid` runs, a zombie (exited, not yet reaped by its new parent) counting as gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


async def test_a_service_that_keeps_crashing_stops_the_stack_with_the_reason(tmp_path: Path, inbox: Path) -> None:
    stack = start_stack(tmp_path / "var", SHARED_LIBRARY, inbox)
    killed: list[int] = []
    try:
        for _ in range(MAX_RESTARTS + 1):
            pid = await _next_embedder(stack, killed)
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        assert stack.process.wait(60) == 1
    finally:
        stack.stop()
    restarts = [line for line in stack.log if "embedder exited unexpectedly" in line and "restarting it" in line]
    assert len(restarts) == MAX_RESTARTS
    assert any(f"embedder exited (code -9) {MAX_RESTARTS + 1} times within" in line and "stopping the stack" in line
               for line in stack.log)
    assert not [pid for pid in killed if Path(f"/proc/{pid}").exists()]


async def _next_embedder(stack: RunningStack, killed: list[int], timeout: float = 60) -> int:
    """The pid of the embedder the launcher runs now, once it is not one already killed."""
    running = await wait_until(lambda: [pid for pid, command in stack.children().items()
                                        if " -m services embedder" in command and pid not in killed],
                               what="the launcher to restart the embedder", timeout_s=timeout, interval_s=0.05)
    return running[0]


async def test_ctrl_c_during_an_ingest_lets_it_finish_and_answer(tmp_path: Path, inbox: Path) -> None:
    # A grace period the slowest CI machine cannot outrun (the default is 30 s).
    stack = start_stack(tmp_path / "var", SHARED_LIBRARY, inbox, {"GATEWAY_SHUTDOWN_GRACE_S": "600"})
    embedding = asyncio.Event()

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        if message and message.startswith("embedded"):
            embedding.set()

    try:
        async with Client(stack.mcp_url) as client:
            await client.list_tools()  # the client checks results against the tools' schemas, listed now
            ingest = asyncio.ensure_future(client.call_tool("alexandria_ingest", {"book_id": HAMLET},
                                                            progress_callback=on_progress))
            await asyncio.wait_for(embedding.wait(), 600)
            stack.process.send_signal(signal.SIGINT)
            result = await asyncio.wait_for(ingest, 600)
        assert not result.is_error, result.structured_content
        assert result.structured_content["success"] is True and result.structured_content["title"].startswith("Hamlet")
        assert stack.process.wait(120) == 0
    finally:
        stack.stop()

