"""The server backend's failures reach callers as Alexandria errors that say what to do."""

from __future__ import annotations

import socket

import pytest

from alexandria.errors import Unavailable
from alexandria.settings import StoreSettings
from alexandria.store import open_store


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_server_is_unavailable_naming_its_url() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    store = open_store(StoreSettings(qdrant_url=url, qdrant_host=None, qdrant_local_path=None))
    try:
        for operation in (lambda: store.collection_info("library"), lambda: store.count("library")):
            with pytest.raises(Unavailable, match=f"Qdrant at {url} cannot be reached"):
                operation()
    finally:
        store.close()
