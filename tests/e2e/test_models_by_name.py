"""A stack whose embedder and reranker are named by their hub ids: `alexandria up` fetches both from a hub the test
starts on 127.0.0.1 (the hub's own layout), then serves a real search through them; offline, it refuses saying
why, and never touches the hub."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from catalog.scratch import copy_library
from fixtures.hub_server import LocalHub
from fixtures.tiny_cross_encoder import build_tiny_cross_encoder
from mcp import Client

from alexandria_stack.layout import SAMPLE_LIBRARY as LIBRARY
from e2e.mcp_calls import call
from e2e.stack import start_stack
from services.embedder.model_folder import resolve_model_source

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
RERANKER = "cross-encoder/tiny-random-reranker"


async def test_up_fetches_the_named_models_then_searches_through_them(tmp_path: Path) -> None:
    library = copy_library(LIBRARY, tmp_path / "library")
    with LocalHub() as local_hub:
        local_hub.add_model(MODEL, resolve_model_source(None).path)
        local_hub.add_model(RERANKER, build_tiny_cross_encoder(tmp_path / "ce"))
        named = {"EMBEDDER_MODEL": MODEL, "EMBEDDER_RERANKER_MODEL": RERANKER, "HF_ENDPOINT": local_hub.endpoint,
                 "EMBEDDER_MODELS_DIR": str(tmp_path / "models")}

        offline = await asyncio.to_thread(
            subprocess.run, [str(Path(sys.executable).with_name("alexandria")), "up", "--port", "0"],
            env={**named, "ALEXANDRIA_OFFLINE": "1", "PATH": "/usr/bin:/bin",
                 "ALEXANDRIA_DATA_DIR": str(tmp_path / "offline")},
            capture_output=True, text=True, timeout=120, check=False)
        assert offline.returncode == 1 and "ALEXANDRIA_OFFLINE is set" in offline.stderr, offline
        assert f"alexandria models pull {MODEL}" in offline.stderr and local_hub.requests == []

        stack = start_stack(tmp_path / "var", library, extra_env={**named, "ALEXANDRIA_OFFLINE": "0"})
    try:  # the hub is gone now: the stack runs on what it fetched
        fetched = "\n".join(stack.log)
        assert f"{MODEL} is not installed yet: fetching it once" in fetched, fetched
        assert f"{RERANKER} fetched: revision" in "\n".join(stack.output), stack.output
        status = stack.cli("status")
        assert f"model      {MODEL}: 384 dims" in status.stdout and f"reranked by {RERANKER}" in status.stdout, status
        ingested = stack.cli("ingest", "1")
        assert ingested.returncode == 0, ingested
        async with Client(stack.mcp_url) as client:
            found, is_error = await call(client, "alexandria_query", {
                "query": "how many steps does the lighthouse staircase have", "threshold": 0.0})
        assert not is_error and found["result_count"] >= 1 and found["results"][0]["book_id"] == 1, found
        assert all(0.0 <= r["score"] <= 1.0 for r in found["results"]), "the cross-encoder's scores, in [0, 1]"
    finally:
        stack.stop()
