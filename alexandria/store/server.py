"""The server backend: qdrant-client against a Qdrant server, or qdrant-client's local mode.

Same collection shape as the embedded backend: a named cosine dense vector, a named
sparse vector with the IDF modifier, the payload indexes of schema.py (a Word text index
on the author, lowercased and accent-folded), and the model that made the vectors in the
collection's own metadata (`metadata=` on create_collection, Qdrant 1.16+). Hybrid
search is one `query_points` call: a dense and a sparse prefetch fused with RRF.

New collections are laid out as the settings say (model.CollectionLayout: quantisation, vectors and
payloads on disk, HNSW, set per vector so that local mode records them too), and spread over a cluster
with the shard, replication and write-consistency settings and the WAL's segment size when those are set.

Local mode (`QDRANT_LOCAL_PATH`) differs by design as differences.py lists: no payload
indexes (none are requested there), no accent folding in text filters, and its folder is
locked like the embedded store's, so a second opener fails.

A reindex swaps collections with Qdrant's own aliases: every call given an alias reaches the
collection it names, on the server (and in local mode) itself; `replace_collection` moves the alias in
one `update_collection_aliases` call. Qdrant lets no alias take the name of a collection, so the first
swap of a collection made under the user's name deletes it first (differences.FIRST_SWAP).

Needs Qdrant 1.16 or later (collection metadata, ASCII folding); docker-compose.yml pins
one. qdrant-client's own version check is off: it runs on a thread and only warns, and
it calls any server more than one minor version behind the client incompatible.
Connecting contacts nothing, so services may start before the server does; each call
turns "cannot reach the server" into Unavailable, which callers retry.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from qdrant_client import QdrantClient, models
from qdrant_client.common.client_exceptions import ResourceExhaustedResponse
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from alexandria.errors import (
    AlreadyExists,
    DeadlineExceeded,
    FailedPrecondition,
    PermissionDenied,
    ResourceExhausted,
    Unavailable,
)
from alexandria.settings import StoreSettings, VectorQuantization
from alexandria.store import schema
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
)
from alexandria.store.model import (
    DENSE,
    HYBRID_PREFETCH_RESCORES,
    SPARSE,
    WINDOWS,
    CollectionInfo,
    CollectionLayout,
    CollectionStorage,
    Filter,
    Hit,
    PointRecord,
    SimilarityQuery,
    SparseVector,
    Store,
    StoredPoint,
    check_collection_name,
    check_facet_key,
)

log = logging.getLogger(__name__)

# always_ram: the quantised copies stay in RAM, where the search over all of them runs; the 0.99 quantile
# bounds the int8 range, so a few outlying components do not coarsen all the others.
_QUANTIZATION: dict[VectorQuantization, models.QuantizationConfig | None] = {
    "none": None,
    "int8": models.ScalarQuantization(
        scalar=models.ScalarQuantizationConfig(type=models.ScalarType.INT8, quantile=0.99, always_ram=True)
    ),
    "binary": models.BinaryQuantization(binary=models.BinaryQuantizationConfig(always_ram=True)),
}


class ServerStore(Store):
    """`Store` over qdrant-client: a remote Qdrant, or local mode in a folder."""

    backend = "server"
    holds_gil = False

    def __init__(
        self,
        client: QdrantClient,
        location: str,
        builds_indexes: bool,
        layout: CollectionLayout | None = None,
        collection_options: dict[str, Any] | None = None,
        local_path: Path | None = None,
        timeout_s: int | None = None,
    ) -> None:
        """`collection_options`: more keyword arguments of every create_collection (a cluster's, the WAL's);
        `local_path`: local mode's folder, whose files tell what a collection takes on disk; `timeout_s`: the
        client's, for the message of a request that outlasts it."""
        self._client = client
        self._location = location
        self._builds_indexes = builds_indexes
        self._layout = layout or CollectionLayout()
        self._collection_options = collection_options or {}
        self._timeout_s = timeout_s
        # A book's writes depend on their order (write its points, make them visible, drop the old version); with
        # the default (weak) ordering a replica may apply them in another. Through the shard's leader they keep it;
        # a collection with one replica (whatever this process's settings say it was made with) pays nothing.
        self._ordering = models.WriteOrdering.MEDIUM
        self._local_path = local_path
        # Rescoring asked for on every dense search but a hybrid query's prefetch (HYBRID_PREFETCH_RESCORES): a
        # collection keeps the quantisation it was made with, whatever this process's settings, and an unquantised
        # one ignores it. Local mode searches every vector exactly and warns about search parameters (differences.LAYOUT).
        self._dense_search = self._search_params(rescore=True) if builds_indexes else None
        self._hybrid_prefetch_search = self._search_params(HYBRID_PREFETCH_RESCORES) if builds_indexes else None
        self._known_collections: set[str] = set()
        self._closed = False
        # Local mode cannot take two creates at once, and a creator waiting here must find the first one's.
        self._create_lock = threading.Lock()

    def _search_params(self, rescore: bool) -> models.SearchParams:
        return models.SearchParams(
            hnsw_ef=self._layout.hnsw_ef,
            quantization=models.QuantizationSearchParams(rescore=rescore, oversampling=self._layout.oversampling),
        )

    @classmethod
    def connect(cls, settings: StoreSettings) -> ServerStore:
        """A client for the configured server (QDRANT_URL) or qdrant-client's local mode (tests)."""
        api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        layout = CollectionLayout.of(settings)
        options = _collection_options(settings)
        if settings.qdrant_local_path is not None:
            location = f"qdrant-client local mode at {settings.qdrant_local_path}"
            try:
                client = QdrantClient(path=str(settings.qdrant_local_path))
            except RuntimeError as exc:  # its folder lock is taken
                raise FailedPrecondition(
                    f"Another process holds the store at {settings.qdrant_local_path}; stop it, "
                    "or use a Qdrant server (QDRANT_URL) to share one store between processes."
                ) from exc
            return cls(client, location, False, layout, options, local_path=settings.qdrant_local_path)
        timeout_s = settings.qdrant_timeout_s
        client = QdrantClient(url=settings.qdrant_url, api_key=api_key, timeout=timeout_s, check_compatibility=False)
        return cls(client, f"Qdrant at {settings.qdrant_url}", True, layout, options, timeout_s=timeout_s)

    # collections

    def collection_info(self, collection: str) -> CollectionInfo | None:
        """None when the collection does not exist."""
        check_collection_name(collection)
        if self._closed:
            raise store_closed(self._location)
        with self._errors(collection):
            if not self._client.collection_exists(collection):
                return None
            described = self._client.get_collection(collection)
            points = self._client.count(collection, exact=True).count
        vectors = described.config.params.vectors
        if not isinstance(vectors, dict) or DENSE not in vectors:
            raise FailedPrecondition(
                f"Collection '{collection}' in {self._location} has no '{DENSE}' vector: Alexandria did not make it; "
                "use another collection name."
            )
        return CollectionInfo(
            name=collection,
            points_count=points,
            vector_size=vectors[DENSE].size,
            status=described.status.value,
            metadata=dict(described.config.metadata or {}),
        )

    def ensure_collection(self, collection: str, dimension: int, metadata: dict[str, Any]) -> CollectionInfo:
        """Create the collection (dense cosine + sparse lexical with IDF, payload indexes), or return it."""
        with self._create_lock:
            info = self.collection_info(collection)
            if info is None:
                info = self._create_collection(collection, dimension, metadata)
        check_dimension(info, dimension, metadata)
        if self._builds_indexes:
            # A collection made before an index was added to schema.py gets it; the indexes it has stay as they were made.
            with self._errors(collection):
                indexed = self._client.get_collection(collection).payload_schema
                for field_name, index in _payload_indexes(self._layout.on_disk):
                    if field_name not in indexed:
                        self._client.create_payload_index(collection, field_name, index, wait=True)
        self._known_collections.add(collection)
        return info

    def collection_storage(self, collection: str) -> CollectionStorage:
        """The quantisation of the collection's dense vectors, as the engine holds it; its bytes on disk in
        local mode (a server tells no collection's size through its API: None)."""
        target = self.collection_target(self._require(collection))
        with self._errors(collection):
            config = self._client.get_collection(target).config
        vectors = config.params.vectors
        dense = vectors.get(DENSE) if isinstance(vectors, dict) else None
        quantization = _quantization_of((dense.quantization_config if dense else None) or config.quantization_config)
        if self._local_path is None:
            return CollectionStorage(quantization, disk_bytes=None, wal_bytes=None)
        # Local mode keeps a collection in one SQLite file and no write-ahead log of its own.
        return CollectionStorage(
            quantization, disk_bytes=disk_usage(self._local_path / "collection" / target), wal_bytes=0
        )

    def collection_target(self, collection: str) -> str:
        """The collection's own name behind `collection` (itself when it is no alias)."""
        check_collection_name(collection)
        if self._closed:
            raise store_closed(self._location)
        with self._errors(collection):
            aliases = self._client.get_aliases().aliases
        return next((a.collection_name for a in aliases if a.alias_name == collection), collection)

    def replace_collection(self, collection: str, replacement: str) -> None:
        """Point the alias `collection` at `replacement` in one call, then delete what it named before."""
        check_collection_name(collection)
        self._require(replacement)
        # A create of the name waits for the alias: between the first swap's delete and the alias, it would make an
        # empty collection that the alias then cannot take the name of (an ingest writing while a reindex swaps).
        with self._create_lock:
            previous = self.collection_target(collection)
            if previous == replacement:
                return
            moves: list[models.AliasOperations] = [models.CreateAliasOperation(
                create_alias=models.CreateAlias(collection_name=replacement, alias_name=collection))]
            if previous != collection:
                moves.insert(0, models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=collection)))
            else:
                self.delete_collection(collection)  # a collection of the user's name: no alias may take it (FIRST_SWAP)
            with self._errors(collection):
                self._client.update_collection_aliases(change_aliases_operations=moves)
        if previous != collection:
            self.delete_collection(previous)
        log.info("collection %s is now %s (%s dropped) in %s", collection, replacement, previous, self._location)

    def delete_collection(self, collection: str) -> bool:
        """Delete the collection of this own name (Qdrant deletes the aliases naming it)."""
        check_collection_name(collection)
        if self._closed:
            raise store_closed(self._location)
        self._known_collections.discard(collection)
        with self._errors(collection):
            if not self._client.collection_exists(collection) or self.collection_target(collection) != collection:
                return False
            deleted: bool = self._client.delete_collection(collection)
        return deleted

    # writes

    def upsert(self, collection: str, points: list[StoredPoint]) -> None:
        """Insert or replace these points (same id: replaced whole)."""
        if not points:
            return
        with self._errors(self._require(collection)):
            self._client.upsert(collection, [_to_point_struct(p) for p in points], wait=True, ordering=self._ordering)

    def set_payload(self, collection: str, where: Filter, payload: dict[str, Any]) -> None:
        """Merge `payload` into every point matching `where`."""
        with self._errors(self._require(collection)):
            self._client.set_payload(
                collection, payload, points=models.FilterSelector(filter=_to_qdrant_filter(where)), wait=True,
                ordering=self._ordering,
            )

    def delete(self, collection: str, where: Filter) -> int:
        """Delete matching points; return how many there were."""
        condition = _to_qdrant_filter(where)
        with self._errors(self._require(collection)):
            matching = self._client.count(collection, count_filter=condition, exact=True).count
            if matching:
                self._client.delete(collection, models.FilterSelector(filter=condition), wait=True, ordering=self._ordering)
        return matching

    def optimize(self, collection: str) -> None:
        """Nothing to do: a Qdrant server indexes in the background by itself, local mode never does."""
        self._require(collection)

    # reads

    def count(self, collection: str, where: Filter | None = None) -> int:
        """Exact number of points matching `where` (all points when None)."""
        with self._errors(self._require(collection)):
            return self._client.count(collection, count_filter=_to_qdrant_filter(where), exact=True).count

    def scroll(
        self, collection: str, where: Filter | None, limit: int, with_vectors: bool = False
    ) -> list[PointRecord]:
        """Up to `limit` points matching `where`, in id order."""
        with self._errors(self._require(collection)):
            records, _next_offset = self._client.scroll(
                collection,
                scroll_filter=_to_qdrant_filter(where),
                limit=limit,
                with_payload=True,
                with_vectors=vector_selector(with_vectors),
            )
        return [_to_record(r) for r in records]

    def retrieve(self, collection: str, ids: list[str], with_vectors: bool = False) -> list[PointRecord]:
        """The points with these ids, in the order of `ids`; ids not in the store are left out."""
        if not ids:
            return []
        with self._errors(self._require(collection)):
            records = self._client.retrieve(
                collection, ids, with_payload=True, with_vectors=vector_selector(with_vectors)
            )
        by_id = {str(r.id): _to_record(r) for r in records}
        return [by_id[i] for i in ids if i in by_id]

    def facet_counts(
        self, collection: str, key: str, where: Filter | None = None, limit: int = 100000
    ) -> dict[Any, int]:
        """Distinct values of a keyword payload field with their point counts."""
        with self._errors(self._require(collection)):
            response = self._client.facet(
                collection,
                check_facet_key(key),
                facet_filter=_to_qdrant_filter(where),
                limit=limit,
                exact=True,
            )
        return {hit.value: hit.count for hit in response.hits}

    def query_dense(
        self, collection: str, vector: np.ndarray, where: Filter | None, limit: int, with_payload: bool = True
    ) -> list[Hit]:
        """Nearest points by cosine similarity of the dense vectors."""
        return self._query(
            collection, where, limit, with_payload, query=dense_list(vector), using=DENSE,
            search_params=self._dense_search,
        )

    def query_sparse(
        self, collection: str, vector: SparseVector, where: Filter | None, limit: int, with_payload: bool = True
    ) -> list[Hit]:
        """Best points by lexical (BM25 with the collection's IDF) score; none for an empty vector."""
        return self._query(collection, where, limit, with_payload, query=_to_qdrant_sparse(vector), using=SPARSE)

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
        prefetch = [
            models.Prefetch(query=dense_list(dense), using=DENSE, limit=prefetch_limit,
                            params=self._hybrid_prefetch_search),
            models.Prefetch(query=_to_qdrant_sparse(sparse), using=SPARSE, limit=prefetch_limit),
        ]
        return self._query(
            collection, where, limit, with_payload, query=models.FusionQuery(fusion=models.Fusion.RRF),
            prefetch=prefetch,
        )

    def similarities(
        self, collection: str, ids: list[str], queries: Sequence[SimilarityQuery], where: Filter | None = None
    ) -> list[dict[str, float]]:
        """Each query's score of each point's vector, in one request (see the protocol)."""
        if not ids:
            return [{} for _ in queries]
        only = _to_qdrant_filter(dataclasses.replace(where or Filter(), ids=tuple(ids)))
        requests = []
        for vector, using in queries:
            query = _to_qdrant_sparse(vector) if isinstance(vector, SparseVector) else dense_query(vector, using)
            requests.append(models.QueryRequest(
                query=query, using=using, filter=only, limit=len(ids), with_payload=False, with_vector=False,
                params=self._dense_search if using == DENSE else None,
            ))
        with self._errors(self._require(collection)):
            responses = self._client.query_batch_points(collection, requests)
        return [{str(p.id): float(p.score) for p in response.points} for response in responses]

    def close(self) -> None:
        """Close the client (local mode: release its folder); later calls raise Unavailable."""
        self._closed = True
        self._client.close()

    # internals

    def _query(self, collection: str, where: Filter | None, limit: int, with_payload: bool, **query: Any) -> list[Hit]:
        # query_filter also applies inside the prefetches, so both candidate lists obey it.
        with self._errors(self._require(collection)):
            response = self._client.query_points(
                collection,
                query_filter=_to_qdrant_filter(where),
                limit=limit,
                with_payload=with_payload,
                with_vectors=False,
                **query,
            )
        return [Hit(id=str(p.id), score=p.score, payload=p.payload or {}) for p in response.points]

    def _create_collection(self, collection: str, dimension: int, metadata: dict[str, Any]) -> CollectionInfo:
        layout = self._layout
        # None: the server's default (vectors in RAM); what the layout sets is set per vector, which local
        # mode records too.
        originals = True if layout.on_disk else None
        try:
            with self._errors(collection):
                self._client.create_collection(
                    collection,
                    vectors_config={
                        DENSE: models.VectorParams(
                            size=dimension,
                            distance=models.Distance.COSINE,
                            on_disk=originals,
                            quantization_config=_QUANTIZATION[layout.quantization],
                            hnsw_config=models.HnswConfigDiff(m=layout.hnsw_m, ef_construct=layout.hnsw_ef_construct),
                        ),
                        # Read back with hits to score them, never searched: no index to build; half
                        # precision halves the largest part of the store at no cost to a cosine's 2nd decimal.
                        WINDOWS: models.VectorParams(
                            size=dimension,
                            distance=models.Distance.COSINE,
                            datatype=models.Datatype.FLOAT16,
                            on_disk=originals,
                            multivector_config=models.MultiVectorConfig(
                                comparator=models.MultiVectorComparator.MAX_SIM
                            ),
                            hnsw_config=models.HnswConfigDiff(m=0),
                        ),
                    },
                    # The lexical index too (the largest part of a big collection's RAM otherwise).
                    sparse_vectors_config={SPARSE: models.SparseVectorParams(
                        index=models.SparseIndexParams(on_disk=originals), modifier=models.Modifier.IDF
                    )},
                    on_disk_payload=originals,
                    metadata=metadata,
                    **self._collection_options,
                )
        except AlreadyExists:
            # Another process created it since we looked (a server's 409): use theirs, as the embedded
            # store uses a shard it finds.
            existing = self.collection_info(collection)
            if existing is None:  # and deleted it already
                raise
            return existing
        log.info("created collection %s (%d dims) in %s", collection, dimension, self._location)
        return CollectionInfo(collection, points_count=0, vector_size=dimension, status="green", metadata=metadata)

    def _require(self, collection: str) -> str:
        """`collection`, known to exist (asked once per process), or NotFound; Unavailable once closed."""
        if self._closed:
            raise store_closed(self._location)
        if collection not in self._known_collections:
            if self.collection_info(collection) is None:
                raise collection_not_found(collection)
            self._known_collections.add(collection)
        return collection

    @contextmanager
    def _errors(self, collection: str) -> Iterator[None]:
        """The one translation of qdrant-client failures into Alexandria errors."""
        try:
            yield
        except ResponseHandlingException as exc:
            if isinstance(exc.source, httpx.TimeoutException):
                raise DeadlineExceeded(
                    f"{self._location} did not answer within {self._timeout_s} s (QDRANT_TIMEOUT_S); it may be busy "
                    "(indexing, a large collection read cold): try again, or raise QDRANT_TIMEOUT_S."
                ) from exc
            if isinstance(exc.source, httpx.TransportError):
                raise Unavailable(
                    f"{self._location} cannot be reached ({exc.source}); check that it is running and that "
                    "QDRANT_URL points at it."
                ) from exc
            raise FailedPrecondition(
                f"{self._location} answered in a form this client cannot read ({exc.source}); the server's version "
                "may not match qdrant-client's (see docker-compose.yml's qdrant image)."
            ) from exc
        except ResourceExhaustedResponse as exc:
            raise ResourceExhausted(
                f"{self._location} is rate-limiting requests ({exc.message}); retry in {exc.retry_after_s} s."
            ) from exc
        except UnexpectedResponse as exc:
            status = exc.status_code or 0
            detail = _error_detail(exc)
            if status == 404:
                self._known_collections.discard(collection)
                raise collection_not_found(collection) from exc
            if status == 409:
                raise AlreadyExists(f"Collection '{collection}' already exists in {self._location}.") from exc
            if status in (401, 403):
                raise PermissionDenied(
                    f"{self._location} refused the request; check QDRANT_API_KEY."
                ) from exc
            if status == 429:
                raise ResourceExhausted(f"{self._location} is rate-limiting requests ({detail}); retry later.") from exc
            if status in (408, 504):
                raise DeadlineExceeded(
                    f"{self._location} gave up on the request in time ({status}: {detail}); try again."
                ) from exc
            if status >= 500:
                raise Unavailable(
                    f"{self._location} failed to answer ({status}: {detail}); it may be restarting or a replica "
                    "may be down: try again in a moment."
                ) from exc
            if status in (400, 422):
                raise FailedPrecondition(f"{self._location} refused the request on '{collection}': {detail}.") from exc
            raise


def _error_detail(exc: UnexpectedResponse) -> str:
    """The server's own words for an error response (`status.error` of its JSON), else its status's name."""
    try:
        return str(exc.structured()["status"]["error"])
    except (ValueError, KeyError, TypeError):
        return exc.reason_phrase or "no reason given"


def _collection_options(settings: StoreSettings) -> dict[str, Any]:
    """The create_collection arguments a server takes beyond the layout (a cluster's, the WAL's): those set."""
    options: dict[str, Any] = {
        "shard_number": settings.qdrant_shard_number,
        "replication_factor": settings.qdrant_replication_factor,
        "write_consistency_factor": settings.qdrant_write_consistency_factor,
    }
    if settings.qdrant_wal_capacity_mb is not None:
        options["wal_config"] = models.WalConfigDiff(wal_capacity_mb=settings.qdrant_wal_capacity_mb)
    return {name: value for name, value in options.items() if value is not None}


def _quantization_of(config: models.QuantizationConfig | None) -> str:
    """The quantisation word of a collection's config (product: one Alexandria never makes, but a server may hold)."""
    if config is None:
        return "none"
    if isinstance(config, models.ScalarQuantization):
        return "int8"
    return "binary" if isinstance(config, models.BinaryQuantization) else "product"


def _payload_indexes(on_disk: bool) -> list[tuple[str, models.PayloadSchemaParams]]:
    """Each indexed field and its index, as the embedded store makes them (embedded._payload_indexes says why)."""
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


def _to_qdrant_filter(where: Filter | None) -> models.Filter | None:
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


def _to_point_struct(point: StoredPoint) -> models.PointStruct:
    vectors: dict[str, Any] = {DENSE: dense_list(point.dense)}
    if point.sparse is not None:
        vectors[SPARSE] = _to_qdrant_sparse(point.sparse)
    if point.windows is not None:
        vectors[WINDOWS] = multivector_list(point.windows)
    return models.PointStruct(id=point.id, vector=vectors, payload=point.payload)


def _to_qdrant_sparse(vector: SparseVector) -> models.SparseVector:
    return models.SparseVector(indices=vector.indices, values=vector.values)


def _to_record(record: models.Record) -> PointRecord:
    return PointRecord(id=str(record.id), payload=record.payload or {}, dense=dense_from(record.vector),
                       windows=windows_from(record.vector))
