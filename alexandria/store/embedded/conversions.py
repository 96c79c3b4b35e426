"""The store's types and settings as qdrant-edge takes them: points, filters, records, and a new shard's config."""

from __future__ import annotations

from typing import Any, overload

import numpy as np
import qdrant_edge as edge

from alexandria.settings import VectorQuantization
from alexandria.store import schema
from alexandria.store.common import dense_from, dense_list, multivector_list, windows_from
from alexandria.store.embedded import tuning
from alexandria.store.model import (
    DENSE,
    SPARSE,
    WINDOWS,
    CollectionLayout,
    Filter,
    PointRecord,
    SparseVector,
    StoredPoint,
)

# The lexical index by how a collection was laid out (its `on_disk`). In RAM (the engine's default) it is the
# largest part of a big collection's heap, about 1.1 KB a passage; Cold reads it through mmap. Measured on
# 100,000 synthetic points of 150 terms each (qdrant-edge 0.9, a fresh process): 108 MB of heap in RAM, none
# Cold; a lexical search 2.5 -> 2.7-2.9 ms p50 with its pages in the page cache. (Float16 weights saved 14 MB.)
SPARSE_VECTORS = {
    on_disk: {SPARSE: edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf,
                                                  memory=edge.Memory.Cold if on_disk else None)}
    for on_disk in (False, True)
}

# Pinned: the quantised copies stay in RAM, where the search over all of them runs.
_QUANTIZATION: dict[VectorQuantization, edge.ScalarQuantizationConfig | edge.BinaryQuantizationConfig | None] = {
    "none": None,
    # The 0.99 quantile bounds the int8 range, so a few outlying components do not coarsen all the others.
    "int8": edge.ScalarQuantizationConfig(edge.ScalarType.Int8, quantile=0.99, memory=edge.Memory.Pinned),
    "binary": edge.BinaryQuantizationConfig(memory=edge.Memory.Pinned),
}


def new_shard_config(layout: CollectionLayout, dimension: int, optimizers: edge.EdgeOptimizersConfig,
                     search_threads: int) -> edge.EdgeConfig:
    """What a new shard of `dimension` dense vectors is made with: its vectors as `layout` says, these search
    threads and optimizers."""
    # Cold: read through mmap, never loaded whole; None: the engine's default (Cached, loaded into RAM).
    originals = edge.Memory.Cold if layout.on_disk else None
    return edge.EdgeConfig(
        vectors={
            DENSE: edge.EdgeVectorParams(
                size=dimension,
                distance=edge.Distance.Cosine,
                memory=originals,
                quantization_config=_QUANTIZATION[layout.quantization],
                hnsw_config=edge.HnswIndexConfig(
                    m=layout.hnsw_m, ef_construct=layout.hnsw_ef_construct,
                    full_scan_threshold=tuning.FULL_SCAN_THRESHOLD_KB,
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
                    m=0, ef_construct=100, full_scan_threshold=tuning.FULL_SCAN_THRESHOLD_KB
                ),
            ),
        },
        sparse_vectors=SPARSE_VECTORS[layout.on_disk],
        payload_memory=originals,
        optimizers=optimizers,
        max_search_threads=search_threads,
    )


PayloadIndexParams = (
    edge.KeywordIndexParams | edge.IntegerIndexParams | edge.BoolIndexParams | edge.TextIndexParams
)


def payload_indexes(on_disk: bool) -> list[tuple[str, PayloadIndexParams]]:
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
def to_edge_filter(where: Filter) -> edge.Filter: ...
@overload
def to_edge_filter(where: Filter | None) -> edge.Filter | None: ...
def to_edge_filter(where: Filter | None) -> edge.Filter | None:
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


def to_edge_point(point: StoredPoint) -> edge.Point:
    vectors: dict[str, edge.NamedVector] = {DENSE: dense_list(point.dense)}
    if point.sparse is not None:
        vectors[SPARSE] = to_edge_sparse(point.sparse)
    if point.windows is not None:
        vectors[WINDOWS] = multivector_list(point.windows)
    return edge.Point(point.id, vectors, point.payload)


def to_edge_sparse(vector: SparseVector) -> edge.SparseVector:
    return edge.SparseVector(vector.indices, vector.values)


def to_record(record: edge.Record) -> PointRecord:
    return PointRecord(id=str(record.id), payload=record.payload or {}, dense=dense_from(record.vector),
                       windows=windows_from(record.vector))
