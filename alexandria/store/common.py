"""What both backends do alike: vectors in and out, and the errors they raise the same way."""

from __future__ import annotations

import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any, cast

import numpy as np

from alexandria.errors import NotFound, Unavailable
from alexandria.store.model import DENSE, MULTIVECTORS, WINDOWS, CollectionInfo
from alexandria.store.records import CollectionModel
from alexandria.store.schema import MODEL


def dense_list(vector: np.ndarray) -> list[float]:
    """A dense vector as the float list both Qdrant APIs take."""
    return cast(list[float], np.asarray(vector, dtype=np.float32).tolist())


def dense_query(vector: np.ndarray, using: str) -> list[float] | list[list[float]]:
    """A dense query vector as both Qdrant APIs take it for `using`: a list, or a one-row matrix against the
    windows (MaxSim)."""
    return [dense_list(vector)] if using in MULTIVECTORS else dense_list(vector)


def vector_selector(with_vectors: bool) -> list[str] | bool:
    """Ask for the dense and window vectors only: callers never need the lexical one back."""
    return [DENSE, WINDOWS] if with_vectors else False


def multivector_list(rows: np.ndarray) -> list[list[float]]:
    """A multivector as the nested float lists both Qdrant APIs take."""
    return cast(list[list[float]], np.asarray(rows, dtype=np.float32).tolist())


def windows_from(vectors: Any) -> np.ndarray | None:
    """A returned point's window multivector as (n, dimension) float32, or None when it has none."""
    if not vectors or not vectors.get(WINDOWS):
        return None
    return np.asarray(vectors[WINDOWS], dtype=np.float32)


def dense_from(vectors: Any) -> np.ndarray | None:
    """The dense vector of a returned point as float32, or None when vectors were not asked for."""
    if not vectors:
        return None
    return np.asarray(vectors[DENSE], dtype=np.float32)


def collection_not_found(collection: str) -> NotFound:
    """The error of every use of a collection that does not exist: the one wording of it."""
    return NotFound(
        f"Collection '{collection}' does not exist; ingest a book into it first "
        "(alexandria_ingest or alexandria_ingest_file), or check the collection name."
    )


def store_closed(location: str) -> Unavailable:
    """The error of every call on a store after its `close()`."""
    return Unavailable(f"The store ({location}) is closed (the service is shutting down); try again.")


def check_dimension(info: CollectionInfo, dimension: int, metadata: dict[str, Any]) -> CollectionInfo:
    """Return `info` when its vectors have `dimension` floats, else refuse naming both models. Only the size
    is the store's to check (one per collection); whether the model is the right one is the caller's."""
    if info.vector_size != dimension:
        CollectionModel.of(info).check(info.name, metadata.get(MODEL), dimension)
    return info


def disk_usage(path: Path) -> int:
    """The bytes `path` (a file, or a folder and everything under it) takes on disk: its blocks, not its
    files' sizes, since both engines make files of a set size and fill them as they go (sparse files)."""
    total = 0
    for entry in [path] if path.is_file() else path.rglob("*"):
        try:
            status = entry.stat()
        except FileNotFoundError:  # removed meanwhile: the engine merges and drops segments as it goes
            continue
        if stat.S_ISREG(status.st_mode):
            total += status.st_blocks * 512
    return total


def write_json_atomically(path: Path, content: object) -> None:
    """Write `content` as JSON aside, then rename it over `path`: a crash leaves the old file or the new one, never
    half of one. The file aside is the writer's own, so two writers of one path at once each rename a whole file."""
    staging = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        with staging.open("x", encoding="utf-8") as out:
            json.dump(content, out, ensure_ascii=False, indent=2)
            out.flush()
            os.fsync(out.fileno())
        os.replace(staging, path)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise
