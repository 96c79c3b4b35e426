"""Reading a Calibre library: metadata.db read whole into a `LibrarySnapshot`, reread when Calibre changes it.

`CalibreLibrary` hands out the current snapshot and rereads metadata.db when its mtime changes
(checked at most once a second, CATALOG_RECHECK_INTERVAL_S), because Calibre writes to it while its
user works.

How Calibre's data is read, and why:
- `file:...?mode=ro`: this service never writes to a library.
- Plain SQL on the tables only: Calibre's views and triggers call SQL functions that
  only Calibre registers. Only the columns used here are read (Calibre 9 drops
  `books.isbn`; the ISBN comes from `identifiers`), and tables that older or newer
  libraries may lack are read as empty.
- Many-to-many values (authors, tags, languages) are read one link row at a time in
  link id order, which is Calibre's own order; names may contain commas. Calibre
  stores a comma in an author's name as `|`.
- Ratings are stored 0-10 (stars x 2); 0 means unrated. Dates are stored in UTC, and
  Calibre's "undefined" date is in the year 101.
- Highlights are the `annotations` table's rows of type highlight (Calibre 5 and later), their JSON read here;
  a highlight the reader deleted stays there marked `removed` (Calibre keeps it to merge devices' copies).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from alexandria.errors import FailedPrecondition, Unavailable
from alexandria.settings import CatalogSettings
from services.catalog.library import Book, BookFile, Highlight, LibrarySnapshot

log = logging.getLogger(__name__)
T = TypeVar("T")


METADATA_DB = "metadata.db"


UNDEFINED_YEAR = 101  # Calibre's "undefined" date: 0101-01-01 (a time zone may shift it a day)


# How long one read waits on Calibre's lock, and how often it tries: about 1.5 s in all.
BUSY_TIMEOUT_S = 0.25


BUSY_ATTEMPTS = 4


_REQUIRED_TABLES = ("books", "authors", "books_authors_link", "data")


_REQUIRED_BOOK_COLUMNS = ("id", "title", "path")


_OPTIONAL_BOOK_COLUMNS = ("author_sort", "uuid", "pubdate", "series_index")


# field -> (link table, its column naming the value, value table, value column)
_LINKS = {
    "authors": ("books_authors_link", "author", "authors", "name"),
    "tags": ("books_tags_link", "tag", "tags", "name"),
    "languages": ("books_languages_link", "lang_code", "languages", "lang_code"),
    "series": ("books_series_link", "series", "series", "name"),
    "publisher": ("books_publishers_link", "publisher", "publishers", "name"),
    "rating": ("books_ratings_link", "rating", "ratings", "rating"),
}


@dataclass(frozen=True)
class _Rows:
    """The raw rows of one read transaction."""

    books: list[tuple[int, str, str, str | None, str | None, str | None, float | None]]
    links: dict[str, list[tuple[int, object]]]  # field -> (book, value) in link id order
    identifiers: list[tuple[int, str, str]]
    data: list[tuple[int, str, str]]
    highlights: list[tuple[int, str, str]]  # (book, format, the highlight's JSON)


def metadata_db(root: Path | None) -> Path:
    """metadata.db of the library at `root`; FailedPrecondition saying what is wrong with the path."""
    advice = "set CALIBRE_LIBRARY_PATH to your Calibre library's folder (the one that holds metadata.db)"
    if root is None:
        raise FailedPrecondition(f"CALIBRE_LIBRARY_PATH is not set; {advice}.")
    if not root.exists():
        raise FailedPrecondition(f"CALIBRE_LIBRARY_PATH={root} does not exist; {advice}.")
    if not root.is_dir():
        raise FailedPrecondition(f"CALIBRE_LIBRARY_PATH={root} is a file, not a folder; {advice}.")
    database = root / METADATA_DB
    if not database.is_file():
        raise FailedPrecondition(
            f"CALIBRE_LIBRARY_PATH={root} has no {METADATA_DB}, so it is not a Calibre library; {advice}."
        )
    return database


def _is_busy(exc: BaseException) -> bool:
    """Whether Calibre holds a lock on metadata.db (SQLITE_BUSY or SQLITE_LOCKED, extended codes too)."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _read_rows(database: Path) -> _Rows:
    connection = sqlite3.connect(
        f"{database.as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None
    )
    try:
        connection.execute("BEGIN")  # one snapshot of every table, even while Calibre writes
        tables = {
            name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        missing = [t for t in _REQUIRED_TABLES if t not in tables]
        columns = {row[1] for row in connection.execute("PRAGMA table_info(books)")}
        missing += [f"books.{c}" for c in _REQUIRED_BOOK_COLUMNS if c not in columns]
        if missing:
            raise FailedPrecondition(
                f"{database} is not a Calibre database (it has no {', '.join(missing)}); "
                "set CALIBRE_LIBRARY_PATH to your Calibre library's folder."
            )
        selected = [
            *_REQUIRED_BOOK_COLUMNS,
            *(c if c in columns else f"NULL AS {c}" for c in _OPTIONAL_BOOK_COLUMNS),
        ]
        books = connection.execute(f"SELECT {', '.join(selected)} FROM books").fetchall()
        links = {}
        for name, (link, link_column, values, value_column) in _LINKS.items():
            links[name] = (
                connection.execute(
                    f"SELECT l.book, v.{value_column} FROM {link} AS l "
                    f"JOIN {values} AS v ON v.id = l.{link_column} ORDER BY l.id"
                ).fetchall()
                if link in tables and values in tables
                else []
            )
        identifiers = (
            connection.execute("SELECT book, type, val FROM identifiers ORDER BY id").fetchall()
            if "identifiers" in tables
            else []
        )
        data = connection.execute("SELECT book, format, name FROM data ORDER BY id").fetchall()
        # Calibre 5 and later keep the viewer's highlights and bookmarks here; an older library has no such table.
        highlights = (
            connection.execute(
                "SELECT book, format, annot_data FROM annotations WHERE annot_type = 'highlight' ORDER BY id"
            ).fetchall()
            if "annotations" in tables
            else []
        )
        connection.execute("COMMIT")
        return _Rows(books=books, links=links, identifiers=identifiers, data=data, highlights=highlights)
    finally:
        connection.close()


def parse_calibre_date(raw: object) -> date | None:
    """A date Calibre stored (UTC text such as `1813-01-28 00:00:00+00:00`); None when unset or undefined."""
    if not isinstance(raw, str) or not raw.strip():
        return None
    try:
        moment = datetime.fromisoformat(raw.strip())
    except ValueError:
        log.debug("unreadable Calibre date %r", raw)
        return None
    if moment.year <= UNDEFINED_YEAR:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.date()


def _book_file(root: Path, book_path: str, name: str, fmt: str) -> BookFile | None:
    relative = f"{book_path}/{name}.{fmt.lower()}"
    # Calibre writes relative paths inside the library; anything else is not followed out of it.
    parts = relative.replace("\\", "/").split("/")
    if not parts[0] or ":" in parts[0] or ".." in parts:
        return None
    return BookFile(format=fmt.upper(), library=root, relative=relative)


def _highlight(book_format: str, data: str) -> Highlight | None:
    """A highlight from its row; None for one the reader deleted, or one whose JSON is not Calibre's."""
    try:
        annotation = json.loads(data)
        if annotation.get("removed") or not annotation.get("highlighted_text"):
            return None
        return Highlight(
            uuid=str(annotation["uuid"]), format=str(book_format).upper(), text=str(annotation["highlighted_text"]),
            notes=str(annotation.get("notes") or ""),
            chapter_titles=tuple(str(t) for t in annotation.get("toc_family_titles") or ()),
            start_cfi=str(annotation.get("start_cfi") or ""), spine_index=int(annotation.get("spine_index") or 0),
            timestamp=str(annotation.get("timestamp") or ""),
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        log.warning("ignoring a highlight Calibre's viewer did not write: %.200r", data)
        return None


def _build_books(root: Path, rows: _Rows) -> list[Book]:
    # SQLite's values as stored: text, and an integer for a rating.
    many: dict[str, dict[int, list[Any]]] = {name: defaultdict(list) for name in _LINKS}
    for name, pairs in rows.links.items():
        for book_id, value in pairs:
            if value is not None:
                many[name][book_id].append(value)
    identifiers: dict[int, dict[str, str]] = defaultdict(dict)
    for book_id, kind, value in rows.identifiers:
        identifiers[book_id].setdefault(str(kind).lower(), str(value))
    paths = {row[0]: row[2] or "" for row in rows.books}
    files: dict[int, list[BookFile]] = defaultdict(list)
    for book_id, fmt, name in rows.data:
        if book_id not in paths:
            continue
        book_file = _book_file(root, paths[book_id], name, fmt)
        if book_file is None:
            log.warning(
                "book %s: ignoring its %s file outside the library (%r)", book_id, fmt, paths[book_id]
            )
            continue
        files[book_id].append(book_file)
    highlights: dict[int, list[Highlight]] = defaultdict(list)
    for book_id, book_format, data in rows.highlights:
        if (highlight := _highlight(book_format, data)) is not None:
            highlights[book_id].append(highlight)
    books = []
    for book_id, title, _path, author_sort, uuid, pubdate, series_index in rows.books:
        series = many["series"][book_id]
        ratings = many["rating"][book_id]
        publishers = many["publisher"][book_id]
        books.append(
            Book(
                id=book_id,
                title=title or "Unknown",
                authors=tuple(str(a).replace("|", ",") for a in many["authors"][book_id]),
                author_sort=author_sort or "",
                languages=tuple(many["languages"][book_id]),
                tags=tuple(many["tags"][book_id]),
                series=series[0] if series else None,
                series_index=float(series_index if series_index is not None else 1.0) if series else None,
                identifiers=MappingProxyType(identifiers[book_id]),
                publisher=publishers[0] if publishers else None,
                pubdate=parse_calibre_date(pubdate),
                rating=ratings[0] / 2 if ratings and ratings[0] else None,
                uuid=uuid or "",
                files=tuple(sorted(files[book_id], key=lambda f: f.format)),
                highlights=tuple(highlights[book_id]),
            )
        )
    return books


def _contents(database: Path) -> str:
    """A digest of what the library holds for a sync: its books (each one's record, with the time Calibre last
    changed it), their authors and languages, their files, and the reader's highlights. Calibre writes metadata.db
    for more than that (its viewer's last-read place, its own bookkeeping); such a write leaves this as it was."""
    connection = sqlite3.connect(
        f"{database.as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None
    )
    try:
        connection.execute("BEGIN")
        tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        columns = {row[1] for row in connection.execute("PRAGMA table_info(books)")}
        changed = "last_modified" if "last_modified" in columns else "NULL"
        queries = [
            f"SELECT id, title, path, {'uuid' if 'uuid' in columns else 'NULL'}, {changed} FROM books ORDER BY id",
            "SELECT book, format, name, uncompressed_size FROM data ORDER BY id",
            *(f"SELECT l.book, v.{value_column} FROM {link} AS l JOIN {values} AS v ON v.id = l.{link_column} "
              "ORDER BY l.id"
              for name, (link, link_column, values, value_column) in _LINKS.items()
              if name in ("authors", "languages") and link in tables and values in tables),
        ]
        if "annotations" in tables:
            queries.append("SELECT id, book, format, annot_data FROM annotations WHERE annot_type = 'highlight' "
                           "ORDER BY id")
        digest = hashlib.sha256()
        for query in queries:
            for row in connection.execute(query):
                digest.update(repr(row).encode())
            digest.update(b"\n")
        connection.execute("COMMIT")
        return digest.hexdigest()
    finally:
        connection.close()


def _read_database(database: Path, read: Callable[[Path], T]) -> T:
    """`read(database)`, tried again briefly while Calibre holds its lock; Unavailable when it keeps holding it,
    FailedPrecondition when the file is not a readable Calibre database."""
    root = database.parent
    try:
        for attempt in Retrying(
            retry=retry_if_exception(_is_busy),
            stop=stop_after_attempt(BUSY_ATTEMPTS),
            wait=wait_exponential(multiplier=0.05, max=0.5),
            reraise=True,
        ):
            with attempt:
                return read(database)
    except sqlite3.Error as exc:
        if _is_busy(exc):
            raise Unavailable(
                f"The Calibre library at {root} is busy (Calibre is writing to {METADATA_DB}); try again in a moment."
            ) from None
        if getattr(exc, "sqlite_errorcode", 0) == sqlite3.SQLITE_READONLY_ROLLBACK:
            # A hot journal: only a writer may roll it back, and this service never writes to a library.
            raise FailedPrecondition(
                f"Calibre stopped midway through a change to {database} (its {METADATA_DB}-journal is waiting to be "
                "rolled back); open the library in Calibre once, which finishes the rollback, then try again."
            ) from None
        raise FailedPrecondition(
            f"{database} cannot be read as a Calibre database ({exc}); "
            "set CALIBRE_LIBRARY_PATH to your Calibre library's folder."
        ) from None
    raise AssertionError("Retrying either returns read's result or raises")


def read_library(root: Path | None) -> LibrarySnapshot:
    """Read the library at `root` whole; Unavailable when Calibre keeps it locked, after brief retries."""
    # Absolute: file paths go to other processes, which may run in another folder.
    database = metadata_db(root).absolute()
    root = database.parent
    started = time.perf_counter()
    rows = _read_database(database, _read_rows)
    snapshot = LibrarySnapshot(root, _build_books(root, rows))
    log.info(
        "read %d books from %s in %.0f ms",
        len(snapshot.books),
        database,
        (time.perf_counter() - started) * 1000,
    )
    return snapshot


def _signature(database: Path) -> tuple[int, ...]:
    """Changes whenever Calibre commits: the file's stat, and SQLite's file change counter, which a
    commit bumps even when the clock's granularity would leave the mtime unchanged."""
    try:
        stat = database.stat()
        with database.open("rb") as header:
            change_counter = int.from_bytes(header.read(28)[24:28], "big")
    except OSError as exc:
        raise FailedPrecondition(
            f"{database} cannot be read ({exc.strerror}); check its permissions."
        ) from None
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino, change_counter)


@dataclass(frozen=True)
class LibraryRead:
    """The snapshot a call is answered from; `stale_reason` says why it is not the library as it is now
    (Calibre holds its lock, so this is the previous read), empty when it is."""

    snapshot: LibrarySnapshot
    stale_reason: str = ""


class CalibreLibrary:
    """The library at `root`: the current snapshot, reread when metadata.db changes. Thread-safe.

    While Calibre holds its lock, a reread keeps serving the previous snapshot, saying so (and tries again
    at the next check); only a library never read yet answers Unavailable.
    """

    def __init__(
        self,
        root: Path | None,
        recheck_interval_s: float = CatalogSettings.model_fields["catalog_recheck_interval_s"].default,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = datetime.now,
    ) -> None:
        # Absolute: the paths of its files are stored with passages and made into links (os.path.abspath keeps
        # the name the user gave a symlinked library, which Calibre's links name it by).
        self.root = Path(os.path.abspath(root.expanduser())) if root is not None else None
        self._recheck_interval_s = recheck_interval_s
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._current: LibraryRead | None = None
        self._read_at = ""  # local time of the current snapshot's read, HH:MM:SS
        self._signature: tuple[int, ...] | None = None
        self._checked_at = float("-inf")
        self._contents_lock = threading.Lock()
        self._contents = ""  # `signature`: what the library held when metadata.db was as `_contents_written` says
        self._contents_written: tuple[int, ...] | None = None

    def snapshot(self) -> LibrarySnapshot:
        """The library as of at most `recheck_interval_s` ago; FailedPrecondition when the path is not a library."""
        return self.read().snapshot

    def signature(self) -> str:
        """What the library holds now (`_contents`): equal strings, nothing a sync reads has changed, though Calibre
        may have written metadata.db. Read again only when the file changed (its stat and change counter, cheap),
        so a caller may ask every second. FailedPrecondition when the path is not a library, Unavailable while
        Calibre keeps it locked."""
        database = metadata_db(self.root).absolute()
        with self._contents_lock:
            written = _signature(database)
            if written != self._contents_written:
                self._contents, self._contents_written = _read_database(database, _contents), written
            return self._contents

    def read(self, fresh: bool = False) -> LibraryRead:
        """`snapshot()`, and whether it is a previous read served while Calibre holds its lock. `fresh`: the library
        as it is on disk now (its file's state checked on this call, read again if it changed), for a caller
        that plans from it: a book `calibredb add` wrote a moment ago is in it."""
        with self._lock:
            now = self._clock()
            if self._current is not None and not fresh and now - self._checked_at < self._recheck_interval_s:
                return self._current
            self._checked_at = now
            try:
                # Taken before reading: a write that lands during the read changes it again.
                signature = _signature(metadata_db(self.root))
                if self._current is not None and signature == self._signature:
                    self._current = LibraryRead(self._current.snapshot)
                    return self._current
                read_at = self._wall_clock().strftime("%H:%M:%S")
                snapshot = read_library(self.root)
            except Unavailable:
                if self._current is None:
                    raise
                log.warning("%s is locked by Calibre; serving the previous read until it is free", self.root)
                self._current = LibraryRead(
                    self._current.snapshot,
                    f"Calibre holds its lock on {METADATA_DB}; this is the library as read at {self._read_at}",
                )
                return self._current
            except FailedPrecondition:
                # The library is gone or broken: no stale answers until it can be read again.
                self._current, self._signature = None, None
                raise
            self._current, self._signature, self._read_at = LibraryRead(snapshot), signature, read_at
            return self._current
