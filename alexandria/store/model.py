"""Types of the store adapter, independent of either backend."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

DENSE = "dense"
SPARSE = "lexical"


@dataclass(frozen=True)
class SparseVector:
    indices: list[int]
    values: list[float]


@dataclass(frozen=True)
class StoredPoint:
    """A point to write: a deterministic UUID id, its dense vector, its lexical vector and payload."""

    id: str
    dense: np.ndarray
    sparse: SparseVector
    payload: dict[str, Any]


@dataclass(frozen=True)
class Filter:
    """Conjunction of exact matches: every key must equal its value (a list value: any of them)."""

    must: dict[str, Any] = field(default_factory=dict)
    must_not: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PointRecord:
    id: str
    payload: dict[str, Any]
    dense: np.ndarray | None = None


@dataclass(frozen=True)
class Hit:
    """A query result. `score` is the engine's score for the mode; `dense` is returned when asked for."""

    id: str
    score: float
    payload: dict[str, Any]
    dense: np.ndarray | None = None


@dataclass(frozen=True)
class CollectionInfo:
    name: str
    points_count: int
    vector_size: int
    status: str              # "green" when indexed and idle, "yellow" while optimising
    metadata: dict[str, Any]  # e.g. the model that made the vectors


class Store(Protocol):
    """Every operation Alexandria needs from Qdrant. All methods are blocking; callers run them in a thread."""

    backend: str

    def collection_info(self, collection: str) -> CollectionInfo | None:
        """None when the collection does not exist."""

    def ensure_collection(self, collection: str, dimension: int, metadata: dict[str, Any]) -> CollectionInfo:
        """Create it (dense cosine + sparse lexical with IDF, payload indexes) or return the existing one."""

    def upsert(self, collection: str, points: list[StoredPoint]) -> None: ...

    def set_payload(self, collection: str, where: Filter, payload: dict[str, Any]) -> None:
        """Merge `payload` into every point matching `where`."""

    def delete(self, collection: str, where: Filter) -> int:
        """Delete matching points; return how many there were."""

    def count(self, collection: str, where: Filter | None = None) -> int: ...

    def scroll(
        self, collection: str, where: Filter | None, limit: int, with_vectors: bool = False
    ) -> list[PointRecord]: ...

    def retrieve(self, collection: str, ids: list[str], with_vectors: bool = False) -> list[PointRecord]: ...

    def facet_counts(self, collection: str, key: str, where: Filter | None = None, limit: int = 100000) -> dict[Any, int]:
        """Distinct values of a keyword payload field with their point counts."""

    def query_dense(
        self, collection: str, vector: np.ndarray, where: Filter | None, limit: int, with_vectors: bool = False
    ) -> list[Hit]: ...

    def query_sparse(
        self, collection: str, vector: SparseVector, where: Filter | None, limit: int, with_vectors: bool = False
    ) -> list[Hit]: ...

    def query_hybrid(
        self,
        collection: str,
        dense: np.ndarray,
        sparse: SparseVector,
        where: Filter | None,
        limit: int,
        prefetch_limit: int,
        with_vectors: bool = False,
    ) -> list[Hit]:
        """One engine query: dense and sparse prefetches fused with RRF."""

    def optimize(self, collection: str) -> None:
        """Build indexes now (embedded: HNSW; server: no-op, the server optimises by itself)."""

    def close(self) -> None: ...
