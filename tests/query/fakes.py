"""In-memory stand-ins for unit tests only: a Store with the protocol's filter semantics, and an encoder.

The fake store records every call so tests can check round trips (one retrieve for the chapters,
one scroll for the neighbours). Integration tests use the real embedded store instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from alexandria.store import SENTENCES, CollectionInfo, Filter, Hit, PointRecord, SparseVector, StoredPoint
from alexandria.store import schema as f
from alexandria.store.lexical import encode_document
from services.query.search import QueryVector

MODEL = "fake-model"
DIMENSION = 4
RRF_K = 60


def unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def _matches_value(stored: Any, wanted: Any) -> bool:
    options = wanted if isinstance(wanted, list) else [wanted]
    stored_values = stored if isinstance(stored, list) else [stored]
    return any(v in options for v in stored_values)


def _has_words(stored: Any, words: str) -> bool:
    return set(words.casefold().split()) <= set(str(stored).casefold().split())


def matches(payload: dict[str, Any], where: Filter | None) -> bool:
    if where is None:
        return True
    return (
        all(k in payload and _matches_value(payload[k], v) for k, v in where.must.items())
        and not any(k in payload and _matches_value(payload[k], v) for k, v in where.must_not.items())
        and all(k in payload and _has_words(payload[k], words) for k, words in where.text.items())
    )


@dataclass
class FakeStore:
    """Points per collection in memory; dense scores are cosines, sparse scores dot products."""

    backend: str = "embedded"
    holds_gil: bool = False
    collections: dict[str, dict[str, StoredPoint]] = field(default_factory=dict)
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    def add_collection(self, name: str, model: str = MODEL, dimension: int = DIMENSION) -> None:
        self.collections[name] = {}
        self.metadata[name] = {"model": model, "dimension": dimension}

    def collection_info(self, collection: str) -> CollectionInfo | None:
        self.calls.append("collection_info")
        if collection not in self.collections:
            return None
        meta = self.metadata[collection]
        return CollectionInfo(collection, len(self.collections[collection]), meta["dimension"], "green", meta)

    def upsert(self, collection: str, points: list[StoredPoint]) -> None:
        self.collections[collection].update({p.id: p for p in points})

    def _points(self, collection: str, where: Filter | None) -> list[StoredPoint]:
        return [p for p in self.collections[collection].values() if matches(p.payload, where)]

    def facet_counts(self, collection: str, key: str, where: Filter | None = None, limit: int = 100000) -> dict[Any, int]:
        self.calls.append("facet_counts")
        counts: dict[Any, int] = {}
        for p in self._points(collection, where):
            values = p.payload.get(key)
            for value in values if isinstance(values, list) else [values]:
                counts[value] = counts.get(value, 0) + 1
        return counts

    @staticmethod
    def _record(p: StoredPoint, with_vectors: bool) -> PointRecord:
        return PointRecord(p.id, p.payload, *((p.dense, p.sentences) if with_vectors else (None, None)))

    def scroll(self, collection: str, where: Filter | None, limit: int, with_vectors: bool = False) -> list[PointRecord]:
        self.calls.append("scroll")
        return [self._record(p, with_vectors) for p in self._points(collection, where)][:limit]

    def retrieve(self, collection: str, ids: list[str], with_vectors: bool = False) -> list[PointRecord]:
        self.calls.append("retrieve")
        points = self.collections[collection]
        return [self._record(points[i], with_vectors) for i in ids if i in points]

    @staticmethod
    def _hits(scored: list[tuple[float, StoredPoint]], limit: int) -> list[Hit]:
        scored.sort(key=lambda pair: -pair[0])
        return [Hit(p.id, s, p.payload, frozenset(p.sparse.indices)) for s, p in scored[:limit]]

    def _dense_scores(self, collection: str, vector: np.ndarray, where: Filter | None) -> list[tuple[float, StoredPoint]]:
        return [(float(p.dense @ vector), p) for p in self._points(collection, where)]

    def _sparse_scores(self, collection: str, vector: SparseVector, where: Filter | None) -> list[tuple[float, StoredPoint]]:
        query = dict(zip(vector.indices, vector.values))
        scored = []
        for p in self._points(collection, where):
            score = sum(query.get(i, 0.0) * v for i, v in zip(p.sparse.indices, p.sparse.values))
            if score > 0:
                scored.append((score, p))
        return scored

    def query_dense(self, collection, vector, where, limit) -> list[Hit]:
        self.calls.append("query_dense")
        return self._hits(self._dense_scores(collection, vector, where), limit)

    def query_sparse(self, collection, vector, where, limit) -> list[Hit]:
        self.calls.append("query_sparse")
        return self._hits(self._sparse_scores(collection, vector, where), limit)

    def query_hybrid(self, collection, dense, sparse, where, limit, prefetch_limit) -> list[Hit]:
        self.calls.append("query_hybrid")
        fused: dict[str, float] = {}
        points: dict[str, StoredPoint] = {}
        for scored in (self._dense_scores(collection, dense, where), self._sparse_scores(collection, sparse, where)):
            scored.sort(key=lambda pair: -pair[0])
            for rank, (_, p) in enumerate(scored[:prefetch_limit]):
                fused[p.id] = fused.get(p.id, 0.0) + 1.0 / (RRF_K + rank + 1)
                points[p.id] = p
        return self._hits([(s, points[i]) for i, s in fused.items()], limit)

    def similarities(self, collection, ids, vector, using) -> dict[str, float]:
        self.calls.append(f"similarities {using}")
        points = self.collections[collection]
        if using == SENTENCES:
            with_sentences = [i for i in ids if i in points and points[i].sentences is not None]
            return {i: float(cosines(points[i].sentences, vector).max()) for i in with_sentences}
        return {i: float(cosines(points[i].dense[None, :], vector)[0]) for i in ids if i in points}

    def close(self) -> None:
        self.calls.append("close")


def cosines(rows: np.ndarray, vector: np.ndarray) -> np.ndarray:
    return rows @ vector / (np.linalg.norm(rows, axis=1) * np.linalg.norm(vector))


@dataclass
class FakeEncoder:
    """Returns the vector registered for a query text (for exact cosines in tests)."""

    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    model: str = MODEL

    async def encode(self, text: str) -> QueryVector:
        return QueryVector(self.vectors[text], self.model)


def point(
    point_id: str,
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
    sentences: np.ndarray | None = None,
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
        payload[f.PARENT_ID] = parent_id
    return StoredPoint(point_id, dense, encode_document(text), payload, sentences)

