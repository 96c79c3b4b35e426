"""A small synthetic library whose right answers are known, and settings that pick a backend.

Dense vectors point along one axis of an 8-dimensional space each (one leans towards a
second axis); texts share some words and not others.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from alexandria.settings import StoreSettings
from alexandria.store import StoredPoint, lexical
from alexandria.store import schema as f
from alexandria.store.differences import Engine

DIMENSION = 8
COLLECTION = "library"
METADATA = {"model": "synthetic-8", "dimension": DIMENSION}
_IDS = uuid.UUID("0b6f8a52-34c2-4e4c-9a8e-3f1b2d6c7e90")


def settings_for(backend: str, folder: Path) -> StoreSettings:
    """Settings that pick `backend` on `folder`, whatever QDRANT_* the environment holds."""
    if backend == "embedded":
        return StoreSettings(
            alexandria_data_dir=folder, qdrant_url=None, qdrant_local_path=None
        )
    return StoreSettings(qdrant_local_path=folder / "qdrant-local", qdrant_url=None)


def engine_of(backend: str) -> Engine:
    """The engine `settings_for(backend, ...)` runs on: the server backend runs in local mode here."""
    return Engine.EMBEDDED if backend == "embedded" else Engine.LOCAL


def axis(index: int, tilt: int | None = None) -> np.ndarray:
    """A unit vector along `index`, leaning a little towards `tilt` when given."""
    vector = np.zeros(DIMENSION, dtype=np.float32)
    vector[index] = 1.0
    if tilt is not None:
        vector[tilt] = 0.3
    return vector / np.linalg.norm(vector)


@dataclass(frozen=True)
class Passage:
    name: str
    book_key: str
    author: str
    dense: np.ndarray
    text: str


PASSAGES = (
    Passage("whale", "moby", "Herman Melville", axis(0), "the whale rose from the grey sea"),
    Passage("harpoon", "moby", "Herman Melville", axis(1), "the harpoon flew and the line ran"),
    Passage("ship", "moby", "Herman Melville", axis(0, tilt=1), "the ship and the harpoon and the whale"),
    Passage("ball", "pride", "Jane Austen", axis(2), "the ball at Netherfield was crowded"),
    Passage("letter", "pride", "Jane Austen", axis(3), "a letter from Mr Darcy arrived"),
    Passage("mine", "germinal", "Émile Zola", axis(4), "the mine swallowed the miners at dawn"),
)
BOOK_SIZES = {"moby": 3, "pride": 2, "germinal": 1}


def point_id(name: str) -> str:
    return str(uuid.uuid5(_IDS, name))


def stored_point(passage: Passage) -> StoredPoint:
    return StoredPoint(
        id=point_id(passage.name),
        dense=passage.dense,
        sparse=lexical.encode_document(passage.text),
        payload={
            f.BOOK_KEY: passage.book_key,
            f.AUTHOR: passage.author,
            f.AUTHORS: [passage.author],
            f.COMPLETE: False,
            f.LEVEL: f.Level.FLAT.value,
            f.TEXT: passage.text,
            "name": passage.name,
        },
    )
