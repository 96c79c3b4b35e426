"""Each store test runs on both backends (`backend` and `store`, from store/backends.py)."""

from __future__ import annotations

import pytest

from alexandria.store import Store
from store.synthetic import COLLECTION, DIMENSION, METADATA, PASSAGES, stored_point


@pytest.fixture
def library(store: Store) -> Store:
    """`store` holding COLLECTION with every passage, none of them complete yet."""
    store.ensure_collection(COLLECTION, DIMENSION, METADATA)
    store.upsert(COLLECTION, [stored_point(p) for p in PASSAGES])
    return store
