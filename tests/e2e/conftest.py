"""One real stack per test session: real processes, gRPC, embedded store, model and gateway."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import LOCAL_FILES, SHARED_LIBRARY

from e2e.stack import RunningStack, start_stack


@pytest.fixture(scope="session")
def inbox(shared_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A writable copy of the shared loose files: the one folder the local-file tools may read."""
    folder = tmp_path_factory.mktemp("inbox")
    shutil.copytree(LOCAL_FILES, folder, dirs_exist_ok=True)
    return folder.resolve()


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory, inbox: Path) -> Iterator[RunningStack]:
    running = start_stack(tmp_path_factory.mktemp("stack") / "var", SHARED_LIBRARY, inbox)
    yield running
    assert running.stop() in (0, 130)
