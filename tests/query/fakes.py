"""What the search unit tests share: the real embedded store behind a proxy that records every call
(so tests can check round trips: one retrieve for the chapters, one scroll for the neighbours), a
query encoder that returns registered vectors (for exact cosines), and points as ingest writes them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from alexandria.settings import StoreSettings
from alexandria.store import Store, StoredPoint, open_store
from alexandria.store import schema as f
from alexandria.store.lexical import encode_document
from alexandria.store.records import CollectionModel
from services.query.ranking import DEFAULT_SCALE, ScoreScale
from services.query.search import QueryVector

MODEL = "fake-model"
DIMENSION = 4


def unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


class RecordingStore:
    """The real store, recording the name of each method called on it (to count round trips), and what it was asked."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.calls: list[str] = []
        self.asked: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.store, name)
        if not callable(attribute):
            return attribute

        def recorded(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            self.asked.append((name, args, kwargs))
            return attribute(*args, **kwargs)

        return recorded

    def add_collection(self, name: str, model: str = MODEL, dimension: int = DIMENSION) -> None:
        self.store.ensure_collection(name, dimension, CollectionModel(model, dimension).to_metadata())


def embedded_store(folder: Path) -> RecordingStore:
    """A real embedded store in `folder`, recording its calls."""
    settings = StoreSettings(alexandria_data_dir=folder, qdrant_url=None, qdrant_local_path=None)
    return RecordingStore(open_store(settings))


@dataclass
class FakeEncoder:
    """Returns the vector registered for a query text (for exact cosines in tests), and, when a test
    sets `reranker`, that function's scores as a cross-encoder's."""

    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    model: str = MODEL
    scale: ScoreScale = DEFAULT_SCALE
    reranker: Callable[[str, Sequence[str]], list[float]] | None = None
    reranked: list[list[str]] = field(default_factory=list)

    async def encode(self, text: str, passage: str | None = None) -> QueryVector:
        return QueryVector(self.vectors[text], self.model, self.scale,
                           passage_vector=self.vectors[passage] if passage is not None else None)

    async def reranks(self) -> bool:
        return self.reranker is not None

    async def rerank(self, query: str, passages: Sequence[str]) -> np.ndarray:
        assert self.reranker is not None, "a search reranks only when reranks() says there is a cross-encoder"
        self.reranked.append(list(passages))
        return np.asarray(self.reranker(query, passages), dtype=np.float32)


_NAMES: dict[str, str] = {}


def point_id(name: str) -> str:
    """The UUID a test's point named `name` is stored under (the engine takes UUIDs only)."""
    stored = str(uuid.uuid5(uuid.NAMESPACE_URL, f"test-point/{name}"))
    _NAMES[stored] = name
    return stored


def name_of(stored_id: str) -> str:
    """The test's name of a stored point id."""
    return _NAMES.get(stored_id, stored_id)


def point(
    name: str,
    text: str,
    dense: np.ndarray,
    *,
    level: str = f.Level.CHILD,
    parent_id: str | None = "chapter-1",
    sequence_index: int = 0,
    sibling_count: int = 5,
    complete: bool = True,
    book_title: str = "Pride and Prejudice",
    authors: tuple[str, ...] = ("Jane Austen",),
    calibre_id: int | None = 1,
    chapter_title: str = "Chapter 1",
    windows: np.ndarray | None = None,
    **extra: Any,
) -> StoredPoint:
    """A point with the payload ingest writes (schema.py names)."""
    payload: dict[str, Any] = {
        f.BOOK_KEY: f"key-{book_title}",
        f.BOOK_TITLE: book_title,
        f.AUTHOR: " & ".join(authors),
        f.AUTHORS: list(authors),
        f.LANGUAGE: "eng",
        f.FILE_PATH: f"/library/{book_title}.epub",
        f.TEXT: text,
        f.LEVEL: str(level),
        f.SEQUENCE_INDEX: sequence_index,
        f.SIBLING_COUNT: sibling_count,
        f.CHAPTER_TITLE: chapter_title,
        f.CHAPTER_INDEX: 0,
        f.POSITION: sequence_index,
        f.COMPLETE: complete,
        f.WORD_COUNT: len(text.split()),
        **extra,
    }
    if calibre_id is not None:
        payload[f.CALIBRE_ID] = calibre_id
    if parent_id is not None and level != f.Level.PARENT:
        payload[f.PARENT_ID] = point_id(parent_id)
    return StoredPoint(point_id(name), dense, encode_document(text), payload, windows)

