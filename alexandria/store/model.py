"""Types of the store adapter, independent of either backend."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ParamSpec, Protocol, TypeVar

import numpy as np

from alexandria.errors import InvalidArgument
from alexandria.settings import StoreSettings, VectorQuantization
from alexandria.store import schema

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

DENSE = "dense"
SPARSE = "lexical"
# A passage's window vectors (a multivector compared by MaxSim, not indexed): the score of a passage for
# a query is the cosine of its best-matching window.
WINDOWS = "windows"
# The multivector of collections made before passages were embedded by windows: their sentences' vectors,
# still searched (read only; ingest refuses such a collection until it is reindexed).
SENTENCES = "sentences"
MULTIVECTORS = (WINDOWS, SENTENCES)
# A hybrid query's dense candidates are fused by rank, and the fused pool is then scored exactly (`similarities`):
# rescoring them with the original vectors inside the prefetch reads each quantised segment's originals (the
# prefetch times QDRANT_QUANTIZATION_OVERSAMPLING of them, at random, from mmapped files under QDRANT_ON_DISK)
# for an order only the fusion's ranks use. At 1,001,910 points (8 segments, int8; CHANGELOG.md) the process held to
# 1.5 GB answered the hybrid query in 38-45 ms p50 without it against 79-89 ms with it; with the memory to
# spare, 29.8 against 31.3 ms. A plain dense search still rescores: its order is its answer.
HYBRID_PREFETCH_RESCORES = False
# For the same reason, the prefetch searches a collection of large segments (whose dense searches visit up to 4 times
# QDRANT_HNSW_EF for their own top 10: EmbeddedStore.dense_search) at most this many times QDRANT_HNSW_EF. At 1,001,910
# points (8 segments of up to 970 MB; CHANGELOG.md), 152 questions put the answer at the same rank after the whole ranking
# with 512 as with 1024 (256 moved 3 of them), and the fused query took 22.7 ms p50 against 30.4.
HYBRID_PREFETCH_EF_FACTOR = 2

# A collection is a directory in the embedded store, so its name must be a safe file name
# (no dots: no "..", no clash with the metadata files kept beside the shards).
_COLLECTION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def is_collection_name(name: str) -> bool:
    """Whether `name` can name a collection on every backend."""
    return _COLLECTION_NAME.fullmatch(name) is not None


def check_collection_name(name: str) -> str:
    """Return `name` when it can name a collection on every backend, else raise InvalidArgument."""
    if not is_collection_name(name):
        raise InvalidArgument(
            f"Invalid collection name {name!r}: use 1 to 64 letters, digits, '_' or '-', starting with a letter or digit."
        )
    return name


def check_facet_key(key: str) -> str:
    """Return `key` when its values can be counted (a keyword index exists on it), else raise InvalidArgument."""
    if key not in schema.KEYWORD_INDEXES:
        raise InvalidArgument(
            f"Cannot count the values of '{key}': facets work on {', '.join(schema.KEYWORD_INDEXES)}."
        )
    return key


@dataclass(frozen=True)
class SparseVector:
    indices: list[int]
    values: list[float]


@dataclass(frozen=True)
class StoredPoint:
    """A point to write: a deterministic UUID id, its dense vector, its lexical vector and payload."""

    id: str
    dense: np.ndarray
    sparse: SparseVector | None  # None: no lexical query reaches it (a chapter), nor counts it in the IDF
    payload: dict[str, Any]
    windows: np.ndarray | None = None  # (n, dimension) float32, for passages: their window vectors


@dataclass(frozen=True)
class Filter:
    """Conjunction of exact matches: every key must equal its value (a list value: any of them).

    `must_not` excludes points whose key equals its value (a list value: any of them).
    `text` matches words inside a text field (schema.TEXT_INDEXES): every word of the value
    must be a whole word of the field, case-insensitively, so {"author": "austen"} matches
    "Jane Austen" (accents are folded too, except in qdrant-client's local mode: differences.ACCENT_FOLDING).
    Values are str, int or bool; list values hold str or int. `ids`, when given, keeps only the points with
    these ids.
    """

    must: dict[str, Any] = field(default_factory=dict)
    must_not: dict[str, Any] = field(default_factory=dict)
    text: dict[str, str] = field(default_factory=dict)
    ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for key, value in (*self.must.items(), *self.must_not.items()):
            if isinstance(value, list):
                if not all(isinstance(item, (str, int)) and not isinstance(item, bool) for item in value):
                    raise InvalidArgument(
                        f"Filter on '{key}': a list matches str or int values only, got {value!r}."
                    )
            elif not isinstance(value, (str, int)):
                raise InvalidArgument(
                    f"Filter on '{key}': match a str, int, bool or a list of them, not {value!r}."
                )
        for key, words in self.text.items():
            if not isinstance(words, str) or not words.strip():
                raise InvalidArgument(f"Text filter on '{key}' needs some words to match, got {words!r}.")


@dataclass(frozen=True)
class PointRecord:
    id: str
    payload: dict[str, Any]
    dense: np.ndarray | None = None
    windows: np.ndarray | None = None


# A query vector and the named vector it is scored against (Store.similarities).
SimilarityQuery = tuple[np.ndarray | SparseVector, str]


@dataclass(frozen=True)
class Hit:
    """A query result. `score` is the engine's score for the mode (a fused rank in hybrid mode); `payload` empty when
    the query was asked for none; `terms_held`, once the search has read them (services/query/search.py), which of the
    query's lexical terms the point's text holds, None until then."""

    id: str
    score: float
    payload: dict[str, Any]
    terms_held: frozenset[int] | None = None


@dataclass(frozen=True)
class CollectionInfo:
    name: str
    points_count: int
    vector_size: int
    status: str              # "green" when indexed and idle, "yellow" while optimising
    metadata: dict[str, Any]  # e.g. the model that made the vectors


@dataclass(frozen=True)
class CollectionLayout:
    """How the collections a store creates keep their vectors (StoreSettings' QDRANT_* storage fields).

    The dense vectors are the only ones searched over the whole collection, so only they are quantised and
    indexed by HNSW; the windows are read for a search's candidates alone (no index, never quantised).
    """

    quantization: VectorQuantization = "int8"
    oversampling: float = 2.0  # quantised candidates searched per result, then rescored with the originals
    on_disk: bool = True  # original vectors and payloads read through mmap instead of held in RAM
    hnsw_m: int = 16
    hnsw_ef_construct: int = 100
    hnsw_ef: int = 256  # candidates a dense search visits in the graph (a search setting, not the collection's)

    @classmethod
    def of(cls, settings: StoreSettings) -> CollectionLayout:
        return cls(settings.qdrant_quantization, settings.qdrant_quantization_oversampling, settings.qdrant_on_disk,
                   settings.qdrant_hnsw_m, settings.qdrant_hnsw_ef_construct, settings.qdrant_hnsw_ef)


@dataclass(frozen=True)
class DenseSearch:
    """How a dense search walks each segment of a collection: candidates visited in its graph, and quantised
    candidates rescored with the originals per result."""

    hnsw_ef: int
    oversampling: float


@dataclass(frozen=True)
class CollectionStorage:
    """What a collection takes on disk, and how its dense vectors are kept (for statistics)."""

    quantization: str  # of the collection's dense vectors, as it was made: none, int8, binary (product)
    disk_bytes: int | None  # bytes the collection's files take on disk (blocks, not sizes); None: unknown
    wal_bytes: int | None  # the part of disk_bytes in its write-ahead log; None: unknown
    search_note: str = ""  # when its dense searches differ from the settings', how and why (by its size)


class Store(Protocol):
    """Every operation Alexandria needs from Qdrant. All methods are blocking: callers run them in a
    thread, or through `call_store` on a hot path."""

    backend: str
    # The engine runs in this process and holds the GIL through every call (the embedded one):
    # the caller's other threads, its event loop included, wait for the call wherever it runs.
    holds_gil: bool

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

    def retrieve(self, collection: str, ids: list[str], with_vectors: bool = False) -> list[PointRecord]:
        """The points with these ids, in the order of `ids`; ids not in the store are left out."""

    def facet_counts(self, collection: str, key: str, where: Filter | None = None, limit: int = 100000) -> dict[Any, int]:
        """Distinct values of a keyword payload field with their point counts."""

    # Each query returns its hits' ids and scores, and their payloads unless `with_payload` is false: a payload is read
    # from the store's files (mostly the passage's text), a random read of a large collection's disk for each hit.
    def query_dense(
        self, collection: str, vector: np.ndarray, where: Filter | None, limit: int, with_payload: bool = True
    ) -> list[Hit]: ...

    def query_sparse(
        self, collection: str, vector: SparseVector, where: Filter | None, limit: int, with_payload: bool = True
    ) -> list[Hit]: ...

    def query_hybrid(
        self,
        collection: str,
        dense: np.ndarray,
        sparse: SparseVector,
        where: Filter | None,
        limit: int,
        prefetch_limit: int,
        with_payload: bool = True,
    ) -> list[Hit]:
        """One engine query: dense and sparse prefetches fused with RRF."""

    def similarities(
        self, collection: str, ids: list[str], queries: Sequence[SimilarityQuery], where: Filter | None = None
    ) -> list[dict[str, float]]:
        """For each (vector, using) query, in order, the score of each given point's `using` vector for `vector`,
        computed by the engine in one call: the cosine for DENSE, the cosine of the best-matching window for WINDOWS
        (sentence for SENTENCES: MaxSim), the BM25 score (with the collection's IDF) for SPARSE and a sparse
        `vector`. Points without that vector, with no score (no query word, for SPARSE), or outside `where` when it
        is given, are left out."""

    def collection_storage(self, collection: str) -> CollectionStorage:
        """How the collection keeps its vectors and what it takes on disk; NotFound when it does not exist."""

    def collection_target(self, collection: str) -> str:
        """The collection's own name behind `collection`: the one it names as an alias, else itself. Every
        other method given an alias reaches that collection."""

    def replace_collection(self, collection: str, replacement: str) -> None:
        """Make `collection` name the collection `replacement` at once (as an alias), then drop the
        collection it named before with its points: a caller sees the old one or the new one, never
        neither (except as differences.FIRST_SWAP says). NotFound when `replacement` does not exist."""

    def delete_collection(self, collection: str) -> bool:
        """Drop the collection of this own name (never through an alias) with its points and any alias
        naming it; False when there was none."""

    def optimize(self, collection: str) -> None:
        """Build indexes now and persist them (embedded: HNSW, then a flush that lets the write-ahead log drop what
        the segments hold; server: no-op, the server optimises and flushes by itself)."""

    def close(self) -> None: ...


async def call_store(store: Store, method: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run a blocking `store` method from the event loop: in a thread where the store lets other
    threads run meanwhile (a server's network wait), else inline, since the thread hop would buy
    the loop nothing and cost ~0.5 ms a call (measured on a hybrid query, 2 CPUs)."""
    if store.holds_gil:
        return method(*args, **kwargs)
    return await asyncio.to_thread(method, *args, **kwargs)


async def finish_before_cancel(work: Awaitable[R]) -> R:
    """Await `work` (a blocking write in a thread) to its end: a caller cancelled meanwhile (its client went away)
    waits for it before the cancellation goes on. A thread cannot be stopped, and what the caller holds around the
    write (a book's claim, a collection's sync lock) must stay held until the write is over."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():
            try:
                await asyncio.wait({task})
            except asyncio.CancelledError:
                continue
        if not task.cancelled() and task.exception() is not None:
            log.error("a write whose caller was cancelled failed", exc_info=task.exception())
        raise
