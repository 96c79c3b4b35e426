"""The CLI waits for a service that is still starting, and not for one that is not running; `up` checks
where it may listen before it starts anything."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from store.synthetic import DIMENSION, METADATA, PASSAGES, settings_for, stored_point

from alexandria.errors import Unavailable
from alexandria.grpc_server import ServiceServer, build_server
from alexandria.store import open_store
from alexandria.v1 import query_pb2
from alexandria_stack.cli import storage_line, when_ready


@pytest.fixture
async def starting_service(tmp_path: Path):
    """A real gRPC server whose health says NOT_SERVING, as a service waiting for the embedder does."""
    server = build_server("query", f"unix://{tmp_path / 'query.sock'}", lambda _server: None, [])
    await server.start()
    yield server
    await server.stop(grace=0)


async def test_waits_for_a_starting_service_until_it_serves(starting_service: ServiceServer, capsys) -> None:
    waiting = asyncio.create_task(when_ready("query", starting_service.address, timeout=30))
    said = ""
    while "waiting for the query service to finish starting" not in said:  # it is waiting now
        assert not waiting.done(), "when_ready returned before the service served"
        await asyncio.sleep(0)
        said += capsys.readouterr().err
    await starting_service.health.set_serving(True)
    await asyncio.wait_for(waiting, 10)


async def test_a_service_that_never_serves_is_reported_by_name(starting_service: ServiceServer) -> None:
    with pytest.raises(Unavailable, match="query service did not finish starting within 1 s; `alexandria status`"):
        await when_ready("query", starting_service.address, timeout=1)


async def test_a_service_that_is_not_running_is_not_waited_for(tmp_path: Path, capsys) -> None:
    await asyncio.wait_for(when_ready("query", f"unix://{tmp_path / 'absent.sock'}", timeout=600), 5)
    assert capsys.readouterr().err == ""


def test_up_beyond_loopback_without_tokens_is_refused_in_one_line_before_anything_starts(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "GATEWAY_TOKENS"}
    env["ALEXANDRIA_DATA_DIR"] = str(tmp_path / "var")
    done = subprocess.run([str(Path(sys.executable).with_name("alexandria")), "up", "--host", "0.0.0.0"],
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    refusal = ("error: Refusing to serve HTTP on '0.0.0.0', beyond loopback, without API tokens. Set GATEWAY_TOKENS "
               """(e.g. '{"<secret>": ["read", "ingest"]}') or bind GATEWAY_HOST=127.0.0.1.""")
    assert done.stderr.strip().splitlines() == [refusal]
    assert not (tmp_path / "var" / "run").exists(), "nothing was started before the refusal"


def test_status_says_how_the_collection_keeps_its_vectors_and_what_it_takes_on_disk() -> None:
    embedded = query_pb2.CollectionStats(quantization="int8", disk_bytes=72_400_000, wal_bytes=8_100_000)
    assert storage_line(embedded) == "vectors quantised int8; 72.4 MB on disk, 8.1 MB of it write-ahead log"
    server = query_pb2.CollectionStats(quantization="none")
    assert storage_line(server) == "vectors not quantised; size on disk not known (a Qdrant server does not tell it)"


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`alexandria` with an embedded store under `tmp_path`, whatever QDRANT_* the environment holds."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("QDRANT_", "EMBEDDED_"))}
    env["ALEXANDRIA_DATA_DIR"] = str(tmp_path)
    return subprocess.run([str(Path(sys.executable).with_name("alexandria")), *args],
                          env=env, capture_output=True, text=True, timeout=120, check=False)


def test_compact_merges_the_collection_of_a_stopped_stack_and_says_what_it_did(tmp_path: Path) -> None:
    store = open_store(settings_for("embedded", tmp_path))
    store.ensure_collection("alexandria", DIMENSION, METADATA)
    store.upsert("alexandria", [stored_point(p) for p in PASSAGES])
    store.close()

    done = _cli(tmp_path, "compact")

    assert done.returncode == 0, done.stderr
    assert "compacting alexandria" in done.stderr and "segments of up to 1000 MB" in done.stderr
    assert "Its dense searches now visit 1024 candidates in each segment" in done.stderr
    assert re.fullmatch(r"alexandria: 1 -> 1 segments in \d+ s", done.stdout.strip())
    reopened = open_store(settings_for("embedded", tmp_path))
    try:
        assert reopened.count("alexandria") == len(PASSAGES)
    finally:
        reopened.close()


def test_compact_refuses_a_segment_size_it_cannot_use_in_one_line(tmp_path: Path) -> None:
    done = _cli(tmp_path, "compact", "--segment-mb", "5")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "error: A segment of 5 MB is too small to compact into: give at least 10 MB (default 1000)."]
