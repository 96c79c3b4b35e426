"""The store backends as fixtures, for every test of code that writes or reads the store: each such test
runs on both, opened on a fresh folder (a plugin of tests/conftest.py, so that the store contract suite and
the writer's tests share it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from alexandria.store import Store, open_store
from store.synthetic import settings_for


@pytest.fixture(params=["embedded", "server"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def store(backend: str, tmp_path: Path) -> Iterator[Store]:
    opened = open_store(settings_for(backend, tmp_path))
    yield opened
    opened.close()
