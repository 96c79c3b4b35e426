"""What the store keeps beside its shards, which qdrant-edge has no place for: aliases, and each collection's sidecar.

`<root>/aliases.json` maps a name users give to the collection it names (a reindex builds a new collection, then
points the user's name at it); `<root>/<collection>.json` holds the dense vector size and the collection's
metadata (which model made the vectors). Both are replaced atomically (written aside, renamed over).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

from alexandria.errors import FailedPrecondition
from alexandria.store.common import write_json_atomically

_ALIASES_FILE = "aliases.json"


class Sidecar(TypedDict):
    """What `<root>/<collection>.json` holds beside a shard."""

    vector_size: int
    metadata: dict[str, Any]


def read_aliases(root: Path) -> dict[str, str]:
    path = root / _ALIASES_FILE
    if not path.is_file():
        return {}
    aliases: dict[str, str] = json.loads(path.read_text(encoding="utf-8"))
    return aliases


def write_aliases(root: Path, aliases: dict[str, str]) -> None:
    write_json_atomically(root / _ALIASES_FILE, aliases)


def sidecar_path(root: Path, collection: str) -> Path:
    return root / f"{collection}.json"


def read_sidecar(root: Path, collection: str) -> Sidecar:
    try:
        sidecar: Sidecar = json.loads(sidecar_path(root, collection).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FailedPrecondition(
            f"Collection '{collection}' has lost its metadata file {sidecar_path(root, collection)}; "
            "delete the collection's directory and ingest its books again."
        ) from None
    return sidecar


def write_sidecar(root: Path, collection: str, content: Sidecar) -> None:
    write_json_atomically(sidecar_path(root, collection), content)
