"""The Calibre reader against real libraries made by Calibre, and against the ways real ones go wrong."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
import sys
import time
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from alexandria.book_formats import DEFAULT_PREFERENCE, FormatPreference
from alexandria.contract import BOOK_SEARCH_LIMIT
from alexandria.errors import FailedPrecondition, NotFound, Unavailable
from alexandria_stack.layout import SAMPLE_LIBRARY
from catalog import expected
from catalog.scratch import copy_library, edit_highlights, open_for_writing
from services.catalog.calibre_db import CalibreLibrary, parse_calibre_date, read_library
from services.catalog.library import Book, BookQuery, resolve_file, select_file


def book_fields(book: Book) -> dict[str, Any]:
    """A Book in the contract's field names, to compare with expected.book_fields."""
    return {
        "id": book.id,
        "title": book.title,
        "author": book.author,
        "authors": list(book.authors),
        "language": book.language,
        "languages": list(book.languages),
        "tags": list(book.tags),
        "series": book.series,
        "series_index": book.series_index,
        "formats": list(book.formats),
        "isbn": book.isbn,
        "publisher": book.publisher,
        "pubdate": book.pubdate.isoformat() if book.pubdate else None,
        "rating": book.rating,
        "identifiers": dict(book.identifiers),
        "uuid": book.uuid,
        "author_sort": book.author_sort,
        "missing_formats": list(book.missing_formats()),
        "highlights": len(book.highlights),
    }


def ids(books: list[Book]) -> list[int]:
    return [b.id for b in books]


class FakeClock:
    """A monotonic clock the test moves by hand, so rereads happen without sleeping."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# --- every field of every book, as Calibre itself reports it


def test_every_book_has_the_fields_calibre_reports(library_name: str, library_root: Path) -> None:
    snapshot = read_library(library_root)
    rows = expected.load_rows(library_name)
    assert sorted(snapshot.books) == [row["id"] for row in rows]
    for row in rows:
        assert book_fields(snapshot.get(row["id"])) == expected.book_fields(row)


def test_every_file_is_where_calibre_keeps_it(library_name: str, library_root: Path) -> None:
    snapshot = read_library(library_root)
    for row in expected.load_rows(library_name):
        book = snapshot.get(row["id"])
        for fmt in book.formats:
            assert str(book.file(fmt).path) == expected.file_path(row, library_root, fmt)
            assert book.file(fmt).path.is_file()


def test_stats_count_books_authors_formats_and_languages(library_name: str, library_root: Path) -> None:
    stats = read_library(library_root).stats
    want = expected.stats_fields(expected.load_rows(library_name))
    assert (stats.total_books, stats.total_authors) == (want["total_books"], want["total_authors"])
    assert dict(stats.formats) == want["formats"]
    assert dict(stats.languages) == want["languages"]


def test_the_traps_of_the_shared_library(shared_corpus: Path) -> None:
    snapshot = read_library(expected.LIBRARIES["shared"])
    macbeth = snapshot.get(6)
    assert macbeth.authors == ("William Shakespeare", "Thomas Middleton")  # Calibre's order, not A-Z
    assert snapshot.get(1).tags == ("Fiction", "Romance", "Classics", "Literary Fiction")
    assert snapshot.get(1).rating == 5.0 and snapshot.get(3).rating is None
    assert snapshot.get(7).pubdate is None  # 0101-01-01, Calibre's "undefined"
    assert snapshot.get(8).pubdate == date(2015, 4, 26)  # stored 22:00 UTC, the date is UTC's
    assert snapshot.get(5).series is None and snapshot.get(5).series_index is None
    assert snapshot.get(9).file("EPUB").path.parent.name == "Guide de demarrage rapide (9)"


def test_the_traps_of_the_fixture_library() -> None:
    snapshot = read_library(expected.LIBRARIES["fixture"])
    assert snapshot.get(2).authors == ("Arthur Penhallow", "Margaret Holloway")
    assert (snapshot.get(2).series_index, snapshot.get(2).rating) == (1.5, 4.5)
    assert snapshot.get(3).author == "Božena Čulić" and snapshot.get(3).languages == ("hrv",)
    assert snapshot.get(4).authors == (
        "Thomas Whitcombe, Jr.",
    )  # stored by Calibre as "Thomas Whitcombe| Jr."
    assert snapshot.get(4).languages == ("eng", "lat")


# --- search


@pytest.mark.parametrize(
    ("query", "found"),
    [
        (BookQuery(author="AUSTEN"), [1, 2, 3, 4]),
        (BookQuery(author="  middleton "), [6]),
        (BookQuery(author="Shakespeare, William"), [5, 6]),  # Calibre's author sort form
        (BookQuery(title="guide"), [7, 9]),
        (BookQuery(title="DÉMARRAGE"), [9]),
        (BookQuery(language="deu"), [8]),
        (BookQuery(language="ENG"), [1, 2, 3, 4, 5, 6, 7]),
        (BookQuery(language="en"), [1, 2, 3, 4, 5, 6, 7]),
        (BookQuery(language="German"), [8]),
        (BookQuery(tags=("fiction", "ROMANCE")), [1, 3]),
        (BookQuery(tags=("Literary Fiction",)), [1]),
        (BookQuery(tags=("Drama", "no such tag")), []),
        (BookQuery(tags=("Drama", " ")), [5, 6]),
        (BookQuery(author="middleton", tags=("Drama",), language="eng"), [6]),
        (BookQuery(author="austen", language="fra"), []),
        (BookQuery(), [1, 2, 3, 4, 5, 6, 7, 8, 9]),
    ],
)
def test_search_filters_of_the_shared_library(
    shared_corpus: Path, query: BookQuery, found: list[int]
) -> None:
    assert ids(read_library(expected.LIBRARIES["shared"]).search(query, BOOK_SEARCH_LIMIT.high)) == found


@pytest.mark.parametrize(
    ("query", "found"),
    [
        (BookQuery(author="čulić"), [3]),
        (BookQuery(author="ČULIĆ"), [3]),
        (BookQuery(author="BOŽENA"), [3]),
        (BookQuery(author="holloway"), [1, 2]),
        (BookQuery(author="whitcombe, jr."), [4]),
        (BookQuery(language="hrv"), [3]),
        (BookQuery(language="hr-HR"), [3]),
        (BookQuery(language="Latin"), [4]),
        (BookQuery(tags=("sea stories", "lifeboats")), [2]),
    ],
)
def test_search_is_unicode_aware(query: BookQuery, found: list[int]) -> None:
    assert ids(read_library(expected.LIBRARIES["fixture"]).search(query, BOOK_SEARCH_LIMIT.high)) == found


def test_search_stops_at_the_limit(library_root: Path) -> None:
    assert ids(read_library(library_root).search(BookQuery(), 2)) == [1, 2]


@pytest.mark.parametrize(("requested", "granted"), [(0, 20), (-5, 1), (1, 1), (100, 100), (10**9, 100)])
def test_limits_are_clamped_per_the_contract(requested: int, granted: int) -> None:
    assert BOOK_SEARCH_LIMIT.clamp(requested) == granted


def test_unknown_book_is_not_found_with_its_id() -> None:
    with pytest.raises(NotFound, match="424242"):
        read_library(expected.LIBRARIES["fixture"]).get(424242)


# --- files on disk


def test_a_missing_file_is_reported_not_guessed(fixture_copy: Path) -> None:
    book = read_library(fixture_copy).get(2)  # EPUB and PDF
    book.file("PDF").path.unlink()
    assert book.missing_formats() == ("PDF",)
    # The preference falls back to what is on disk, in a preview as in ingest.
    assert select_file(book, FormatPreference.PDF).format == "EPUB"
    assert select_file(book, FormatPreference.ANY).format == "EPUB"
    assert resolve_file(book, FormatPreference.PDF).format == "EPUB"
    book.file("EPUB").path.unlink()
    with pytest.raises(FailedPrecondition, match="none of its files is on disk"):
        resolve_file(book, FormatPreference.PDF)


def test_resolve_prefers_the_asked_format_then_epub() -> None:
    snapshot = read_library(expected.LIBRARIES["fixture"])
    resolved = resolve_file(snapshot.get(2), FormatPreference.PDF)
    assert (resolved.format, resolved.size_bytes) == ("PDF", resolved.path.stat().st_size)
    assert resolve_file(snapshot.get(2), DEFAULT_PREFERENCE).format == "EPUB"
    assert resolve_file(snapshot.get(4), FormatPreference.EPUB).format == "PDF"  # the only one it has


def test_file_paths_are_absolute_whatever_the_library_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(expected.LIBRARIES["fixture"].parent)
    book = read_library(Path("library")).get(1)
    assert book.file("EPUB").path.is_absolute() and book.file("EPUB").path.is_file()


def test_a_file_path_leaving_the_library_is_not_followed(fixture_copy: Path) -> None:
    with open_for_writing(fixture_copy) as db:
        db.execute("UPDATE books SET path = '../../etc' WHERE id = 1")
    assert read_library(fixture_copy).get(1).files == ()


# --- read-only, locks and rereads


def test_reading_writes_nothing(fixture_copy: Path) -> None:
    def state() -> dict[str, str]:
        files = sorted(p for p in fixture_copy.rglob("*") if p.is_file())
        return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}

    before = state()
    library = CalibreLibrary(fixture_copy)
    library.snapshot().search(BookQuery(author="holloway"), 10)
    assert state() == before


@pytest.mark.slow
def test_a_locked_library_is_unavailable_quickly(fixture_copy: Path) -> None:
    with open_for_writing(fixture_copy) as blocker:
        blocker.execute("BEGIN EXCLUSIVE")  # what Calibre holds while it writes
        started = time.monotonic()
        with pytest.raises(Unavailable, match="busy"):
            read_library(fixture_copy)
        assert time.monotonic() - started < 5
        blocker.execute("ROLLBACK")


def test_a_change_calibre_never_finished_says_to_open_the_library_in_calibre(fixture_copy: Path) -> None:
    killed_midway = (
        "import os, sqlite3, sys\n"
        "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "db.execute('PRAGMA cache_size = 1')\n"  # so that the change reaches the file before a commit
        "db.execute('BEGIN')\n"
        "db.execute('CREATE TABLE filler (blob)')\n"
        "db.execute('INSERT INTO filler WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
        "WHERE i < 2000) SELECT randomblob(1000) FROM n')\n"
        "os._exit(9)\n"
    )
    subprocess.run([sys.executable, "-c", killed_midway, str(fixture_copy / "metadata.db")], check=False)
    assert (fixture_copy / "metadata.db-journal").stat().st_size > 0
    with pytest.raises(FailedPrecondition, match="open the library in Calibre once") as caught:
        CalibreLibrary(fixture_copy).snapshot()
    assert "metadata.db-journal" in caught.value.message and "CALIBRE_LIBRARY_PATH" not in caught.value.message


def test_rereads_when_calibre_changes_the_library_at_most_once_a_second(fixture_copy: Path) -> None:
    clock = FakeClock()
    library = CalibreLibrary(fixture_copy, clock=clock)
    first = library.snapshot()
    with open_for_writing(fixture_copy) as db:
        db.execute("UPDATE books SET title = 'The Almanac, Revised' WHERE id = 1")
    clock.now += 0.5
    assert library.snapshot() is first
    clock.now += 0.6
    assert library.snapshot().get(1).title == "The Almanac, Revised"
    clock.now += 5
    assert library.snapshot() is library.snapshot()  # unchanged file: no reread


def test_the_library_state_changes_with_what_a_sync_reads_and_not_with_a_viewers_last_read_place(
        fixture_copy: Path) -> None:
    library = CalibreLibrary(fixture_copy)
    before = library.signature()
    (fixture_copy / "metadata.db").touch()
    assert library.signature() == before
    edit_highlights(fixture_copy, "read", 1)  # what Calibre's viewer writes as the reader turns pages
    assert library.signature() == before
    with open_for_writing(fixture_copy) as db:
        db.execute("UPDATE books SET last_modified = '2026-11-29 08:00:00+00:00' WHERE id = 2")
    changed = library.signature()
    assert changed != before, "a book Calibre changed (a format replaced, a field set) changes the state"
    edit_highlights(fixture_copy, "add", 1, "the keeper's first entry", "")
    assert library.signature() != changed, "a highlight added changes it"


@pytest.mark.slow
def test_a_locked_reread_serves_the_previous_read(fixture_copy: Path) -> None:
    clock = FakeClock()
    library = CalibreLibrary(fixture_copy, clock=clock)
    first = library.snapshot()
    with open_for_writing(fixture_copy) as db:
        db.execute("UPDATE books SET title = 'Renamed' WHERE id = 1")
        db.execute("BEGIN EXCLUSIVE")
        clock.now += 2
        assert library.snapshot() is first
        db.execute("ROLLBACK")
    clock.now += 2
    assert library.snapshot().get(1).title == "Renamed"


@pytest.mark.slow
def test_a_locked_reread_says_which_read_it_serves(fixture_copy: Path) -> None:
    clock = FakeClock()
    wall_clock = lambda: datetime(2024, 5, 1, 10, 15, 30) + timedelta(seconds=clock.now)
    library = CalibreLibrary(fixture_copy, clock=clock, wall_clock=wall_clock)
    assert library.read().stale_reason == ""
    with open_for_writing(fixture_copy) as db:
        db.execute("UPDATE books SET title = 'Renamed' WHERE id = 1")
        db.execute("BEGIN EXCLUSIVE")
        clock.now += 2
        stale = library.read()
        assert stale.stale_reason == "Calibre holds its lock on metadata.db; this is the library as read at 10:15:30"
        assert stale.snapshot.get(1).title != "Renamed"
        clock.now += 0.5
        assert library.read().stale_reason == stale.stale_reason, "until the next check, the same read"
        db.execute("ROLLBACK")
    clock.now += 2
    fresh = library.read()
    assert fresh.stale_reason == "" and fresh.snapshot.get(1).title == "Renamed"


def test_a_library_that_goes_away_is_no_longer_served(fixture_copy: Path) -> None:
    clock = FakeClock()
    library = CalibreLibrary(fixture_copy, clock=clock)
    library.snapshot()
    (fixture_copy / "metadata.db").rename(fixture_copy / "moved.db")
    clock.now += 2
    for _ in range(2):  # and no stale read in between
        with pytest.raises(FailedPrecondition, match="has no metadata.db"):
            library.snapshot()


# --- paths that are not libraries


def _not_a_library(tmp_path: Path, kind: str) -> Path | None:
    if kind == "unset":
        return None
    path = tmp_path / "library"
    if kind == "file":
        path.write_text("not a folder")
    elif kind == "no metadata.db":
        path.mkdir()
    elif kind == "garbage metadata.db":
        path.mkdir()
        (path / "metadata.db").write_bytes(b"this is not a database" * 100)
    elif kind == "another sqlite db":
        path.mkdir()
        with sqlite3.connect(path / "metadata.db") as db:
            db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    return path


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("unset", "CALIBRE_LIBRARY_PATH is not set"),
        ("missing", "does not exist"),
        ("file", "is a file, not a folder"),
        ("no metadata.db", "has no metadata.db"),
        ("garbage metadata.db", "cannot be read as a Calibre database"),
        ("another sqlite db", "is not a Calibre database"),
    ],
)
def test_a_path_that_is_no_library_says_what_is_wrong(tmp_path: Path, kind: str, message: str) -> None:
    path = _not_a_library(tmp_path, kind)
    with pytest.raises(FailedPrecondition, match=message) as caught:
        CalibreLibrary(path).snapshot()
    if path is not None:
        assert str(path) in caught.value.message


# --- other schemas and messier data


def test_a_calibre_9_schema_without_books_isbn(library_name: str, library_root: Path, tmp_path: Path) -> None:
    library = copy_library(library_root, tmp_path / "library")
    with open_for_writing(library) as db:
        db.execute("DROP VIEW meta")  # it names books.isbn
        db.execute("ALTER TABLE books DROP COLUMN isbn")
        db.execute("ALTER TABLE books DROP COLUMN lccn")
        db.execute("ALTER TABLE books ADD COLUMN something_new TEXT")  # newer columns are ignored
        db.execute("CREATE TABLE books_something_link (id INTEGER PRIMARY KEY, book INTEGER, thing INTEGER)")
    snapshot = read_library(library)
    for row in expected.load_rows(library_name):
        assert book_fields(snapshot.get(row["id"])) == expected.book_fields(row)


def test_an_older_schema_without_optional_tables_and_columns(fixture_copy: Path) -> None:
    with open_for_writing(fixture_copy) as db:
        for name, kind in db.execute(
            "SELECT name, type FROM sqlite_master WHERE type IN ('view', 'trigger')"
        ).fetchall():
            db.execute(f"DROP {kind.upper()} {name}")
        for table in ("identifiers", "books_languages_link", "languages", "books_ratings_link", "ratings"):
            db.execute(f"DROP TABLE {table}")
        for column in ("uuid", "pubdate", "series_index"):
            db.execute(f"ALTER TABLE books DROP COLUMN {column}")
    book = read_library(fixture_copy).get(1)
    assert (book.title, book.authors, book.tags) == (
        "The Lighthouse Keeper's Almanac",
        ("Margaret Holloway",),
        ("Fiction", "Sea Stories", "Short Stories"),
    )
    assert (book.languages, dict(book.identifiers), book.rating, book.pubdate, book.uuid) == (
        (),
        {},
        None,
        None,
        "",
    )
    assert (book.series, book.series_index) == ("Coastal Tales", 1.0)


def test_names_with_commas_survive(fixture_copy: Path) -> None:
    with open_for_writing(fixture_copy) as db:
        db.execute("INSERT INTO tags (id, name) VALUES (100, 'Sea, and Sky')")
        db.execute("INSERT INTO books_tags_link (book, tag) VALUES (1, 100)")
    snapshot = read_library(fixture_copy)
    assert snapshot.get(1).tags == ("Fiction", "Sea Stories", "Short Stories", "Sea, and Sky")
    assert ids(snapshot.search(BookQuery(tags=("sea, and sky",)), 10)) == [1]
    assert snapshot.get(4).authors == ("Thomas Whitcombe, Jr.",)


@pytest.mark.parametrize(
    ("stored", "parsed"),
    [
        ("1813-01-28 00:00:00+00:00", date(1813, 1, 28)),
        ("1813-01-28T00:00:00+00:00", date(1813, 1, 28)),
        ("2024-01-01 12:00:00.123456+00:00", date(2024, 1, 1)),
        ("2015-04-27 00:30:00+02:00", date(2015, 4, 26)),  # to UTC, as Calibre stores them
        ("2020-05-01 00:00:00", date(2020, 5, 1)),
        ("0101-01-01 00:00:00+00:00", None),  # Calibre's "undefined"
        ("0100-12-31 23:00:00+00:00", None),  # the same, shifted by a time zone
        ("", None),
        (None, None),
        ("not a date", None),
    ],
)
def test_calibre_dates(stored: str | None, parsed: date | None) -> None:
    assert parse_calibre_date(stored) == parsed


@pytest.mark.skipif(shutil.which("calibre-debug") is None, reason="needs Calibre's calibre-debug (make setup installs calibre)")
def test_a_book_has_the_highlights_calibres_viewer_saved_and_not_those_the_reader_deleted(tmp_path: Path) -> None:
    library = copy_library(SAMPLE_LIBRARY, tmp_path / "library")
    for text in ("the first highlighted sentence", "a second highlighted sentence"):
        edit_highlights(library, "add", 1, text, "the reader's note")
    books = read_library(library).books
    assert [h.text for h in books[1].highlights] == ["the first highlighted sentence", "a second highlighted sentence"]
    first = books[1].highlights[0]
    assert first.notes == "the reader's note" and first.format == "EPUB" and first.chapter_titles == ("Chapter 1",)
    assert first.start_cfi == "/4/2/4/1:0" and books[2].highlights == ()
    edit_highlights(library, "remove", 1)  # Calibre keeps the rows, marked removed, to merge other devices' copies
    with open_for_writing(library) as db:
        assert db.execute("SELECT COUNT(*) FROM annotations").fetchone() == (2,)
    assert read_library(library).books[1].highlights == ()


def test_a_relative_library_path_gives_its_books_absolute_paths(fixture_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(fixture_copy.parent)
    library = CalibreLibrary(Path(fixture_copy.name))
    files = [file for book in library.snapshot().books.values() for file in book.files]
    assert files and all(file.path.is_absolute() and file.path.is_file() for file in files)
    assert library.root == fixture_copy
