"""Scratch copies of libraries, for tests that change one as Calibre (or time) would."""

from __future__ import annotations

import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path


def copy_library(source: Path, destination: Path) -> Path:
    """A writable copy of a library (the shared corpus is read-only)."""
    shutil.copytree(source, destination)
    for path in [destination, *destination.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    return destination


@contextmanager
def open_for_writing(library: Path) -> Iterator[sqlite3.Connection]:
    """An autocommit connection to a copied library's metadata.db, with stand-ins for the SQL
    functions that Calibre registers and its triggers call."""
    with closing(sqlite3.connect(library / "metadata.db", isolation_level=None)) as connection:
        connection.create_function("title_sort", 1, lambda title: title)
        connection.create_function("uuid4", 0, lambda: str(uuid.uuid4()))
        yield connection
