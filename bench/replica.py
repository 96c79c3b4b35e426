"""A large collection from a small real one: its books copied under new book keys and ids.

Real ingested points (chapters and their passages, window multivectors, lexical vectors, text) are
read once from a source collection and written again, copy after copy, into another collection through
the store adapter: copy `c` of a point gets the id uuid5(COPY_NAMESPACE, "c/<source id>"), its book the
key "<key>-copy<c>", and its chunk vector a little Gaussian noise (then normalised again), so that the
copies keep the distribution of real vectors without being exact duplicates. bench.query and
bench.scale build their collections with it.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from alexandria.store import Filter, PointRecord, SparseVector, Store, StoredPoint
from alexandria.store import schema as f
from services.ingest.writer import lexical_vector

VECTOR_NOISE = 0.02
UPSERT_BATCH = 1000
# Copies written between two optimize() calls: indexing as the collection grows keeps each optimize short
# (alexandria/store/embedded.py).
COPIES_PER_ROUND = 10
COPY_NAMESPACE = uuid.UUID("0d9b1f40-5a6f-4f0e-9d61-7a3c2b8e4c11")
SEED = 7

log = logging.getLogger("bench.replica")


@dataclass(frozen=True)
class SourceBooks:
    """The complete points of a source collection, with what copying them needs."""

    records: list[PointRecord]
    lexical: dict[str, SparseVector | None]
    vector_size: int
    metadata: dict[str, Any]

    @classmethod
    def read(cls, store: Store, collection: str) -> SourceBooks:
        info = store.collection_info(collection)
        if info is None or not info.points_count:
            raise SystemExit(f"the source collection {collection!r} is empty: ingest some books into it first")
        records = store.scroll(collection, Filter(must={f.COMPLETE: True}), limit=10**7, with_vectors=True)
        lexical = {r.id: lexical_vector(f.Level(r.payload[f.LEVEL]), str(r.payload[f.TEXT])) for r in records}
        return cls(records, lexical, info.vector_size, info.metadata)

    @property
    def books(self) -> int:
        """Books in one copy."""
        return len({r.payload[f.BOOK_KEY] for r in self.records})

    @property
    def passages(self) -> int:
        """Searchable points (every one but the chapters) in one copy."""
        return sum(r.payload.get(f.LEVEL) != f.Level.PARENT for r in self.records)

    def copies_for(self, points: int) -> int:
        """Copies that hold at least `points` points."""
        return math.ceil(points / len(self.records))

    def point_id(self, copy: int, source_id: str) -> str:
        return str(uuid.uuid5(COPY_NAMESPACE, f"{copy}/{source_id}"))

    def copy(self, copies: range, rng: np.random.Generator) -> list[StoredPoint]:
        """Copies number `copies` of every source point, in source order, chunk vectors nudged apart."""
        points = []
        for copy in copies:
            new_id = {r.id: self.point_id(copy, r.id) for r in self.records}
            for r in self.records:
                payload = {
                    **r.payload,
                    f.BOOK_KEY: f"{r.payload[f.BOOK_KEY]}-copy{copy}",
                    # Not the source's path: removing a book ingested during a run must not hit copies.
                    f.FILE_PATH: f"{r.payload.get(f.FILE_PATH, '')}#copy{copy}",
                    f.COMPLETE: True,
                }
                if r.payload.get(f.PARENT_ID):
                    payload[f.PARENT_ID] = new_id[r.payload[f.PARENT_ID]]
                assert r.dense is not None  # scrolled with vectors
                dense = r.dense + rng.normal(0, VECTOR_NOISE, r.dense.shape).astype(np.float32)
                points.append(
                    StoredPoint(new_id[r.id], dense / np.linalg.norm(dense), self.lexical[r.id], payload, r.windows)
                )
        return points


@dataclass(frozen=True)
class Written:
    """What one `write_copies` call wrote and the time it took: upserts, and optimize (indexing) apart."""

    points: int
    upsert_s: float
    optimize_s: float

    @property
    def seconds(self) -> float:
        return self.upsert_s + self.optimize_s


def write_copies(
    store: Store,
    source: SourceBooks,
    collection: str,
    copies: range,
    on_round: Callable[[int, list[StoredPoint]], None] = lambda first_copy, points: None,
) -> Written:
    """Write copies number `copies` of the source into `collection` (created if missing), optimizing
    after every COPIES_PER_ROUND copies; `on_round` sees each round's first copy number and points.

    The noise of copy `c` depends on `c` alone, so a collection grown in several calls holds the
    same vectors as one written in a single call.
    """
    store.ensure_collection(collection, source.vector_size, source.metadata)
    upsert_s = optimize_s = 0.0
    written = 0
    for first in range(copies.start, copies.stop, COPIES_PER_ROUND):
        rng = np.random.default_rng([SEED, first])
        points = source.copy(range(first, min(first + COPIES_PER_ROUND, copies.stop)), rng)
        on_round(first, points)
        started = time.perf_counter()
        for start in range(0, len(points), UPSERT_BATCH):
            store.upsert(collection, points[start : start + UPSERT_BATCH])
        upserted = time.perf_counter()
        store.optimize(collection)
        upsert_s += upserted - started
        optimize_s += time.perf_counter() - upserted
        written += len(points)
        log.info("%s: %d copies, %d points written (%.0f points/s)", collection, min(first + COPIES_PER_ROUND,
                 copies.stop), written, written / (upsert_s + optimize_s))
    return Written(written, upsert_s, optimize_s)
