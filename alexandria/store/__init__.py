"""The store adapter: the only code that talks to Qdrant.

`open_store(settings)` returns a `Store` over one of two real backends with the
same behaviour, kept honest by tests/store/test_store_contract.py (server.py says where local mode differs
by design):
- embedded (default): Qdrant's engine in process (qdrant-edge-py), one shard per collection
  under `$ALEXANDRIA_DATA_DIR/store/<collection>`; one process may open it.
- server: qdrant-client against a Qdrant server (or qdrant-client's local mode).
"""

from alexandria.store.common import collection_not_found
from alexandria.store.factory import open_store
from alexandria.store.model import (
    DENSE,
    SENTENCES,
    WINDOWS,
    CollectionInfo,
    Filter,
    Hit,
    PointRecord,
    SparseVector,
    Store,
    StoredPoint,
    call_store,
    finish_before_cancel,
)

__all__ = [
    "DENSE",
    "SENTENCES",
    "WINDOWS",
    "CollectionInfo",
    "Filter",
    "Hit",
    "PointRecord",
    "SparseVector",
    "Store",
    "StoredPoint",
    "call_store",
    "collection_not_found",
    "finish_before_cancel",
    "open_store",
]
