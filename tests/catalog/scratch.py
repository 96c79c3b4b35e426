"""Scratch copies of libraries, for tests that change one as Calibre (or time) would."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
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


CALIBRE_HIGHLIGHTS = Path(__file__).resolve().parent.parent / "fixtures" / "calibre" / "highlights.py"


def edit_highlights(library: Path, verb: str, book_id: int, *args: str) -> None:
    """Add a highlight to a book, delete its highlights, or save the viewer's last-read place in it (`verb` add,
    remove or read, args as highlights.py takes them), with Calibre's own API: what its viewer writes into the
    library."""
    subprocess.run(["calibre-debug", str(CALIBRE_HIGHLIGHTS), verb, str(library), str(book_id), *args],
                   check=True, capture_output=True, timeout=120,
                   env={**os.environ, "QTWEBENGINE_CHROMIUM_FLAGS": "--no-sandbox"})
