"""The store's types and settings as qdrant-client takes them: points, filters, records, collection options."""

from __future__ import annotations

from typing import Any

from qdrant_client import models

from alexandria.settings import StoreSettings, VectorQuantization
from alexandria.store import schema
from alexandria.store.common import dense_from, dense_list, multivector_list, windows_from
from alexandria.store.model import DENSE, SPARSE, WINDOWS, Filter, PointRecord, SparseVector, StoredPoint

# always_ram: the quantised copies stay in RAM, where the search over all of them runs; the 0.99 quantile
# bounds the int8 range, so a few outlying components do not coarsen all the others.
QUANTIZATION: dict[VectorQuantization, models.QuantizationConfig | None] = {
    "none": None,
    "int8": models.ScalarQuantization(
        scalar=models.ScalarQuantizationConfig(type=models.ScalarType.INT8, quantile=0.99, always_ram=True)
    ),
    "binary": models.BinaryQuantization(binary=models.BinaryQuantizationConfig(always_ram=True)),
}


def cluster_and_wal_options(settings: StoreSettings) -> dict[str, Any]:
    """The create_collection arguments a server takes beyond the layout (a cluster's, the WAL's): those set."""
    options: dict[str, Any] = {
        "shard_number": settings.qdrant_shard_number,
        "replication_factor": settings.qdrant_replication_factor,
        "write_consistency_factor": settings.qdrant_write_consistency_factor,
    }
    if settings.qdrant_wal_capacity_mb is not None:
        options["wal_config"] = models.WalConfigDiff(wal_capacity_mb=settings.qdrant_wal_capacity_mb)
    return {name: value for name, value in options.items() if value is not None}


def quantization_of(config: models.QuantizationConfig | None) -> str:
    """The quantisation word of a collection's config (product: one Alexandria never makes, but a server may hold)."""
    if config is None:
        return "none"
    if isinstance(config, models.ScalarQuantization):
        return "int8"
    return "binary" if isinstance(config, models.BinaryQuantization) else "product"


def payload_indexes(on_disk: bool) -> list[tuple[str, models.PayloadSchemaParams]]:
    """Each indexed field and its index, as the embedded store makes them (embedded.payload_indexes says why)."""
    def on_disk_for(name: str) -> bool:
        return on_disk and name not in schema.EVERY_SEARCH_FILTERS

    return [
        *((name, models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, on_disk=on_disk_for(name)))
          for name in schema.KEYWORD_INDEXES),
        *((name, models.IntegerIndexParams(type=models.IntegerIndexType.INTEGER, lookup=True, range=True,
                                           on_disk=on_disk_for(name))) for name in schema.INTEGER_INDEXES),
        *((name, models.BoolIndexParams(type=models.BoolIndexType.BOOL, on_disk=on_disk_for(name)))
          for name in schema.BOOL_INDEXES),
        *((name, models.TextIndexParams(type=models.TextIndexType.TEXT, tokenizer=models.TokenizerType.WORD,
                                        lowercase=True, ascii_folding=True, on_disk=on_disk_for(name)))
          for name in schema.TEXT_INDEXES),
    ]


def to_qdrant_filter(where: Filter | None) -> models.Filter | None:
    """The one translation of a model Filter into qdrant-client conditions."""
    if where is None:
        return None
    must: list[models.Condition] = [_condition(key, value) for key, value in where.must.items()]
    must += [
        models.FieldCondition(key=key, match=models.MatchText(text=words))
        for key, words in where.text.items()
    ]
    if where.ids:
        must.append(models.HasIdCondition(has_id=list(where.ids)))
    must_not: list[models.Condition] = [_condition(key, value) for key, value in where.must_not.items()]
    return models.Filter(must=must or None, must_not=must_not or None)  # no conditions: every point


def _condition(key: str, value: Any) -> models.FieldCondition:
    match = models.MatchAny(any=value) if isinstance(value, list) else models.MatchValue(value=value)
    return models.FieldCondition(key=key, match=match)


def to_point_struct(point: StoredPoint) -> models.PointStruct:
    vectors: dict[str, Any] = {DENSE: dense_list(point.dense)}
    if point.sparse is not None:
        vectors[SPARSE] = to_qdrant_sparse(point.sparse)
    if point.windows is not None:
        vectors[WINDOWS] = multivector_list(point.windows)
    return models.PointStruct(id=point.id, vector=vectors, payload=point.payload)


def to_qdrant_sparse(vector: SparseVector) -> models.SparseVector:
    return models.SparseVector(indices=vector.indices, values=vector.values)


def to_record(record: models.Record) -> PointRecord:
    return PointRecord(id=str(record.id), payload=record.payload or {}, dense=dense_from(record.vector),
                       windows=windows_from(record.vector))
