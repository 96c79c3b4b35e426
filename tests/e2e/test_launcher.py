"""`alexandria up` tells the truth about what it started: relative paths read from the folder it was started in, an
embedder that fails at start ending the stack in one line, and children that end with a killed launcher at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from conftest import SHARED_LIBRARY
from waiting import wait_until_blocking

from e2e.stack import start_stack
from services.embedder.model_folder import resolve_model_source

ALEXANDRIA = Path(sys.executable).with_name("alexandria")
pytestmark = pytest.mark.usefixtures("shared_corpus")


def _environment(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("QDRANT_", "EMBEDDED_"))}
    return env | {"ALEXANDRIA_DATA_DIR": str(data_dir), "CALIBRE_LIBRARY_PATH": str(SHARED_LIBRARY),
                  "AUTO_SYNC": "false", "HF_HUB_OFFLINE": "1", **extra}


def _running(pid: int) -> bool:
    """Whether `pid` runs, a zombie (exited, not yet reaped by its new parent) counting as gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def _children(pid: int) -> list[int]:
    return [int(child) for task in Path(f"/proc/{pid}/task").iterdir()
            for child in (task / "children").read_text().split()]


def test_relative_paths_are_read_from_the_folder_up_was_started_in(tmp_path: Path) -> None:
    (tmp_path / "library").symlink_to(SHARED_LIBRARY)
    stack = start_stack(tmp_path / "var", SHARED_LIBRARY, cwd=tmp_path,
                        extra_env={"ALEXANDRIA_DATA_DIR": "var", "CALIBRE_LIBRARY_PATH": "library"})
    try:
        announcement = "".join(stack.output)
        assert f"Calibre library:       {tmp_path / 'library'}\n" in announcement
        assert f"Store:                 embedded ({tmp_path / 'var' / 'store'})" in announcement
        health = httpx.get(f"{stack.url}/health", timeout=30)
        assert health.status_code == 200, health.text  # the catalog serves the library it was pointed at
    finally:
        assert stack.stop() in (0, 130)


def test_an_embedder_that_fails_at_start_ends_the_stack_in_one_line(tmp_path: Path) -> None:
    damaged = tmp_path / "damaged-model"  # every file of the small model but its weights, which are not safetensors
    damaged.mkdir()
    for item in resolve_model_source(None).path.iterdir():
        if item.name != "model.safetensors":
            (damaged / item.name).symlink_to(item)
    (damaged / "model.safetensors").write_bytes(b"not safetensors")
    done = subprocess.run([str(ALEXANDRIA), "up", "--port", "0"],
                          env=_environment(tmp_path / "var", EMBEDDER_MODEL=str(damaged), ALEXANDRIA_LOG_LEVEL="WARNING"),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1
    assert "is up" not in done.stdout
    log = done.stderr.splitlines()
    assert "Traceback" not in done.stderr and "Event loop is closed" not in done.stderr, done.stderr
    assert [line.split(" ", 4)[4] for line in log] == [  # after the time and the process's name
        (f"services.host: cannot start: Could not load the embedding model at {damaged}: Error while deserializing "
         "header: header too large"),
        "launcher: embedder (exit code 2) exited during start; the log above says why; stopped the stack",
    ], done.stderr


def test_a_launcher_killed_while_the_model_loads_leaves_no_process_after_two_seconds(tmp_path: Path) -> None:
    launcher = subprocess.Popen([str(ALEXANDRIA), "up", "--port", "0"],
                                env=_environment(tmp_path / "var", ALEXANDRIA_LOG_LEVEL="INFO"),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    children: list[int] = []
    try:
        assert launcher.stderr is not None
        for line in launcher.stderr:
            if "embedder listening on" in line:  # it loads its model now, which takes seconds
                break
        else:
            raise AssertionError("the embedder never started")
        children = _children(launcher.pid)
        launcher.kill()
        launcher.wait(10)
        wait_until_blocking(lambda: [pid for pid in children if _running(pid)], lambda left: not left,
                            what="every child to end within 2 s of the launcher's death", timeout_s=2, interval_s=0.05)
        assert children
    finally:
        if launcher.poll() is None:
            launcher.kill()
        for pid in children:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
