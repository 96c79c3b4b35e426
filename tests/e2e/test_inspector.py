"""A client that is not ours: the MCP Inspector's CLI lists and calls tools over stdio and HTTP."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.stack import RunningStack

INSPECTOR = "@modelcontextprotocol/inspector@0.15.0"


@pytest.fixture(scope="session")
def inspector(shared_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Inspector's CLI, installed from the npm registry into a scratch folder (~20 s); not before the shared
    corpus the stack serves is known to be there."""
    if shutil.which("npm") is None:
        if os.environ.get("CI"):
            pytest.fail("npm is needed for the MCP Inspector test")
        pytest.skip("npm is not installed")
    folder = tmp_path_factory.mktemp("inspector")
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent", INSPECTOR], cwd=folder, check=True,
                   capture_output=True, timeout=300)
    return folder / "node_modules" / ".bin" / "mcp-inspector"


def run_cli(inspector: Path, target: list[str], *method: str, env: dict | None = None) -> dict:
    completed = subprocess.run([str(inspector), "--cli", *target, *method], capture_output=True, text=True,
                               timeout=120, env=env, check=True)
    return json.loads(completed.stdout)


def test_inspector_over_http(inspector: Path, stack: RunningStack) -> None:
    target = [stack.mcp_url, "--transport", "http"]
    tools = run_cli(inspector, target, "--method", "tools/list")["tools"]
    assert len(tools) == 14
    called = run_cli(inspector, target, "--method", "tools/call", "--tool-name", "alexandria_search",
                     "--tool-arg", "author=austen")
    assert not called.get("isError")
    assert [b["title"] for b in called["structuredContent"]["books"]][:2] == ["Pride and Prejudice", "Emma"]


def test_inspector_over_stdio(inspector: Path, stack: RunningStack) -> None:
    alexandria = str(Path(sys.executable).with_name("alexandria"))
    tools = run_cli(inspector, [alexandria, "mcp"], "--method", "tools/list", env=stack.env)["tools"]
    assert {t["name"] for t in tools} >= {"alexandria_query", "alexandria_remove"} and len(tools) == 14
    called = run_cli(inspector, [alexandria, "mcp"], "--method", "tools/call", "--tool-name", "alexandria_book",
                     "--tool-arg", "book_id=6", env=stack.env)
    assert called["structuredContent"]["book"]["authors"] == ["William Shakespeare", "Thomas Middleton"]
