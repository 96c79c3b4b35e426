"""The server backend's failures reach callers as Alexandria errors that say what to do."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from qdrant_client import QdrantClient
from qdrant_client.http.exceptions import UnexpectedResponse

from alexandria.errors import DeadlineExceeded, FailedPrecondition, ResourceExhausted, Unavailable
from alexandria.settings import StoreSettings
from alexandria.store import open_store
from alexandria.store.server import ServerStore
from services.ingest.writer import BookWriter
from store.synthetic import COLLECTION, DIMENSION, METADATA, PASSAGES, stored_point


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_server_is_unavailable_naming_its_url() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    store = open_store(StoreSettings(qdrant_url=url, qdrant_local_path=None))
    try:
        for operation in (lambda: store.collection_info("library"), lambda: store.count("library")):
            with pytest.raises(Unavailable, match=f"Qdrant at {url} cannot be reached"):
                operation()
    finally:
        store.close()


class LosingCreatorClient(QdrantClient):
    """Answers a create as a Qdrant server answers the loser of two creators in other processes: the
    other one makes the collection first, and this create gets 409 Conflict."""

    def create_collection(self, collection_name: str, *args: Any, **kwargs: Any) -> bool:
        super().create_collection(collection_name, *args, **kwargs)  # the winner's create
        raise UnexpectedResponse(
            409,
            "Conflict",
            f'{{"status":{{"error":"Wrong input: Collection `{collection_name}` already exists!"}}}}'.encode(),
            httpx.Headers(),
        )


def test_a_create_that_another_creator_won_gets_the_collection_it_made() -> None:
    store = ServerStore(LosingCreatorClient(":memory:"), "Qdrant in memory", builds_indexes=False)
    try:
        info = store.ensure_collection(COLLECTION, DIMENSION, METADATA)

        assert (info.name, info.vector_size, info.metadata) == (COLLECTION, DIMENSION, METADATA)
        store.upsert(COLLECTION, [stored_point(PASSAGES[0])])
        assert store.count(COLLECTION) == 1
    finally:
        store.close()


class IndexRecordingClient(QdrantClient):
    """Local mode, which builds no payload index, made to keep the indexes asked of it as a server reports them."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.indexes: dict[str, Any] = {}

    def create_payload_index(self, collection_name: str, field_name: str, field_schema: Any = None,
                             **kwargs: Any) -> Any:
        self.indexes[field_name] = field_schema

    def get_collection(self, collection_name: str) -> Any:
        described = super().get_collection(collection_name)
        return described.model_copy(update={"payload_schema": dict(self.indexes)})


def test_a_server_collection_gets_its_payload_indexes_on_disk_once_and_keeps_older_ones() -> None:
    client = IndexRecordingClient()
    store = ServerStore(client, "Qdrant in memory", builds_indexes=True)
    try:
        store.ensure_collection(COLLECTION, DIMENSION, METADATA)
        assert {name: index.on_disk for name, index in client.indexes.items()} == {
            name: name not in ("complete", "level") for name in client.indexes
        }
        assert len(client.indexes) == 14
        made_before = {"book_key": "keyword"}
        client.indexes = dict(made_before)
        store.ensure_collection(COLLECTION, DIMENSION, METADATA)
        assert client.indexes["book_key"] == "keyword"  # as it was made: not built again
        assert len(client.indexes) == 14
    finally:
        store.close()


@contextmanager
def failing_server(status: int, error: str, delay_s: float = 0.0) -> Iterator[str]:
    """An HTTP server on 127.0.0.1 that answers every request as a Qdrant server in trouble does: `status` with
    Qdrant's error body, after `delay_s`."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            time.sleep(delay_s)
            body = json.dumps({"status": {"error": error}, "time": 0.0}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("status", "error", "delay_s", "raised", "message"),
    [
        (503, "No active replica for shard 2", 0.0, Unavailable, "No active replica for shard 2.*try again"),
        (500, "Service internal error: disk full", 0.0, Unavailable, "disk full"),
        (400, "Bad request: Index required but not found for \"source\"", 0.0, FailedPrecondition,
         "refused the request on 'library': Bad request: Index required"),
        (429, "Too many requests", 0.0, ResourceExhausted, "rate-limiting"),
        (200, "", 3.0, DeadlineExceeded, "did not answer within 1 s \\(QDRANT_TIMEOUT_S\\)"),
    ],
)
def test_a_server_in_trouble_is_told_as_what_it_is_not_as_an_internal_error(
    status: int, error: str, delay_s: float, raised: type[Exception], message: str
) -> None:
    with failing_server(status, error, delay_s) as url:
        store = open_store(StoreSettings(qdrant_url=url, qdrant_local_path=None, qdrant_timeout_s=1))
        try:
            with pytest.raises(raised, match=message):
                store.collection_info("library")
        finally:
            store.close()


def test_an_ingest_completes_the_payload_indexes_of_a_collection_made_without_them() -> None:
    client = IndexRecordingClient()
    store = ServerStore(client, "Qdrant in memory", builds_indexes=True)
    try:
        writer = BookWriter(store, COLLECTION)
        writer.ensure_collection(DIMENSION, "synthetic-8")
        client.indexes = {}  # a process killed between making the collection and its indexes
        writer.ensure_collection(DIMENSION, "synthetic-8")
        assert len(client.indexes) == 14
    finally:
        store.close()
