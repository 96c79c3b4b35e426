"""Shared test plumbing: where ../shared is, and what happens when it is missing.

A fresh clone without ../shared skips the tests that need it, with a reason; CI
(CI=true) always has it, so there a missing ../shared fails instead of skipping.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from grpc.experimental.aio import init_grpc_aio

# Every test runs on an event loop of its own, so gRPC's asyncio layer would shut down whenever its
# last object is garbage-collected, joining its poller thread; that join can block for ever
# (grpc/grpc#22365, #40989), which hung the suite at random places. Held open here for the session.
init_grpc_aio()

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = REPO_ROOT.parent / "shared"
CORPUS = SHARED / "corpus"
SHARED_LIBRARY = CORPUS / "calibre-library"
LOCAL_FILES = CORPUS / "local-files"
# Tests never touch the network; those of fetching models turn it off against a hub they start on 127.0.0.1.
os.environ.setdefault("ALEXANDRIA_OFFLINE", "1")

# `backend` and `store`: a test that takes them runs on both store backends.
pytest_plugins = ["store.backends"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every end-to-end test starts a whole stack: slow by construction."""
    for item in items:
        if "e2e" in item.path.parts:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def shared_corpus() -> Path:
    """../shared/corpus: the real Calibre library and loose files. The one place a test that needs it (as an
    argument, through a fixture, or by `pytest.mark.usefixtures("shared_corpus")`) is skipped, saying why, when
    it is not beside the checkout; under CI (CI=true) it fails instead."""
    if CORPUS.is_dir():
        return CORPUS
    message = (f"needs the shared corpus at {CORPUS}, which is not beside this checkout "
               "(put the project's shared folder there to run it)")
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real sentence-transformers CrossEncoder folder, built here since no reranker ships in a package
    (fixtures/tiny_cross_encoder.py)."""
    from fixtures.tiny_cross_encoder import build_tiny_cross_encoder

    return build_tiny_cross_encoder(tmp_path_factory.mktemp("reranker") / "tiny-cross-encoder")
