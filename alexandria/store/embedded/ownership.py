"""One process at a time owns an embedded store.

Every shard keeps its write-ahead log locked while open, and the WAL stays enabled so that a second process opening
the same store fails instead of corrupting it; the store's own lock, taken before anything in it is read, makes that
second opener fail at once.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path

import qdrant_edge as edge

from alexandria.errors import FailedPrecondition

# Beside the collections: a leading dot is never a collection name.
_STORE_LOCK = ".lock"


def held_elsewhere(path: Path) -> FailedPrecondition:
    return FailedPrecondition(f"Another process holds the store at {path}; stop it, or point ALEXANDRIA_DATA_DIR "
                              "elsewhere, or use a Qdrant server (QDRANT_URL).")


def hold(root: Path) -> int:
    """Lock the store at `root` for this process (its file descriptor, closed by the store's `close`), before anything in it is
    read or changed: a second opener would otherwise complete or forget the owner's merges, or drop a collection, on
    its way to the shard locks that refuse it."""
    descriptor = os.open(root / _STORE_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise held_elsewhere(root) from None
    return descriptor


def open_shard(path: Path, opener: Callable[[], edge.EdgeShard]) -> edge.EdgeShard:
    """The shard at `path` that `opener` creates or loads; FailedPrecondition when another process holds it."""
    try:
        return opener()
    except Exception as exc:
        # qdrant-edge raises a bare Exception; a locked WAL or segments that appeared under
        # us both mean another process owns this store.
        message = str(exc)
        if "WAL" in message or "already contains segment data" in message:
            raise held_elsewhere(path) from exc
        raise
