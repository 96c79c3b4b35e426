"""Each store test runs on both backends, opened on a fresh folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from alexandria.store import Store, open_store
from store.synthetic import COLLECTION, DIMENSION, METADATA, PASSAGES, settings_for, stored_point


@pytest.fixture(params=["embedded", "server"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def store(backend: str, tmp_path: Path) -> Iterator[Store]:
    opened = open_store(settings_for(backend, tmp_path))
    yield opened
    opened.close()


@pytest.fixture
def library(store: Store) -> Store:
    """`store` holding COLLECTION with every passage, none of them complete yet."""
    store.ensure_collection(COLLECTION, DIMENSION, METADATA)
    store.upsert(COLLECTION, [stored_point(p) for p in PASSAGES])
    return store
