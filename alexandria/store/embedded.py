"""The embedded backend: Qdrant's engine in this process (qdrant-edge), no server to run.

Layout: one EdgeShard per collection in `<root>/<collection>/`, and beside it
`<root>/<collection>.json` holding what a shard cannot: the dense vector size and the
collection metadata (which model made the vectors), written atomically right after the
shard is created. New shards are laid out as the settings say (model.CollectionLayout); a shard
keeps its layout, which qdrant-edge records in its own `edge_config.json`.

Aliases, which qdrant-edge has not: `<root>/aliases.json` maps a name users give to the
collection it names (a reindex builds a new collection and then points the user's name at it).
Every method resolves the name it is given through the map, held in memory and replaced on disk
atomically (written aside, renamed over) before the collection it named before is dropped. A crash
between the two leaves that old collection shadowed by the alias; `open` drops it.

One process at a time: every shard keeps its write-ahead log locked while open, and the
WAL stays enabled so that a second process opening the same store fails instead of
corrupting it. `EmbeddedStore.open` loads every shard at once, so the second opener fails
at start with a FailedPrecondition naming the path, not later on some query.

Optimize policy. EdgeShard builds HNSW indexes and merges segments only inside
`optimize()`, which blocks until done, and qdrant-edge 0.9 holds the GIL throughout
(measured: a Python thread that ticks every millisecond saw a single gap as long as the
whole optimize; queries and updates hold it too, so two threads querying at once run one
after the other, correctly). An optimize on a background thread is therefore safe, but
it pauses every other Python thread of the process, the gRPC event loops included, for
its duration. So the policy is to keep each optimize small and most of them empty:
- points land in an unindexed segment; it is searched by brute force, which is
  sub-millisecond below `_INDEXING_THRESHOLD_KB` (about 6,500 vectors of 384 floats);
  optimize() after a book that leaves it below the threshold returns at once;
- once it passes the threshold, optimize() indexes that segment alone (~4 s for
  6,500 vectors of 384 floats on 2 busy cores);
- up to `_SEGMENTS` segments are kept before the smallest are merged, and merged
  segments stop growing at EMBEDDED_MAX_SEGMENT_MB, which bounds the longest pause. With the
  engine's defaults (segments = CPU count, no size cap) every indexing step merged into
  one big segment and re-indexed everything: the pauses grew with the library (23 s at
  14,000 points); with these settings they stayed flat (2-5 s up to 60,000 points).
  The cap applies to every shard the process opens: a merge it allows pauses this process.
- A large library's queries are faster on fewer, larger segments: past _SEGMENTS, the smallest are merged into
  one of up to EMBEDDED_MERGED_SEGMENT_MB in a child process, which takes no GIL of this one, while the shard
  keeps answering (merging.py). Writes go on meanwhile, unindexed until the step ends (the engine's optimizer
  could otherwise merge or vacuum the very segments the child reads), and wait for the step only once they hold
  more vectors than one merge in this process makes (EMBEDDED_MAX_SEGMENT_MB). `alexandria compact` merges a
  stopped stack's collection at once.
One optimize runs at a time; a caller arriving meanwhile waits, then usually finds
nothing left to do. Queries never need optimize to be correct, only to be fast.

The write-ahead log. qdrant-edge writes every update to its WAL, in segments of a fixed 32 MB (not
configurable in qdrant-edge 0.9), and drops a segment only once a flush has written its updates
into the shard's segments; nothing flushes by itself while the shard is open. So optimize(), which
ingest calls after each book, ends with a flush: measured writing books of 300 passages through this
adapter, the WAL held 90 MB (real blocks) after 12 books and grew 7.5 MB a book without it, and stayed
between 30 and 64 MB with it (one closed segment kept, the open one filling).

Status is always "green": optimize() is synchronous and holds the process while it runs,
so no caller in this process can observe a collection mid-optimisation.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import logging
import os
import shutil
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict, overload

import numpy as np
import qdrant_edge as edge

from alexandria.errors import FailedPrecondition
from alexandria.settings import VectorQuantization
from alexandria.store import merging, schema
from alexandria.store.common import (
    check_dimension,
    collection_not_found,
    dense_from,
    dense_list,
    dense_query,
    disk_usage,
    multivector_list,
    store_closed,
    vector_selector,
    windows_from,
    write_json_atomically,
)
from alexandria.store.model import (
    DENSE,
    HYBRID_PREFETCH_EF_FACTOR,
    HYBRID_PREFETCH_RESCORES,
    SPARSE,
    WINDOWS,
    CollectionInfo,
    CollectionLayout,
    CollectionStorage,
    DenseSearch,
    Filter,
    Hit,
    PointRecord,
    SimilarityQuery,
    SparseVector,
    Store,
    StoredPoint,
    check_collection_name,
    check_facet_key,
    is_collection_name,
)
from alexandria.store.readahead import read_windows_at_random

log = logging.getLogger(__name__)


class _Sidecar(TypedDict):
    """What `<root>/<collection>.json` holds beside a shard."""

    vector_size: int
    metadata: dict[str, Any]


@dataclass
class _Merge:
    """A collection's background merges (merging.py): the thread that runs them one after another, and its child.

    While a step's child runs, the collection takes writes as before. A point written again (a book ingested again,
    a payload changed) gets a newer version than its copy in the merged segment, and a shard keeps the newest copy of
    a point when it loads, so such writes need nothing more. The ids of the points deleted are kept, less those
    written again since (a deletion by filter applied again after the swap would also delete those), and deleted
    again from the merged segment.
    """

    thread: threading.Thread
    cancelled: threading.Event = field(default_factory=threading.Event)
    process: subprocess.Popen[bytes] | None = None
    child_running: bool = False
    bytes_written: int = 0  # vectors upserted since the child started
    deleted_ids: set[str] = field(default_factory=set)
    # Held while the child is started or stopped, and while the fields above change; notified when a step ends.
    changed: threading.Condition = field(default_factory=threading.Condition)

_ALIASES_FILE = "aliases.json"
# Beside the collections: a leading dot is never a collection name.
_STORE_LOCK = ".lock"
# The same ef finds less in a larger graph, so a collection whose largest segment holds more than
# _LARGE_SEGMENT_BYTES of vectors visits QDRANT_HNSW_EF times their ratio, up to LARGE_SEGMENT_EF_FACTOR times.
# At 10,000 books (3 million passages): 57 segments of up to 100 MB found 0.9995 of the exact 10 by distance at ef
# 256; merged into 7 of about 800 MB, 0.930 at 256, 0.969 at 512 and 0.985 at 1024 (README).
LARGE_SEGMENT_EF_FACTOR = 4
_LARGE_SEGMENT_BYTES = 200_000_000
# Facet counts read whole collections (a library's listing, its statistics: 5.7-6.5 s for alexandria_stats' at 7,500
# books of 300 points), and qdrant-edge holds the GIL while it counts: every other thread of the process waited up
# to 0.67 s a facet there. The last few read are kept until the collection is written again (0.24-0.29 s: README).
_KEPT_FACETS = 32
# qdrant-edge's own record of a shard's config, in the shard's folder (rewritten whenever it loads it).
_ENGINE_CONFIG = "edge_config.json"
# Where qdrant-edge builds a merged segment before it moves it among the shard's segments.
_MERGES_IN_PROGRESS = "temp_segments"
_INDEXING_THRESHOLD_KB = 10_000
_SEGMENTS = 8
# A collection past _SEGMENTS segments has outgrown what the serving cap merges (about 400,000 passages): each of
# its segments holds a small share of a query's nearest points, so each is searched with half QDRANT_HNSW_EF and
# rescores only as many quantised candidates as it returns. At 10,000 books (57 segments, int8): recall@10 by
# distance 0.9995 -> 0.985, a dense search of 100 candidates 103 -> 38 ms from a cold page cache (most of it the
# rescoring's reads of originals on disk), precise p50 through the stack 171.5 -> 110-126 ms (bench/scale.py --kept, two runs).
# Fewer segments are searched as the settings say: with one segment, oversampling 1 lost 1.4% of the top 50.
MANY_SEGMENTS_EF_SHARE = 0.5
# The lexical index by how a collection was laid out (its `on_disk`). In RAM (the engine's default) it is the
# largest part of a big collection's heap, about 1.1 KB a passage; Cold reads it through mmap. Measured on
# 100,000 synthetic points of 150 terms each (qdrant-edge 0.9, a fresh process): 108 MB of heap in RAM, none
# Cold; a lexical search 2.5 -> 2.7-2.9 ms p50 with its pages in the page cache. (Float16 weights saved 14 MB.)
_SPARSE_VECTORS = {
    on_disk: {SPARSE: edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf,
                                                  memory=edge.Memory.Cold if on_disk else None)}
    for on_disk in (False, True)
}
# What FusionQuery(fusion=RRF) uses on a Qdrant server, so both backends rank alike.
_RRF_K = 2

# Pinned: the quantised copies stay in RAM, where the search over all of them runs.
_QUANTIZATION: dict[VectorQuantization, edge.ScalarQuantizationConfig | edge.BinaryQuantizationConfig | None] = {
    "none": None,
    # The 0.99 quantile bounds the int8 range, so a few outlying components do not coarsen all the others.
    "int8": edge.ScalarQuantizationConfig(edge.ScalarType.Int8, quantile=0.99, memory=edge.Memory.Pinned),
    "binary": edge.BinaryQuantizationConfig(memory=edge.Memory.Pinned),
}
# Qdrant's default: a segment below this many KB of vectors is searched without its graph.
_FULL_SCAN_THRESHOLD_KB = 10_000


class EmbeddedStore(Store):
    """`Store` over qdrant-edge shards under one directory, owned by this process alone."""

    backend = "embedded"
    holds_gil = True

    def __init__(self, root: Path, search_threads: int, layout: CollectionLayout, max_segment_kb: int,
                 merged_segment_kb: int) -> None:
        self._root = root
        self._search_threads = search_threads
        self._layout = layout
        # Applied to every shard this process opens, whatever it was made with: the pauses are this process's.
        self._optimizers = edge.EdgeOptimizersConfig(
            indexing_threshold=_INDEXING_THRESHOLD_KB,
            default_segment_number=_SEGMENTS,
            max_segment_size=max_segment_kb,
        )
        # Rescoring asked for on every dense search: a collection keeps the quantisation it was made with,
        # whatever this process's settings, and an unquantised one ignores it.
        self._set_search = DenseSearch(layout.hnsw_ef, layout.oversampling)
        self._many_segments_search = DenseSearch(max(1, int(layout.hnsw_ef * MANY_SEGMENTS_EF_SHARE)), 1.0)
        self._search_params: dict[tuple[DenseSearch, bool], edge.SearchParams] = {}
        self._merged_bytes = merged_segment_kb * 1000
        self._max_segment_bytes = max_segment_kb * 1000
        self._shards: dict[str, edge.EdgeShard] = {}  # by the collection's own name
        # By own name, measured when a shard loads and after each optimize or merge: its segments, and the
        # vectors of its largest sealed one.
        self._segments: dict[str, int] = {}
        self._largest_segment: dict[str, int] = {}
        # A shard is used by many threads at once but swapped (after a merge) by one with none using it.
        self._use = threading.Condition()
        self._users: Counter[str] = Counter()
        self._being_swapped: set[str] = set()
        # By own name: held by each write, and by a background merge from its plan to its swap.
        self._writes: dict[str, threading.Lock] = {}
        self._writes_lock = threading.Lock()
        self._merges: dict[str, _Merge] = {}
        self._aliases: dict[str, str] = self._read_aliases()
        self._closed = False
        # Re-entrant: ensure_collection holds it while looking a shard up, which may load one.
        self._shards_lock = threading.RLock()
        self._optimize_lock = threading.Lock()
        # By own name: a number drawn anew at each write (and when dropped); facets read at the number they hold.
        self._changes = itertools.count(1)
        self._written: dict[str, int] = {}
        self._facets: dict[tuple[str, str, str, int], tuple[int, dict[Any, int]]] = {}
        self._facets_lock = threading.Lock()
        self._held: int | None = None  # the store's lock (_hold), released by close

    @classmethod
    def open(
        cls, root: Path, search_threads: int, layout: CollectionLayout, max_segment_kb: int, merged_segment_kb: int
    ) -> EmbeddedStore:
        """Open the store at `root` (created if missing) and every collection in it, each searching
        with `search_threads` threads and merging segments up to `max_segment_kb` of vectors in this process,
        and more than _SEGMENTS of them up to `merged_segment_kb` in a child (0: never); collections it creates
        are laid out as `layout` says."""
        root.mkdir(parents=True, exist_ok=True)
        held = _hold(root)
        try:
            store = cls(root, search_threads, layout, max_segment_kb, merged_segment_kb)
        except BaseException:
            os.close(held)
            raise
        store._held = held
        started = time.perf_counter()
        try:
            for shard_dir in sorted(root.iterdir()):
                if not (shard_dir.is_dir() and is_collection_name(shard_dir.name)):
                    continue
                if store._aliases.get(shard_dir.name, shard_dir.name) != shard_dir.name:
                    store._drop(shard_dir.name)  # shadowed by an alias: a swap died before dropping it
                else:
                    store._find_shard(shard_dir.name, resolve=False)
        except BaseException:
            store.close()
            raise
        log.info(
            "embedded store at %s: %d collection(s) opened in %.2f s",
            root,
            len(store._shards),
            time.perf_counter() - started,
        )
        return store

    # collections

    def collection_info(self, collection: str) -> CollectionInfo | None:
        """None when the collection does not exist."""
        with self._using(collection, must_exist=False) as shard:
            return None if shard is None else self._info(collection, shard)

    def collection_target(self, collection: str) -> str:
        """The collection's own name behind `collection` (itself when it is no alias)."""
        check_collection_name(collection)
        if self._closed:
            raise store_closed(str(self._root))
        return self._aliases.get(collection, collection)

    def collection_storage(self, collection: str) -> CollectionStorage:
        """The quantisation the collection was made with, and the blocks its shard takes on disk."""
        with self._using(collection):
            pass  # it exists
        target = self.collection_target(collection)
        path = self._root / target
        return CollectionStorage(
            quantization=_quantization_of(_engine_config(path)),
            disk_bytes=disk_usage(path) + disk_usage(self._sidecar_path(target)),
            wal_bytes=disk_usage(path / "wal"),
            search_note=self._search_note(collection),
        )

    def replace_collection(self, collection: str, replacement: str) -> None:
        """Point `collection` at `replacement` in the alias map (on disk first), then drop what it named."""
        check_collection_name(collection)
        with self._shards_lock:
            if self._find_shard(replacement, resolve=False) is None:
                raise collection_not_found(replacement)
            previous = self.collection_target(collection)
            aliases = {name: target for name, target in self._aliases.items() if name != collection}
            if replacement != collection:
                aliases[collection] = replacement
            self._write_aliases(aliases)
            self._aliases = aliases
            if previous != replacement:
                self._drop(previous)
        log.info("collection %s is now %s (%s dropped)", collection, replacement, previous)

    def delete_collection(self, collection: str) -> bool:
        """Drop the collection of this own name, its points and any alias naming it."""
        check_collection_name(collection)
        if self._closed:
            raise store_closed(str(self._root))
        with self._shards_lock:
            existed = (self._root / collection).is_dir()
            aliases = {name: target for name, target in self._aliases.items() if target != collection}
            if aliases != self._aliases:
                self._write_aliases(aliases)
                self._aliases = aliases
            self._drop(collection)
        return existed

    def ensure_collection(self, collection: str, dimension: int, metadata: dict[str, Any]) -> CollectionInfo:
        """Create the collection (dense cosine + sparse lexical with IDF, payload indexes), or return it."""
        with self._shards_lock:
            if self._find_shard(collection) is None:
                self._create_shard(self.collection_target(collection), dimension, metadata)
        with self._using(collection) as shard:
            info = check_dimension(self._info(collection, shard), dimension, metadata)
            indexed = shard.info().payload_schema
        # A collection made before an index was added to schema.py gets it; the indexes it has stay as they were made.
        missing = [(name, index) for name, index in _payload_indexes(self._layout.on_disk) if name not in indexed]
        if missing:
            with self._writing(collection) as writable:
                self._create_payload_indexes(writable, missing)
        return info

    def lay_out_payload_indexes(self, collection: str) -> None:
        """Build again each payload index of `collection` made otherwise than a new collection's (`alexandria compact`
        does, for a collection made before they moved to disk); blocks while the engine reads every point."""
        with self._writing(collection) as shard:
            self._create_payload_indexes(shard, _payload_indexes(self._layout.on_disk))

    @staticmethod
    def _create_payload_indexes(shard: edge.EdgeShard, indexes: list[tuple[str, PayloadIndexParams]]) -> None:
        # An index asked for as it stands is left alone: the engine builds only what differs.
        for field_name, index in indexes:
            shard.update(edge.UpdateOperation.create_field_index(field_name, index))

    # writes

    def upsert(self, collection: str, points: list[StoredPoint]) -> None:
        """Insert or replace these points (same id: replaced whole)."""
        if points:
            self._make_room(collection, points)
            with self._writing(collection) as shard:
                shard.update(edge.UpdateOperation.upsert_points([_to_edge_point(p) for p in points]))
                merge = self._merges.get(self.collection_target(collection))
                if merge is not None:
                    with merge.changed:
                        merge.deleted_ids.difference_update(point.id for point in points)

    def set_payload(self, collection: str, where: Filter, payload: dict[str, Any]) -> None:
        """Merge `payload` into every point matching `where`."""
        with self._writing(collection) as shard:
            shard.update(edge.UpdateOperation.set_payload_by_filter(_to_edge_filter(where), payload))

    def delete(self, collection: str, where: Filter) -> int:
        """Delete matching points; return how many there were."""
        condition = _to_edge_filter(where)
        with self._writing(collection) as shard:
            merge = self._merges.get(self.collection_target(collection))
            if merge is not None:
                with merge.changed:
                    if merge.child_running:  # the child merges copies of these points from before this deletion
                        merge.deleted_ids.update(_matching_ids(shard, condition))
            return _delete_matching(shard, condition)

    def optimize(self, collection: str) -> None:
        """Index and merge segments now, then flush them so that the WAL can drop what they hold; blocks, and
        pauses the process's Python threads (module docstring). Then, past _SEGMENTS segments, merges the smallest
        in the background (merging.py). While a background merge's child runs, it only flushes: the step indexes
        what was written meanwhile when it ends."""
        target = self.collection_target(collection)
        with self._writing(collection) as shard:
            merge = self._merges.get(target)
            if merge is None or not merge.child_running:
                self._optimize(collection, shard)
            shard.flush()
            self._measure(target)
        self._merge_in_background(target)

    def dense_search(self, collection: str, largest_factor: float = LARGE_SEGMENT_EF_FACTOR) -> DenseSearch:
        """How a dense search of `collection` (or the collection it is an alias of) searches each of its segments:
        deeper in large segments (up to `largest_factor` times the settings' ef), less in each of many small ones,
        else as the settings say."""
        target = self._aliases.get(collection, collection)
        factor = min(largest_factor, self._largest_segment.get(target, 0) / _LARGE_SEGMENT_BYTES)
        if factor > 1:
            return DenseSearch(int(self._layout.hnsw_ef * factor), self._layout.oversampling)
        return self._many_segments_search if self._segments.get(target, 0) > _SEGMENTS else self._set_search

    def merging(self, collection: str) -> bool:
        """Whether segments of `collection` are being merged in the background."""
        merge = self._merges.get(self.collection_target(collection))
        return merge is not None and merge.thread.is_alive()

    def finish_merges(self) -> None:
        """Wait until the background merges under way, and those they lead to, are done."""
        for merge in list(self._merges.values()):
            merge.thread.join()

    def _search_note(self, collection: str) -> str:
        """What `alexandria status` says of a collection searched otherwise than the settings say, or being merged
        ("" when neither)."""
        target = self.collection_target(collection)
        search = self.dense_search(collection)
        notes = []
        if search != self._set_search:
            largest = self._largest_segment.get(target, 0)
            why = (f"its largest segment holds {largest / 1e6:.0f} MB of vectors" if largest > _LARGE_SEGMENT_BYTES
                   else f"{self._segments[target]} segments, past {_SEGMENTS}")
            prefetch_ef = self.dense_search(collection, HYBRID_PREFETCH_EF_FACTOR).hnsw_ef
            hybrid = f" (a hybrid search's dense half {prefetch_ef})" if prefetch_ef != search.hnsw_ef else ""
            notes.append(f"dense searches visit {search.hnsw_ef} candidates a segment{hybrid}, and a semantic search rescores "
                         f"{search.oversampling:g}x its results ({why}; QDRANT_HNSW_EF {self._layout.hnsw_ef}, "
                         f"QDRANT_QUANTIZATION_OVERSAMPLING {self._layout.oversampling:g})")
        if self.merging(collection):
            notes.append(f"its smallest segments are being merged in the background (past {_SEGMENTS} segments): "
                         "books written meanwhile are indexed once it ends")
        return "; ".join(notes)

    def segment_count(self, collection: str) -> int:
        """The segments of the collection's shard: every query searches each of them."""
        with self._using(collection):
            return shard_segments(self._root / self.collection_target(collection))

    # reads

    def count(self, collection: str, where: Filter | None = None) -> int:
        """Exact number of points matching `where` (all points when None)."""
        with self._using(collection) as shard:
            return shard.count(edge.CountRequest(exact=True, filter=_to_edge_filter(where)))

    def scroll(
        self, collection: str, where: Filter | None, limit: int, with_vectors: bool = False
    ) -> list[PointRecord]:
        """Up to `limit` points matching `where`, in id order."""
        request = edge.ScrollRequest(
            limit=limit, filter=_to_edge_filter(where), with_payload=True, with_vector=vector_selector(with_vectors)
        )
        with self._using(collection) as shard:
            records, _next_offset = shard.scroll(request)
        return [_to_record(r) for r in records]

    def retrieve(self, collection: str, ids: list[str], with_vectors: bool = False) -> list[PointRecord]:
        """The points with these ids, in the order of `ids`; ids not in the store are left out."""
        if not ids:
            return []
        point_ids: list[edge.PointId] = [*ids]  # the stub takes only its own list type
        with self._using(collection) as shard:
            records = shard.retrieve(point_ids, with_payload=True, with_vector=vector_selector(with_vectors))
        return [_to_record(r) for r in records]

    def facet_counts(
        self, collection: str, key: str, where: Filter | None = None, limit: int = 100000
    ) -> dict[Any, int]:
        """Distinct values of a keyword payload field with their point counts (kept until the collection changes)."""
        request = edge.FacetRequest(check_facet_key(key), limit=limit, exact=True, filter=_to_edge_filter(where))
        target = self.collection_target(collection)
        kept_as = (target, key, repr(where), limit)
        # Drawn before the read: a write during it leaves what it read stale, and this number with it.
        written = self._written.get(target, 0)
        with self._facets_lock:
            kept = self._facets.get(kept_as)
        if kept is not None and kept[0] == written:
            return dict(kept[1])
        with self._using(collection) as shard:
            counts = {hit.value: hit.count for hit in shard.facet(request)}
        with self._facets_lock:
            self._facets.pop(kept_as, None)
            self._facets[kept_as] = (written, counts)
            while len(self._facets) > _KEPT_FACETS:
                del self._facets[next(iter(self._facets))]
        return dict(counts)

    def query_dense(
        self, collection: str, vector: np.ndarray, where: Filter | None, limit: int, with_payload: bool = True
    ) -> list[Hit]:
        """Nearest points by cosine similarity of the dense vectors."""
        return self._query(collection, edge.Query.Nearest(dense_list(vector), using=DENSE), where, limit, with_payload,
                           params=self._dense_params(collection))

    def query_sparse(
        self, collection: str, vector: SparseVector, where: Filter | None, limit: int, with_payload: bool = True
    ) -> list[Hit]:
        """Best points by lexical (BM25 with the collection's IDF) score; none for an empty vector."""
        return self._query(collection, edge.Query.Nearest(_to_edge_sparse(vector), using=SPARSE), where, limit,
                           with_payload)

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
        """One engine query: dense and sparse prefetches (filtered alike) fused with RRF."""
        prefetches = [
            edge.Prefetch(
                limit=prefetch_limit,
                query=edge.Query.Nearest(dense_list(dense), using=DENSE),
                params=self._dense_params(collection, hybrid_prefetch=True),
            ),
            edge.Prefetch(
                limit=prefetch_limit, query=edge.Query.Nearest(_to_edge_sparse(sparse), using=SPARSE)
            ),
        ]
        return self._query(collection, edge.Fusion.Rrf(k=_RRF_K), where, limit, with_payload, prefetches)

    def similarities(
        self, collection: str, ids: list[str], queries: Sequence[SimilarityQuery], where: Filter | None = None
    ) -> list[dict[str, float]]:
        """Each query's score of each point's vector, in one engine call (see the protocol): a call costs
        ~0.5 ms whatever it asks, a query against 50 points a tenth of that."""
        if not ids:
            return [{} for _ in queries]
        only = _to_edge_filter(replace(where or Filter(), ids=tuple(ids)))
        requests = []
        for vector, using in queries:
            query = _to_edge_sparse(vector) if isinstance(vector, SparseVector) else dense_query(vector, using)
            requests.append(edge.QueryRequest(
                limit=len(ids),
                query=edge.Query.Nearest(query, using=using),
                filter=only,
                with_payload=False,
                with_vector=False,
                params=self._dense_params(collection) if using == DENSE else None,
            ))
        with self._using(collection) as shard:
            answers = shard.query_batch(edge.QueryBatchRequest(requests))
        return [{str(p.id): float(p.score) for p in points} for points in answers]

    def close(self) -> None:
        """Stop the background merges (a merge stopped leaves the shard as it was), then flush and close every shard,
        releasing their locks; later calls raise Unavailable."""
        with self._shards_lock:
            self._closed = True
        try:
            for target in list(self._merges):
                self._stop_merge(target)
            with self._shards_lock:
                shards, self._shards = self._shards, {}
            for shard in shards.values():
                shard.close()
        finally:
            if self._held is not None:
                os.close(self._held)
                self._held = None

    # internals

    def _query(
        self,
        collection: str,
        query: Any,
        where: Filter | None,
        limit: int,
        with_payload: bool,
        prefetches: list[edge.Prefetch] | None = None,
        params: edge.SearchParams | None = None,
    ) -> list[Hit]:
        # A filter on the request also applies inside its prefetches, so both candidate lists obey it.
        request = edge.QueryRequest(
            limit=limit,
            query=query,
            prefetches=prefetches,
            params=params,
            filter=_to_edge_filter(where),
            with_payload=with_payload,
            with_vector=False,
        )
        with self._using(collection) as shard:
            points = shard.query(request)
        return [Hit(id=str(p.id), score=p.score, payload=p.payload or {}) for p in points]

    @contextmanager
    def _using(self, collection: str, must_exist: bool = True) -> Iterator[edge.EdgeShard]:
        """The shard of `collection`, not swapped while the block runs (None only when it does not exist and not
        `must_exist`, which raises NotFound)."""
        target = self.collection_target(collection)
        with self._use:
            self._use.wait_for(lambda: target not in self._being_swapped)
            self._users[target] += 1
        try:
            shard = self._find_shard(target, resolve=False)
            if shard is None and must_exist:
                raise collection_not_found(collection)
            yield shard  # type: ignore[misc]  # None only where the caller asked for it
        finally:
            with self._use:
                self._users[target] -= 1
                self._use.notify_all()

    @contextmanager
    def _writing(self, collection: str) -> Iterator[edge.EdgeShard]:
        """The shard of `collection`, written by this block alone, never while a background merge stages or swaps
        its segments."""
        target = self.collection_target(collection)
        try:
            with self._write_lock(target), self._using(collection) as shard:
                yield shard
        finally:
            self._written[target] = next(self._changes)

    def _make_room(self, collection: str, points: list[StoredPoint]) -> None:
        """While a background merge's child runs, wait for it to end if the vectors written meanwhile (not indexed
        until it ends) would pass what one merge in this process makes; then count these."""
        merge = self._merges.get(self.collection_target(collection))
        if merge is None:
            return
        written = sum(_vector_bytes(point) for point in points)
        with merge.changed:
            merge.changed.wait_for(lambda: not merge.child_running or merge.cancelled.is_set()
                                   or merge.bytes_written + written <= self._max_segment_bytes)
            if merge.child_running:
                merge.bytes_written += written

    def _optimize(self, collection: str, shard: edge.EdgeShard) -> None:
        with self._optimize_lock:
            started = time.perf_counter()
            if shard.optimize():
                log.info("optimized %s in %.2f s", collection, time.perf_counter() - started)

    def _write_lock(self, target: str) -> threading.Lock:
        """What each write of the collection of own name `target` holds, and a background merge while it stages or
        swaps its segments."""
        with self._writes_lock:
            return self._writes.setdefault(target, threading.Lock())

    @contextmanager
    def _swapping(self, target: str) -> Iterator[None]:
        """Wait until no thread uses the shard of `target`, and keep new ones waiting while the block runs."""
        with self._use:
            self._being_swapped.add(target)
            self._use.wait_for(lambda: self._users[target] == 0)
        try:
            yield
        finally:
            with self._use:
                self._being_swapped.discard(target)
                self._use.notify_all()

    def _measure(self, target: str) -> None:
        """Count the segments of the shard of `target` and the vectors of its largest sealed one, and advise random
        reads of their windows (readahead.py): whatever changed its segments mapped their files anew."""
        read_windows_at_random(self._root / target)
        segments = merging.segments_of(self._root / target)
        self._segments[target] = len(segments)
        self._largest_segment[target] = max((s.vector_bytes for s in segments if s.sealed), default=0)

    def _merge_in_background(self, target: str) -> None:
        """Start merging the smallest segments of `target` in a child process, one step after another while the
        collection has more than _SEGMENTS (merging.py), unless merges are off or already under way."""
        if not self._merged_bytes or self._segments.get(target, 0) <= _SEGMENTS:
            return
        with self._shards_lock:
            if self._closed or ((running := self._merges.get(target)) and running.thread.is_alive()):
                return
            thread = threading.Thread(target=self._merge_while_due, args=(target,), name=f"merge-{target}")
            self._merges[target] = _Merge(thread)
            thread.start()

    def _merge_while_due(self, target: str) -> None:
        merge = self._merges[target]
        path = self._root / target
        work = self._root / merging.MERGES_FOLDER / target
        try:
            self._merge_steps(target, merge, path, work)
        except Exception:
            if not merge.cancelled.is_set():  # a store closed or a collection dropped under it ends it by design
                log.exception("the background merge of %s stopped", target)
        finally:
            merging.forget_unless_swapped(work)

    def _merge_steps(self, target: str, merge: _Merge, path: Path, work: Path) -> None:
        """Merge the smallest segments of `target`, one step after another while some are due (merging.py)."""
        while not merge.cancelled.is_set():
            with self._write_lock(target):
                with self._using(target) as shard:
                    shard.flush()
                chosen = merging.plan(path, _SEGMENTS, self._merged_bytes)
                if not chosen:
                    return
                merging.stage(path, chosen, work)
                started = time.perf_counter()
                megabytes = sum(s.vector_bytes for s in chosen) / 1e6
                log.info("merging %d of the %d segments of %s (%.0f MB of vectors) in the background", len(chosen),
                         self._segments[target], target, megabytes)
                with merge.changed:
                    if merge.cancelled.is_set():
                        return
                    # Its log goes where this process's does; stdout may be a protocol's (MCP over stdio).
                    merge.process = subprocess.Popen(
                        merging.child_command(work, self._merged_bytes // 1000, _INDEXING_THRESHOLD_KB,
                                              self._search_threads),
                        stdout=subprocess.DEVNULL)
                    merge.child_running = True
            try:
                if merge.process.wait() != 0 or merge.cancelled.is_set():
                    if not merge.cancelled.is_set():
                        log.error("the merge of %s failed (exit status %d): its segments stay as they were", target,
                                  merge.process.returncode)
                    return
                with self._write_lock(target):
                    with self._swapping(target):
                        # The closed shard stays in _shards meanwhile: whatever looks the collection up under
                        # _shards_lock alone (replace_collection) finds it there, and loads no second one beside.
                        self._shards[target].close()
                        with merge.changed:
                            deleted, merge.deleted_ids = merge.deleted_ids, set()
                        try:
                            merging.swap_in(path, work, chosen, deleted)
                        finally:
                            shard = self._reload_after_swap(target)
                    self._optimize(target, shard)  # what was written during the step
                    shard.flush()
                    self._measure(target)
            finally:
                with merge.changed:
                    merge.child_running = False
                    merge.bytes_written = 0
                    merge.deleted_ids.clear()  # deleted already from the shard it merged from, which stays
                    merge.changed.notify_all()
            log.info("merged %d segments of %s (%.0f MB of vectors) in %.0f s: %d segments now", len(chosen), target,
                     megabytes, time.perf_counter() - started, self._segments[target])

    def _stop_merge(self, target: str) -> None:
        """Stop the background merges of `target` and wait for their thread: a child stopped leaves the shard as
        it was."""
        merge = self._merges.pop(target, None)
        if merge is None:
            return
        with merge.changed:
            merge.cancelled.set()
            if merge.process is not None and merge.process.poll() is None:
                merge.process.terminate()
            merge.changed.notify_all()
        merge.thread.join()

    def _find_shard(self, collection: str, resolve: bool = True) -> edge.EdgeShard | None:
        """The shard of `collection` (through the alias map unless not `resolve`), None when there is none."""
        check_collection_name(collection)
        if resolve:
            collection = self._aliases.get(collection, collection)
        shard = self._shards.get(collection)
        if shard is not None:
            return shard
        if self._closed:
            raise store_closed(str(self._root))
        path = self._root / collection
        if not path.is_dir():
            return None
        with self._shards_lock:
            if collection not in self._shards:
                self._shards[collection] = self._load_recovering(collection)
            return self._shards[collection]

    def _reload_after_swap(self, target: str) -> edge.EdgeShard:
        """Load the shard of `target` again however its swap ended, as after a crash: one that failed midway is
        completed from its journal, or forgotten before it. If the load fails, the closed shard leaves _shards, so
        that the collection's next use tries again."""
        try:
            shard = self._shards[target] = self._load_recovering(target)
        except BaseException:
            with self._shards_lock:
                self._shards.pop(target, None)
            raise
        return shard

    def _load_recovering(self, target: str) -> edge.EdgeShard:
        """Load the shard of own name `target`, completing first a background merge's swap that a crash or a failure
        stopped midway (its journal), and deleting then the points deleted while that merge's child ran."""
        path, work = self._root / target, self._root / merging.MERGES_FOLDER / target
        deleted = merging.complete_swap(path, work)
        shard = self._load_shard(path)
        if deleted:
            _delete_matching(shard, _to_edge_filter(Filter(ids=tuple(deleted))))
        merging.forget(work)
        _remove_interrupted_merges(path)
        self._measure(target)
        return shard

    def _create_shard(self, collection: str, dimension: int, metadata: dict[str, Any]) -> edge.EdgeShard:
        path = self._root / collection
        layout = self._layout
        # Cold: read through mmap, never loaded whole; None: the engine's default (Cached, loaded into RAM).
        originals = edge.Memory.Cold if layout.on_disk else None
        config = edge.EdgeConfig(
            vectors={
                DENSE: edge.EdgeVectorParams(
                    size=dimension,
                    distance=edge.Distance.Cosine,
                    memory=originals,
                    quantization_config=_QUANTIZATION[layout.quantization],
                    hnsw_config=edge.HnswIndexConfig(
                        m=layout.hnsw_m, ef_construct=layout.hnsw_ef_construct,
                        full_scan_threshold=_FULL_SCAN_THRESHOLD_KB,
                    ),
                ),
                # Read back with hits to score them, never searched: no index to build; half
                # precision halves the largest part of the store at no cost to a cosine's 2nd decimal.
                WINDOWS: edge.EdgeVectorParams(
                    size=dimension,
                    distance=edge.Distance.Cosine,
                    datatype=edge.VectorStorageDatatype.Float16,
                    memory=originals,
                    multivector_config=edge.MultiVectorConfig(edge.MultiVectorComparator.MaxSim),
                    hnsw_config=edge.HnswIndexConfig(
                        m=0, ef_construct=100, full_scan_threshold=_FULL_SCAN_THRESHOLD_KB
                    ),
                ),
            },
            sparse_vectors=_SPARSE_VECTORS[layout.on_disk],
            payload_memory=originals,
            optimizers=self._optimizers,
            max_search_threads=self._search_threads,
        )
        # Shard first: its creation is what fails when another process got there, and then
        # that process's metadata file must not be overwritten.
        shard = self._open_shard(path, lambda: edge.EdgeShard.create(str(path), config))
        self._write_sidecar(collection, {"vector_size": dimension, "metadata": metadata})
        self._shards[collection] = shard
        log.info("created collection %s (%d dims, %s) at %s", collection, dimension, layout, path)
        return shard

    def _load_shard(self, path: Path) -> edge.EdgeShard:
        config = load_config(path, self._optimizers, self._search_threads)
        return self._open_shard(path, lambda: edge.EdgeShard.load(str(path), config))

    def _open_shard(self, path: Path, opener: Callable[[], edge.EdgeShard]) -> edge.EdgeShard:
        try:
            return opener()
        except Exception as exc:
            # qdrant-edge raises a bare Exception; a locked WAL or segments that appeared under
            # us both mean another process owns this store.
            message = str(exc)
            if "WAL" in message or "already contains segment data" in message:
                raise _held_elsewhere(path) from exc
            raise

    def _info(self, collection: str, shard: edge.EdgeShard) -> CollectionInfo:
        """The collection as the caller named it, read from the shard and sidecar of what the name resolves to."""
        sidecar = self._read_sidecar(self.collection_target(collection))
        return CollectionInfo(
            name=collection,
            points_count=shard.count(edge.CountRequest(exact=True)),
            vector_size=sidecar["vector_size"],
            status="green",
            metadata=sidecar["metadata"],
        )

    def _drop(self, collection: str) -> None:
        """Close and delete the shard of this own name and its sidecar (nothing when there is none)."""
        self._stop_merge(collection)
        with self._shards_lock:
            shard = self._shards.pop(collection, None)
            self._segments.pop(collection, None)
            self._largest_segment.pop(collection, None)
            self._written[collection] = next(self._changes)
            if shard is not None:
                shard.close()
            shutil.rmtree(self._root / collection, ignore_errors=True)
            self._sidecar_path(collection).unlink(missing_ok=True)
        log.info("dropped collection %s", collection)

    def _dense_params(self, collection: str, hybrid_prefetch: bool = False) -> edge.SearchParams:
        """The engine's parameters for `collection`'s dense searches (dense_search); a hybrid query's dense prefetch
        searches large segments less deep, and may leave a quantised segment's candidates in their quantised order
        (model.HYBRID_PREFETCH_EF_FACTOR, HYBRID_PREFETCH_RESCORES)."""
        if hybrid_prefetch:
            search, rescore = self.dense_search(collection, HYBRID_PREFETCH_EF_FACTOR), HYBRID_PREFETCH_RESCORES
        else:
            search, rescore = self.dense_search(collection), True
        if (search, rescore) not in self._search_params:
            self._search_params[search, rescore] = edge.SearchParams(
                hnsw_ef=search.hnsw_ef,
                quantization=edge.QuantizationSearchParams(rescore=rescore, oversampling=search.oversampling),
            )
        return self._search_params[search, rescore]

    def _read_aliases(self) -> dict[str, str]:
        path = self._root / _ALIASES_FILE
        if not path.is_file():
            return {}
        aliases: dict[str, str] = json.loads(path.read_text(encoding="utf-8"))
        return aliases

    def _write_aliases(self, aliases: dict[str, str]) -> None:
        write_json_atomically(self._root / _ALIASES_FILE, aliases)

    def _sidecar_path(self, collection: str) -> Path:
        return self._root / f"{collection}.json"

    def _read_sidecar(self, collection: str) -> _Sidecar:
        sidecar = self._stored_sidecar(collection)
        if sidecar is None:
            raise FailedPrecondition(
                f"Collection '{collection}' has lost its metadata file {self._sidecar_path(collection)}; "
                "delete the collection's directory and ingest its books again."
            )
        return sidecar

    def _stored_sidecar(self, collection: str) -> _Sidecar | None:
        try:
            sidecar: _Sidecar = json.loads(self._sidecar_path(collection).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        return sidecar

    def _write_sidecar(self, collection: str, content: _Sidecar) -> None:
        write_json_atomically(self._sidecar_path(collection), content)


def _held_elsewhere(path: Path) -> FailedPrecondition:
    return FailedPrecondition(f"Another process holds the store at {path}; stop it, or point ALEXANDRIA_DATA_DIR "
                              "elsewhere, or use a Qdrant server (QDRANT_URL).")


def _hold(root: Path) -> int:
    """Lock the store at `root` for this process (its file descriptor, closed by `close`), before anything in it is
    read or changed: a second opener would otherwise complete or forget the owner's merges, or drop a collection, on
    its way to the shard locks that refuse it."""
    descriptor = os.open(root / _STORE_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise _held_elsewhere(root) from None
    return descriptor


def _matching_ids(shard: edge.EdgeShard, condition: edge.Filter) -> list[str]:
    matching = shard.count(edge.CountRequest(exact=True, filter=condition))
    if not matching:
        return []
    records, _next_offset = shard.scroll(edge.ScrollRequest(limit=matching, filter=condition, with_payload=False,
                                                            with_vector=False))
    return [str(record.id) for record in records]


def _delete_matching(shard: edge.EdgeShard, condition: edge.Filter) -> int:
    """Delete the points matching `condition` from `shard`; how many there were."""
    matching = shard.count(edge.CountRequest(exact=True, filter=condition))
    if matching:
        shard.update(edge.UpdateOperation.delete_points_by_filter(condition))
    return matching


def load_config(path: Path, optimizers: edge.EdgeOptimizersConfig, search_threads: int) -> edge.EdgeConfig:
    """What the shard at `path` is loaded with: these search threads and optimizers; its vectors as it was made.

    qdrant-edge wants one vector family in a config, checks the dense ones against the shard's, but
    records the sparse ones given as the shard's own, for the segments it makes next: so they are the
    shard's own, read back from its record (collections made before the lexical index could be kept
    on disk have it in RAM).
    """
    recorded = _engine_config(path)["sparse_vectors"][SPARSE]
    return edge.EdgeConfig(
        sparse_vectors=_SPARSE_VECTORS[recorded.get("memory") == "cold"],
        optimizers=optimizers,
        max_search_threads=search_threads,
    )


def shard_segments(shard_path: Path) -> int:
    """The segments in the shard at `shard_path`; ones a merge replaced may stay listed until it is closed."""
    return sum(1 for segment in (shard_path / "segments").iterdir() if segment.is_dir())


def _remove_interrupted_merges(shard_path: Path) -> None:
    """Delete the segments a merge was still building when its process died (a stopped `alexandria compact`
    leaves gigabytes there), as a Qdrant server does when it loads a shard; qdrant-edge leaves them. Only
    once the shard is loaded: its lock then says no other process is merging into that folder."""
    builds = shard_path / _MERGES_IN_PROGRESS
    left = list(builds.iterdir()) if builds.is_dir() else []
    if not left:
        return
    size = disk_usage(builds)
    for build in left:  # the folder itself is the engine's
        if build.is_dir():
            shutil.rmtree(build)
        else:
            build.unlink()
    log.warning("removed %.1f MB of segments an interrupted merge left in %s", size / 1024**2, builds)


def shard_segment_bytes(shard_path: Path) -> int:
    """The bytes on disk of the segments of the shard at `shard_path` (its write-ahead log apart)."""
    return disk_usage(shard_path / "segments")


def _engine_config(shard_path: Path) -> dict[str, Any]:
    """qdrant-edge's own record of the shard at `shard_path` (its JSON form)."""
    config: dict[str, Any] = json.loads((shard_path / _ENGINE_CONFIG).read_text(encoding="utf-8"))
    return config


def _quantization_of(engine_config: dict[str, Any]) -> str:
    """The quantisation word of the dense vectors in the engine's record of a shard (its JSON form)."""
    dense = engine_config.get("vectors", {}).get(DENSE, {})
    quantization = dense.get("quantization_config") or engine_config.get("quantization_config")
    if not quantization:
        return "none"
    kind = next(iter(quantization))  # the engine writes {"scalar": {...}}, {"binary": {...}} or {"product": ...}
    return "int8" if kind == "scalar" else str(kind)


PayloadIndexParams = (
    edge.KeywordIndexParams | edge.IntegerIndexParams | edge.BoolIndexParams | edge.TextIndexParams
)


def _payload_indexes(on_disk: bool) -> list[tuple[str, PayloadIndexParams]]:
    """Each indexed field and its index as a new collection of the layout gets it (an existing one keeps its own).

    On disk (QDRANT_ON_DISK), an index is read through mmap, but for the two every search filters on
    (schema.EVERY_SEARCH_FILTERS). In RAM the fourteen indexes held about 0.9 KB of heap a passage, two thirds of
    what a collection holds: at 114,912 passages 162 MB of heap, 58 with every index on disk, 62 with those two in
    RAM; at 300,300 (bench/scale.py --sweep, same session) the fused first stage took 9.1 ms with every index in RAM,
    13.5 with every one on disk, 9.2 with those two in RAM. The graph links the engine adds for indexed values
    stay: without them recall@10 by distance fell from 0.995 to 0.989 at the same query time.
    """
    def on_disk_for(name: str) -> bool:
        return on_disk and name not in schema.EVERY_SEARCH_FILTERS

    return [
        *((name, edge.KeywordIndexParams(on_disk=on_disk_for(name))) for name in schema.KEYWORD_INDEXES),
        *((name, edge.IntegerIndexParams(lookup=True, range=True, on_disk=on_disk_for(name)))
          for name in schema.INTEGER_INDEXES),
        *((name, edge.BoolIndexParams(on_disk=on_disk_for(name))) for name in schema.BOOL_INDEXES),
        # The word tokenizer and folding mirror what Filter.text promises: "austen" matches "Jane Austen".
        *((name, edge.TextIndexParams(tokenizer=edge.TokenizerType.Word, lowercase=True, ascii_folding=True,
                                      on_disk=on_disk_for(name))) for name in schema.TEXT_INDEXES),
    ]


@overload
def _to_edge_filter(where: Filter) -> edge.Filter: ...
@overload
def _to_edge_filter(where: Filter | None) -> edge.Filter | None: ...
def _to_edge_filter(where: Filter | None) -> edge.Filter | None:
    """The one translation of a model Filter into qdrant-edge conditions."""
    if where is None:
        return None
    must: list[edge.ConditionType] = [edge.FieldCondition(key, match=_match(value)) for key, value in where.must.items()]
    must += [edge.FieldCondition(key, match=edge.MatchText(words)) for key, words in where.text.items()]
    if where.ids:
        must.append(edge.HasIdCondition(set(where.ids)))
    must_not: list[edge.ConditionType] = [
        edge.FieldCondition(key, match=_match(value)) for key, value in where.must_not.items()
    ]
    return edge.Filter(must=must or None, must_not=must_not or None)  # no conditions: every point


def _match(value: Any) -> edge.MatchValue | edge.MatchAny:
    if isinstance(value, list):
        return edge.MatchAny(value)
    if isinstance(value, bool):
        # qdrant-edge 0.9 reads a Python bool as the integer 1/0, which never equals a stored
        # true/false; numpy's bool is read as a bool.
        # The stub allows no numpy bool, though qdrant-edge reads one as a bool: the point of this line.
        return edge.MatchValue(np.bool_(value))  # type: ignore[arg-type]
    return edge.MatchValue(value)


def _vector_bytes(point: StoredPoint) -> int:
    """What the engine counts of a point against a segment's size (windows are stored in half precision)."""
    return point.dense.size * 4 + (0 if point.windows is None else point.windows.size * 2)


def _to_edge_point(point: StoredPoint) -> edge.Point:
    vectors: dict[str, edge.NamedVector] = {DENSE: dense_list(point.dense)}
    if point.sparse is not None:
        vectors[SPARSE] = _to_edge_sparse(point.sparse)
    if point.windows is not None:
        vectors[WINDOWS] = multivector_list(point.windows)
    return edge.Point(point.id, vectors, point.payload)


def _to_edge_sparse(vector: SparseVector) -> edge.SparseVector:
    return edge.SparseVector(vector.indices, vector.values)


def _to_record(record: edge.Record) -> PointRecord:
    return PointRecord(id=str(record.id), payload=record.payload or {}, dense=dense_from(record.vector),
                       windows=windows_from(record.vector))
