"""The CLI waits for a service that is still starting, and not for one that is not running; `up` checks
where it may listen before it starts anything."""

from __future__ import annotations

import asyncio
import getpass
import os
import re
import shutil
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


def _cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
         prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """`alexandria` with an embedded store under `tmp_path`, whatever QDRANT_* the environment holds, and `env`."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("QDRANT_", "EMBEDDED_"))}
    environment["ALEXANDRIA_DATA_DIR"] = str(tmp_path)
    return subprocess.run([*(prefix or []), str(Path(sys.executable).with_name("alexandria")), *args],
                          env=environment | (env or {}), capture_output=True, text=True, timeout=120, check=False)


def test_compact_merges_the_collection_of_a_stopped_stack_and_says_what_it_did(tmp_path: Path) -> None:
    store = open_store(settings_for("embedded", tmp_path))
    store.ensure_collection("alexandria", DIMENSION, METADATA)
    store.upsert("alexandria", [stored_point(p) for p in PASSAGES])
    store.close()

    done = _cli(tmp_path, "compact")

    assert done.returncode == 0, done.stderr
    assert "compacting alexandria" in done.stderr and "segments of up to 1000 MB" in done.stderr
    # Nothing merged, nothing larger: searched as before (a larger merge, tests/store/test_embedded.py).
    assert "Its segments are small enough to be searched with QDRANT_HNSW_EF (256) as before." in done.stderr
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


@pytest.mark.parametrize(("variable", "value", "allowed"), [
    ("EMBEDDER_PROFILE", "nonsense", "should be 'baseline', 'fast', 'best', 'multilingual', 'gpu' or 'auto'"),
    ("QDRANT_QUANTIZATION", "bogus", "should be 'none', 'int8' or 'binary'"),
    ("GATEWAY_PORT", "-1", "should be greater than or equal to 0"),
])
@pytest.mark.parametrize("command", ["up", "compact"])
def test_a_setting_that_cannot_work_is_refused_in_one_message_before_anything_starts(
    tmp_path: Path, command: str, variable: str, value: str, allowed: str
) -> None:
    done = _cli(tmp_path / "var", command, env={variable: value})
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["error: these settings cannot work:", f"  {variable}='{value}': {allowed}",
                                        "Fix or unset them (docs/configuration.md), then run the command again."]
    assert not (tmp_path / "var").exists(), "nothing was started or made before the refusal"


def test_up_refuses_a_data_folder_under_a_file_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    done = _cli(tmp_path / "a-file" / "var", "up")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        (f"error: ALEXANDRIA_DATA_DIR={tmp_path / 'a-file' / 'var'} cannot hold the stack's store and sockets: Not a "
        f"directory ({tmp_path / 'a-file' / 'var'}). Point ALEXANDRIA_DATA_DIR at a folder that user "
        f"{getpass.getuser()} can create and write.")]


def test_up_refuses_a_profile_whose_model_is_not_fetched_before_anything_starts(tmp_path: Path) -> None:
    done = _cli(tmp_path / "var", "up", env={"EMBEDDER_PROFILE": "best", "EMBEDDER_MODELS_DIR": str(tmp_path / "models")})
    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"error: EMBEDDER_PROFILE=best runs all-mpnet-base-v2, which is not at "
                                  f"{tmp_path / 'models' / 'all-mpnet-base-v2'}: fetch it once with make models")
    assert not (tmp_path / "var" / "run").exists(), "nothing was started before the refusal"


def test_compact_of_a_data_folder_that_does_not_exist_refuses_and_makes_nothing(tmp_path: Path) -> None:
    done = _cli(tmp_path / "nowhere", "compact")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        (f"error: There is no embedded store at {tmp_path / 'nowhere' / 'store'}: ALEXANDRIA_DATA_DIR="
        f"{tmp_path / 'nowhere'} holds none. Point ALEXANDRIA_DATA_DIR at the data folder the stack runs on.")]
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="runs the CLI as another user (nobody) through setpriv, which needs root")
def test_up_and_compact_refuse_a_data_folder_this_user_cannot_write(tmp_path: Path) -> None:
    store = open_store(settings_for("embedded", tmp_path / "var"))
    store.ensure_collection("alexandria", DIMENSION, METADATA)
    store.close()
    tmp_path.chmod(0o755)
    as_nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
    for command in ("up", "compact"):
        done = _cli(tmp_path / "var", command, prefix=as_nobody)
        assert done.returncode == 1, done.stderr
        assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
        assert "nobody" in done.stderr and ("cannot hold" in done.stderr or "cannot write" in done.stderr)


@pytest.mark.parametrize("limit", ["0", "21"])
def test_query_refuses_a_limit_out_of_bounds_before_asking_the_stack(tmp_path: Path, limit: str) -> None:
    done = _cli(tmp_path, "query", "--limit", limit, "the friar's potion")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [f"error: limit must be from 1 to 20, got {limit} (default 5)."]


ONE_SOURCE = "ingest takes one of: book ids, --all or --file"


@pytest.mark.parametrize(("arguments", "refusal"), [
    (["5", "--file", "/books/x.txt"], ONE_SOURCE), (["--all", "5"], ONE_SOURCE), ([], ONE_SOURCE),
    (["5", "--title", "T"], "--title and --author name a local file's book: give them with --file"),
])
def test_ingest_refuses_what_it_would_leave_unread_before_asking_the_stack(
        tmp_path: Path, arguments: list[str], refusal: str) -> None:
    done = _cli(tmp_path, "ingest", *arguments)
    assert done.returncode == 2 and done.stderr.strip().endswith(f"error: {refusal}")


@pytest.mark.parametrize("arguments", [[], ["5", "--file", "/books/x.txt"]])
def test_remove_takes_one_book_before_asking_the_stack(tmp_path: Path, arguments: list[str]) -> None:
    done = _cli(tmp_path, "remove", *arguments)
    assert done.returncode == 2 and done.stderr.strip().endswith("error: remove takes one of: a Calibre book id or --file")
