"""How collections keep their vectors (StoreSettings' QDRANT_* storage fields), on both backends, and what a
collection takes on disk."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from pydantic import ValidationError
from qdrant_client import QdrantClient, models

import alexandria.store.embedded as embedded_module
import alexandria.store.server as server_module
from alexandria.errors import FailedPrecondition
from alexandria.settings import StoreSettings
from alexandria.store import DENSE, WINDOWS, Store, StoredPoint, lexical, open_store
from alexandria.store.common import disk_usage
from alexandria.store.differences import LAYOUT
from alexandria.store.model import SPARSE, CollectionLayout
from store.synthetic import (
    COLLECTION,
    DIMENSION,
    METADATA,
    PASSAGES,
    axis,
    engine_of,
    point_id,
    settings_for,
    stored_point,
)

LAYOUT_SETTINGS = {
    "qdrant_quantization": "binary",
    "qdrant_on_disk": True,
    "qdrant_hnsw_m": 32,
    "qdrant_hnsw_ef_construct": 200,
}


@pytest.fixture
def laid_out(backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """A store whose collections quantise their dense vectors (binary) and keep their originals on disk.

    The embedded engine indexes (and so quantises) a segment only past its indexing threshold: lowered here
    to none, so that optimize() turns these few points into a quantised segment, as it would a library.
    """
    monkeypatch.setattr(embedded_module, "_INDEXING_THRESHOLD_KB", 0)
    opened = open_store(settings_for(backend, tmp_path).model_copy(update=LAYOUT_SETTINGS))
    opened.ensure_collection(COLLECTION, DIMENSION, METADATA)
    opened.upsert(COLLECTION, [stored_point(p) for p in PASSAGES])
    opened.optimize(COLLECTION)
    yield opened
    opened.close()


def test_the_quantization_is_a_setting_and_the_graphs_tuning_is_fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"QDRANT_QUANTIZATION": "binary", "QDRANT_QUANTIZATION_OVERSAMPLING": "3",
                        "QDRANT_HNSW_M": "32", "QDRANT_HNSW_EF_CONSTRUCT": "256", "QDRANT_HNSW_EF": "512"}.items():
        monkeypatch.setenv(name, value)

    assert CollectionLayout.of(StoreSettings()) == CollectionLayout("binary", 2.0, True, 16, 100, 256)
    tuned = StoreSettings(qdrant_quantization_oversampling=3, qdrant_hnsw_m=32, qdrant_hnsw_ef_construct=256,
                          qdrant_hnsw_ef=512)
    assert CollectionLayout.of(tuned) == CollectionLayout("binary", 3.0, True, 32, 256, 512)

    monkeypatch.setenv("QDRANT_QUANTIZATION", "int4")
    with pytest.raises(ValidationError, match="'none', 'int8' or 'binary'"):
        StoreSettings()


def test_by_default_collections_keep_an_int8_copy_in_ram_and_their_originals_on_disk(store: Store) -> None:
    store.ensure_collection(COLLECTION, DIMENSION, METADATA)
    assert store.collection_storage(COLLECTION).quantization == "int8"
    assert CollectionLayout.of(StoreSettings()) == CollectionLayout("int8", 2.0, True, 16, 100, 256)


def test_quantised_vectors_are_searched_with_the_scores_of_the_originals(backend: str, laid_out: Store,
                                                                          tmp_path: Path) -> None:
    assert laid_out.collection_storage(COLLECTION).quantization == "binary"
    if not LAYOUT.applies_to(engine_of(backend)):
        assert list(tmp_path.rglob("quantized.meta.json")), "the engine built no quantised copy to search"

    query = axis(0, tilt=3)
    exact = {point_id(p.name): float(np.dot(query, p.dense)) for p in PASSAGES}
    hits = laid_out.query_dense(COLLECTION, query, None, limit=3)

    # Binary codes alone score whale, letter and ship alike (6.0, 6.0, 4.0 matching bits): rescoring with
    # the original vectors gives the cosines, and their order.
    assert [h.payload["name"] for h in hits] == ["whale", "ship", "letter"]
    for hit in hits:
        assert hit.score == pytest.approx(exact[hit.id], abs=1e-5)
    assert laid_out.similarities(COLLECTION, list(exact), [(query, DENSE)])[0] == pytest.approx(exact, abs=1e-5)
    hybrid = laid_out.query_hybrid(COLLECTION, query, lexical.encode_query("letter"), None, limit=2, prefetch_limit=3)
    assert {h.payload["name"] for h in hybrid} == {"whale", "letter"}


def test_the_embedded_engine_records_the_layout(tmp_path: Path) -> None:
    store = open_store(settings_for("embedded", tmp_path).model_copy(update=LAYOUT_SETTINGS))
    try:
        store.ensure_collection(COLLECTION, DIMENSION, METADATA)
    finally:
        store.close()

    config = json.loads((tmp_path / "store" / COLLECTION / "edge_config.json").read_text())
    dense, windows = config["vectors"][DENSE], config["vectors"][WINDOWS]
    assert dense["quantization_config"] == {"binary": {"memory": "pinned"}}
    assert (dense["hnsw_config"]["m"], dense["hnsw_config"]["ef_construct"]) == (32, 200)
    assert dense["memory"] == windows["memory"] == config["payload_memory"] == "cold"
    assert config["sparse_vectors"][SPARSE]["memory"] == "cold"  # the lexical index, read through mmap
    assert windows["hnsw_config"]["m"] == 0 and "quantization_config" not in windows


def test_local_mode_records_the_layout_of_each_vector(tmp_path: Path) -> None:
    store = open_store(settings_for("server", tmp_path).model_copy(update=LAYOUT_SETTINGS))
    try:
        store.ensure_collection(COLLECTION, DIMENSION, METADATA)
    finally:
        store.close()

    client = QdrantClient(path=str(tmp_path / "qdrant-local"))
    try:
        params = client.get_collection(COLLECTION).config.params
    finally:
        client.close()
    vectors, sparse = params.vectors, params.sparse_vectors
    assert isinstance(vectors, dict) and sparse is not None
    lexical_index = sparse[SPARSE].index
    assert lexical_index is not None and lexical_index.on_disk is True
    dense, windows = vectors[DENSE], vectors[WINDOWS]
    assert isinstance(dense.quantization_config, models.BinaryQuantization)
    assert dense.quantization_config.binary.always_ram is True
    assert dense.hnsw_config == models.HnswConfigDiff(m=32, ef_construct=200)
    assert dense.on_disk is True and windows.on_disk is True
    assert windows.quantization_config is None


class RecordingClient(QdrantClient):
    """qdrant-client, local mode underneath, that keeps the arguments of each create_collection: local mode
    ignores a cluster's and the WAL's (differences.LAYOUT), a server applies them."""

    creates: ClassVar[list[dict[str, Any]]] = []

    def create_collection(self, collection_name: str, **kwargs: Any) -> bool:
        RecordingClient.creates.append(kwargs)
        return super().create_collection(collection_name, **kwargs)


def test_a_cluster_and_the_wal_shape_every_collection_the_server_backend_creates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_module, "QdrantClient", RecordingClient)
    RecordingClient.creates = []
    cluster = {"qdrant_shard_number": 6, "qdrant_replication_factor": 2, "qdrant_write_consistency_factor": 2,
               "qdrant_wal_capacity_mb": 8}
    store = open_store(settings_for("server", tmp_path).model_copy(update=cluster))
    try:
        store.ensure_collection(COLLECTION, DIMENSION, METADATA)
        store.ensure_collection("other", DIMENSION, METADATA)
    finally:
        store.close()

    assert len(RecordingClient.creates) == 2
    for arguments in RecordingClient.creates:
        assert (arguments["shard_number"], arguments["replication_factor"], arguments["write_consistency_factor"]) == (6, 2, 2)
        assert arguments["wal_config"] == models.WalConfigDiff(wal_capacity_mb=8)


def test_unset_cluster_settings_leave_the_server_its_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_module, "QdrantClient", RecordingClient)
    RecordingClient.creates = []
    store = open_store(settings_for("server", tmp_path))
    try:
        store.ensure_collection(COLLECTION, DIMENSION, METADATA)
    finally:
        store.close()

    (arguments,) = RecordingClient.creates
    assert not {"shard_number", "replication_factor", "write_consistency_factor", "wal_config"} & set(arguments)
    assert arguments["on_disk_payload"] is True  # QDRANT_ON_DISK's default, and the server's own


@pytest.mark.parametrize("setting", ["qdrant_shard_number", "qdrant_replication_factor",
                                     "qdrant_write_consistency_factor", "qdrant_wal_capacity_mb"])
def test_the_embedded_store_refuses_a_servers_settings(tmp_path: Path, setting: str) -> None:
    with pytest.raises(FailedPrecondition, match=f"{setting.upper()} shape a Qdrant server's") as refused:
        open_store(settings_for("embedded", tmp_path).model_copy(update={setting: 2}))
    assert "QDRANT_URL" in refused.value.message
    assert not (tmp_path / "store").exists()


def test_storage_counts_the_blocks_the_collection_takes_on_disk(backend: str, store: Store, tmp_path: Path) -> None:
    store.ensure_collection(COLLECTION, DIMENSION, METADATA)
    store.upsert(COLLECTION, [stored_point(p) for p in PASSAGES])
    before = store.collection_storage(COLLECTION)

    rng = np.random.default_rng(7)
    many = [StoredPoint(point_id(f"extra-{n}"), rng.standard_normal(DIMENSION).astype(np.float32),
                        lexical.encode_document("the grey sea " * 50), {"n": n}) for n in range(3000)]
    for start in range(0, len(many), 500):
        store.upsert(COLLECTION, many[start : start + 500])
    after = store.collection_storage(COLLECTION)

    assert before.disk_bytes is not None and after.disk_bytes is not None
    assert 0 < before.disk_bytes < after.disk_bytes
    # Blocks, not file sizes: the engines make files of a set size (qdrant-edge's WAL: 2 x 32 MB) and fill them.
    assert after.disk_bytes <= disk_usage(tmp_path)
    assert after.wal_bytes is not None and after.wal_bytes <= after.disk_bytes
    if backend == "embedded":
        assert after.wal_bytes > 0
