"""The embedded backend: Qdrant's engine in this process (qdrant-edge), no server to run.

One EdgeShard per collection in `<root>/<collection>/`, and beside it what qdrant-edge has no place for
(sidecars.py). New shards are laid out as the settings say (model.CollectionLayout); a shard keeps its layout,
which qdrant-edge records in its own `edge_config.json`. One process owns the store (ownership.py).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as edge

from alexandria.store.common import (
    check_dimension,
    collection_not_found,
    dense_list,
    dense_query,
    disk_usage,
    store_closed,
    vector_selector,
)
from alexandria.store.embedded import merge_steps, sidecars, tuning
from alexandria.store.embedded.background_merges import BackgroundMerges
from alexandria.store.embedded.conversions import (
    PayloadIndexParams,
    new_shard_config,
    payload_indexes,
    to_edge_filter,
    to_edge_point,
    to_edge_sparse,
    to_record,
)
from alexandria.store.embedded.deletions import delete_matching, matching_ids
from alexandria.store.embedded.kept_facets import KeptFacets
from alexandria.store.embedded.ownership import hold, open_shard
from alexandria.store.embedded.readahead import read_windows_at_random
from alexandria.store.embedded.search_depth import SearchDepth
from alexandria.store.embedded.shard_access import ShardAccess
from alexandria.store.embedded.shard_files import (
    engine_config,
    load_config,
    quantization_of,
    remove_interrupted_merges,
    segments_of,
    shard_segments,
)
from alexandria.store.model import (
    DENSE,
    SPARSE,
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

log = logging.getLogger(__name__)


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
            indexing_threshold=tuning.INDEXING_THRESHOLD_KB,
            default_segment_number=tuning.SEGMENTS,
            max_segment_size=max_segment_kb,
        )
        self._depth = SearchDepth(layout)
        self._shards: dict[str, edge.EdgeShard] = {}  # by the collection's own name
        self._access = ShardAccess()
        self._merges = BackgroundMerges(self, root, search_threads, max_segment_kb, merged_segment_kb)
        self._aliases: dict[str, str] = sidecars.read_aliases(root)
        self._closed = False
        # Re-entrant: ensure_collection holds it while looking a shard up, which may load one.
        self._shards_lock = threading.RLock()
        self._optimize_lock = threading.Lock()
        self._facets = KeptFacets()
        self._held: int | None = None  # the store's lock (ownership.hold), released by close

    @classmethod
    def open(
        cls, root: Path, search_threads: int, layout: CollectionLayout, max_segment_kb: int, merged_segment_kb: int
    ) -> EmbeddedStore:
        """Open the store at `root` (created if missing) and every collection in it, each searching
        with `search_threads` threads and merging segments up to `max_segment_kb` of vectors in this process,
        and more than tuning.SEGMENTS of them up to `merged_segment_kb` in a child (0: never); collections it creates
        are laid out as `layout` says."""
        root.mkdir(parents=True, exist_ok=True)
        held = hold(root)
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
        log.info("embedded store at %s: %d collection(s) opened in %.2f s", root, len(store._shards),
                 time.perf_counter() - started)
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
            quantization=quantization_of(engine_config(path)),
            disk_bytes=disk_usage(path) + disk_usage(sidecars.sidecar_path(self._root, target)),
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
            sidecars.write_aliases(self._root, aliases)
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
                sidecars.write_aliases(self._root, aliases)
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
        missing = [(name, index) for name, index in payload_indexes(self._layout.on_disk) if name not in indexed]
        if missing:
            with self._writing(collection) as writable:
                self._create_payload_indexes(writable, missing)
        return info

    def lay_out_payload_indexes(self, collection: str) -> None:
        """Build again each payload index of `collection` made otherwise than a new collection's (`alexandria compact`
        does, for a collection made before they moved to disk); blocks while the engine reads every point."""
        with self._writing(collection) as shard:
            self._create_payload_indexes(shard, payload_indexes(self._layout.on_disk))

    @staticmethod
    def _create_payload_indexes(shard: edge.EdgeShard, indexes: list[tuple[str, PayloadIndexParams]]) -> None:
        # An index asked for as it stands is left alone: the engine builds only what differs.
        for field_name, index in indexes:
            shard.update(edge.UpdateOperation.create_field_index(field_name, index))

    # writes

    def upsert(self, collection: str, points: list[StoredPoint]) -> None:
        """Insert or replace these points (same id: replaced whole)."""
        if points:
            self._merges.make_room(self.collection_target(collection), points)
            with self._writing(collection) as shard:
                shard.update(edge.UpdateOperation.upsert_points([to_edge_point(p) for p in points]))
                self._merges.written_again(self.collection_target(collection), (point.id for point in points))

    def set_payload(self, collection: str, where: Filter, payload: dict[str, Any]) -> None:
        """Merge `payload` into every point matching `where`."""
        with self._writing(collection) as shard:
            shard.update(edge.UpdateOperation.set_payload_by_filter(to_edge_filter(where), payload))

    def delete(self, collection: str, where: Filter) -> int:
        """Delete matching points; return how many there were."""
        condition = to_edge_filter(where)
        with self._writing(collection) as shard:
            self._merges.deleting(self.collection_target(collection), lambda: matching_ids(shard, condition))
            return delete_matching(shard, condition)

    def optimize(self, collection: str) -> None:
        """Index and merge segments now, then flush them so that the WAL can drop what they hold; blocks, and
        pauses the process's Python threads (qdrant-edge holds the GIL throughout: tuning.py keeps it short). Then,
        past tuning.SEGMENTS segments, merges the smallest in the background (background_merges.py). While a
        background merge's child runs, it only flushes: the step indexes what was written meanwhile when it ends.

        qdrant-edge indexes and merges segments only inside optimize(), and drops a 32 MB segment of its write-ahead
        log only once a flush has written its updates into the segments; nothing flushes by itself while a shard is
        open. Flushed after each book (ingest optimizes after each), the WAL stayed between 30 and 64 MB; without,
        it grew 7.5 MB a book (90 MB after 12 books of 300 passages)."""
        target = self.collection_target(collection)
        with self._writing(collection) as shard:
            if not self._merges.child_running(target):
                self._optimize(collection, shard)
            shard.flush()
            self._measure(target)
        self._merge_in_background(target)

    def dense_search(self, collection: str, largest_factor: float = tuning.LARGE_SEGMENT_EF_FACTOR) -> DenseSearch:
        """How a dense search of `collection` (or the collection it is an alias of) searches each of its segments:
        deeper in large segments (up to `largest_factor` times the settings' ef), less in each of many small ones,
        else as the settings say."""
        return self._depth.dense_search(self._aliases.get(collection, collection), largest_factor)

    def merging(self, collection: str) -> bool:
        """Whether segments of `collection` are being merged in the background."""
        return self._merges.running(self.collection_target(collection))

    def finish_merges(self) -> None:
        """Wait until the background merges under way, and those they lead to, are done."""
        self._merges.finish()

    def _search_note(self, collection: str) -> str:
        """What `alexandria status` says of a collection searched otherwise than the settings say, or being merged
        ("" when neither)."""
        target = self.collection_target(collection)
        notes = [note] if (note := self._depth.note(target)) else []
        if self.merging(collection):
            notes.append(f"its smallest segments are being merged in the background (past {tuning.SEGMENTS} segments): "
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
            return shard.count(edge.CountRequest(exact=True, filter=to_edge_filter(where)))

    def scroll(
        self, collection: str, where: Filter | None, limit: int, with_vectors: bool = False
    ) -> list[PointRecord]:
        """Up to `limit` points matching `where`, in id order."""
        request = edge.ScrollRequest(
            limit=limit, filter=to_edge_filter(where), with_payload=True, with_vector=vector_selector(with_vectors)
        )
        with self._using(collection) as shard:
            records, _next_offset = shard.scroll(request)
        return [to_record(r) for r in records]

    def retrieve(self, collection: str, ids: list[str], with_vectors: bool = False) -> list[PointRecord]:
        """The points with these ids, in the order of `ids`; ids not in the store are left out."""
        if not ids:
            return []
        point_ids: list[edge.PointId] = [*ids]  # the stub takes only its own list type
        with self._using(collection) as shard:
            records = shard.retrieve(point_ids, with_payload=True, with_vector=vector_selector(with_vectors))
        return [to_record(r) for r in records]

    def facet_counts(
        self, collection: str, key: str, where: Filter | None = None, limit: int = 100000
    ) -> dict[Any, int]:
        """Distinct values of a keyword payload field with their point counts (kept until the collection changes)."""
        request = edge.FacetRequest(check_facet_key(key), limit=limit, exact=True, filter=to_edge_filter(where))

        def read() -> dict[Any, int]:
            with self._using(collection) as shard:
                return {hit.value: hit.count for hit in shard.facet(request)}

        return self._facets.counts(self.collection_target(collection), (key, repr(where), limit), read)

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
        return self._query(collection, edge.Query.Nearest(to_edge_sparse(vector), using=SPARSE), where, limit,
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
                limit=prefetch_limit, query=edge.Query.Nearest(to_edge_sparse(sparse), using=SPARSE)
            ),
        ]
        return self._query(collection, edge.Fusion.Rrf(k=tuning.RRF_K), where, limit, with_payload, prefetches)

    def similarities(
        self, collection: str, ids: list[str], queries: Sequence[SimilarityQuery], where: Filter | None = None
    ) -> list[dict[str, float]]:
        """Each query's score of each point's vector, in one engine call (see the protocol): a call costs
        ~0.5 ms whatever it asks, a query against 50 points a tenth of that."""
        if not ids:
            return [{} for _ in queries]
        only = to_edge_filter(replace(where or Filter(), ids=tuple(ids)))
        requests = []
        for vector, using in queries:
            query = to_edge_sparse(vector) if isinstance(vector, SparseVector) else dense_query(vector, using)
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
            self._merges.stop_all()
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
            filter=to_edge_filter(where),
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
        with self._access.using(target):
            shard = self._find_shard(target, resolve=False)
            if shard is None and must_exist:
                raise collection_not_found(collection)
            yield shard  # type: ignore[misc]  # None only where the caller asked for it

    @contextmanager
    def _writing(self, collection: str) -> Iterator[edge.EdgeShard]:
        """The shard of `collection`, written by this block alone, never while a background merge stages or swaps
        its segments."""
        target = self.collection_target(collection)
        try:
            with self.write_lock(target), self._using(collection) as shard:
                yield shard
        finally:
            self._facets.written(target)

    def _optimize(self, collection: str, shard: edge.EdgeShard) -> None:
        with self._optimize_lock:
            started = time.perf_counter()
            if shard.optimize():
                log.info("optimized %s in %.2f s", collection, time.perf_counter() - started)

    # what background merges use (background_merges.MergedStore)

    def write_lock(self, target: str) -> threading.Lock:
        """What each write of the collection of own name `target` holds, and a background merge while it stages or
        swaps its segments."""
        return self._access.write_lock(target)

    def flush(self, target: str) -> None:
        """Write what the write-ahead log of the collection of own name `target` holds into its segments."""
        with self._using(target) as shard:
            shard.flush()

    def segments(self, target: str) -> int:
        """The segments of the collection of own name `target`, as last measured."""
        return self._depth.segments(target)

    def swap_segments(self, target: str, move: Callable[[], None]) -> None:
        """Close the shard of own name `target` once no thread uses it, `move` its segments, load it again however
        that ended, and index what was written meanwhile; the caller holds its write lock."""
        with self._access.swapping(target):
            # The closed shard stays in _shards meanwhile: whatever looks the collection up under
            # _shards_lock alone (replace_collection) finds it there, and loads no second one beside.
            self._shards[target].close()
            try:
                move()
            finally:
                shard = self._reload_after_swap(target)
        self._optimize(target, shard)  # what was written during the step
        shard.flush()
        self._measure(target)

    def _measure(self, target: str) -> None:
        """Count the segments of the shard of `target` and the vectors of its largest sealed one, and advise random
        reads of their windows (readahead.py): whatever changed its segments mapped their files anew."""
        read_windows_at_random(self._root / target)
        self._depth.measured(target, segments_of(self._root / target))

    def _merge_in_background(self, target: str) -> None:
        """Start merging the smallest segments of `target` in a child process, one step after another while the
        collection has more than tuning.SEGMENTS (background_merges.py), unless merges are off or under way."""
        if not self._merges.enabled or not self._depth.past_segment_cap(target):
            return
        with self._shards_lock:
            if not self._closed:
                self._merges.start(target)

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
        path = self._root / target
        shard = merge_steps.load_completing_swap(path, self._root / merge_steps.MERGES_FOLDER / target,
                                                 self._load_shard)
        remove_interrupted_merges(path)
        self._measure(target)
        return shard

    def _create_shard(self, collection: str, dimension: int, metadata: dict[str, Any]) -> edge.EdgeShard:
        path = self._root / collection
        config = new_shard_config(self._layout, dimension, self._optimizers, self._search_threads)
        # Shard first: its creation is what fails when another process got there, and then
        # that process's metadata file must not be overwritten.
        shard = open_shard(path, lambda: edge.EdgeShard.create(str(path), config))
        sidecars.write_sidecar(self._root, collection, {"vector_size": dimension, "metadata": metadata})
        self._shards[collection] = shard
        log.info("created collection %s (%d dims, %s) at %s", collection, dimension, self._layout, path)
        return shard

    def _load_shard(self, path: Path) -> edge.EdgeShard:
        config = load_config(path, self._optimizers, self._search_threads)
        return open_shard(path, lambda: edge.EdgeShard.load(str(path), config))

    def _info(self, collection: str, shard: edge.EdgeShard) -> CollectionInfo:
        """The collection as the caller named it, read from the shard and sidecar of what the name resolves to."""
        sidecar = sidecars.read_sidecar(self._root, self.collection_target(collection))
        return CollectionInfo(
            name=collection,
            points_count=shard.count(edge.CountRequest(exact=True)),
            vector_size=sidecar["vector_size"],
            status="green",
            metadata=sidecar["metadata"],
        )

    def _drop(self, collection: str) -> None:
        """Close and delete the shard of this own name and its sidecar (nothing when there is none)."""
        self._merges.stop(collection)
        with self._shards_lock:
            shard = self._shards.pop(collection, None)
            self._depth.forget(collection)
            self._facets.written(collection)
            if shard is not None:
                shard.close()
            shutil.rmtree(self._root / collection, ignore_errors=True)
            sidecars.sidecar_path(self._root, collection).unlink(missing_ok=True)
        log.info("dropped collection %s", collection)

    def _dense_params(self, collection: str, hybrid_prefetch: bool = False) -> edge.SearchParams:
        return self._depth.dense_params(self._aliases.get(collection, collection), hybrid_prefetch)

