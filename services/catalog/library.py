"""The Calibre library's books in memory: an immutable `LibrarySnapshot` answers searches, and picks the
file of a book that ingest reads. calibre_db.py reads metadata.db into one."""

from __future__ import annotations

import logging
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from types import MappingProxyType

from alexandria.book_formats import FormatPreference
from alexandria.errors import FailedPrecondition, NotFound
from alexandria.languages import language_code

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class BookFile:
    """One format of a book, where Calibre keeps it (it may be missing on disk)."""

    format: str  # Calibre's name, upper case: a BookFormat's ("EPUB") or one ingest cannot read ("MOBI")
    library: Path
    relative: str  # "Author/Title (id)/Title - Author.epub", as Calibre names it

    @property
    def path(self) -> Path:
        # Built on demand: making 10,000s of Path objects was most of a large library's load time.
        return self.library / self.relative


@dataclass(frozen=True)
class Highlight:
    """A highlight the reader made in Calibre's viewer, as Calibre saved it (its annotations table)."""

    uuid: str
    format: str  # the book's format it was made in
    text: str
    notes: str
    chapter_titles: tuple[str, ...]  # its chapter and those above it, outermost first
    start_cfi: str  # within its spine item
    spine_index: int
    timestamp: str  # when it was made or last changed, as Calibre wrote it


@dataclass(frozen=True)
class Book:
    """One book's metadata as Calibre holds it."""

    id: int
    title: str
    authors: tuple[str, ...]  # in Calibre's order
    author_sort: str
    languages: tuple[str, ...]  # ISO 639-2 as Calibre stores them, in Calibre's order
    tags: tuple[str, ...]
    series: str | None
    series_index: float | None  # None when the book is in no series
    identifiers: Mapping[str, str]  # type (lower case) -> value
    publisher: str | None
    pubdate: date | None  # None for Calibre's "undefined" date
    rating: float | None  # stars 0-5, None when unrated
    uuid: str
    files: tuple[BookFile, ...]  # sorted by format, as Calibre shows them
    highlights: tuple[Highlight, ...] = ()  # the reader's, made in Calibre's viewer

    @property
    def author(self) -> str:
        """All authors joined as Calibre shows them."""
        return " & ".join(self.authors)

    @property
    def language(self) -> str:
        return self.languages[0] if self.languages else ""

    @property
    def isbn(self) -> str | None:
        return self.identifiers.get("isbn")

    @property
    def formats(self) -> tuple[str, ...]:
        return tuple(f.format for f in self.files)

    def file(self, fmt: str) -> BookFile | None:
        """The book's file of format `fmt` (any case), whether or not it is on disk."""
        wanted = fmt.upper()
        return next((f for f in self.files if f.format == wanted), None)

    def missing_formats(self) -> tuple[str, ...]:
        """Formats Calibre lists for the book whose file is not on disk (looks at the disk now)."""
        return tuple(f.format for f in self.files if not f.path.is_file())


@dataclass(frozen=True)
class BookQuery:
    """Search filters; empty ones match everything. Text matches are partial and case-insensitive."""

    author: str = ""
    title: str = ""
    language: str = ""  # a code, tag or name of any of the book's languages (alexandria.languages)
    tags: tuple[str, ...] = ()  # exact names; a book must have all of them


@dataclass(frozen=True)
class LibraryStats:
    total_books: int
    total_authors: int
    formats: Mapping[str, int]  # books having each format
    languages: Mapping[str, int]  # books in each language


@dataclass(frozen=True)
class ResolvedFile:
    """A book's file chosen for ingest, checked to be on disk."""

    book: Book
    format: str
    path: Path
    size_bytes: int


def fold(text: str) -> str:
    """Unicode-aware caseless form for matching (SQLite's LIKE and lower() know ASCII only)."""
    return unicodedata.normalize("NFKC", text.strip().casefold())


@dataclass(frozen=True)
class _SearchKeys:
    """A book's folded fields, computed once per snapshot so that a search only compares strings."""

    book: Book
    title: str
    authors: str  # the names and the author sort, one per line, so no match spans two of them
    languages: frozenset[str]
    tags: frozenset[str]

    @classmethod
    def of(cls, book: Book) -> _SearchKeys:
        return cls(
            book=book,
            title=fold(book.title),
            authors="\n".join(fold(a) for a in (*book.authors, book.author_sort)),
            languages=frozenset(language_code(language) for language in book.languages),
            tags=frozenset(fold(tag) for tag in book.tags),
        )


class LibrarySnapshot:
    """One consistent read of a library, held in memory and never changed: safe to share across threads."""

    def __init__(self, root: Path, books: Iterable[Book]) -> None:
        self.root = root
        self.books: Mapping[int, Book] = MappingProxyType(
            {b.id: b for b in sorted(books, key=lambda b: b.id)}
        )
        self._keys = tuple(_SearchKeys.of(book) for book in self.books.values())
        by_language: dict[str, list[_SearchKeys]] = defaultdict(list)
        by_tag: dict[str, list[_SearchKeys]] = defaultdict(list)
        for keys in self._keys:
            for language in keys.languages:
                by_language[language].append(keys)
            for tag in keys.tags:
                by_tag[tag].append(keys)
        self._by_language = {k: tuple(v) for k, v in by_language.items()}
        self._by_tag = {k: tuple(v) for k, v in by_tag.items()}
        self.stats = LibraryStats(
            total_books=len(self.books),
            total_authors=len({a for b in self.books.values() for a in b.authors}),
            formats=MappingProxyType(dict(Counter(f for b in self.books.values() for f in set(b.formats)))),
            languages=MappingProxyType(
                dict(Counter(x for b in self.books.values() for x in set(b.languages)))
            ),
        )

    def get(self, book_id: int) -> Book:
        """The book with Calibre id `book_id`; NotFound when the library has none."""
        book = self.books.get(book_id)
        if book is None:
            raise NotFound(
                f"No book with id {book_id} in the Calibre library at {self.root}; "
                "use alexandria_search to find a book's id."
            )
        return book

    def search(self, query: BookQuery, limit: int) -> list[Book]:
        """Books matching every filter of `query`, in id order, at most `limit`."""
        title, author = fold(query.title), fold(query.author)
        language = language_code(query.language)
        tags = frozenset(fold(t) for t in query.tags if t.strip())
        # Start from the shortest exact-match list (a language's or a tag's books) instead of all books.
        postings = [self._by_tag.get(tag, ()) for tag in tags]
        if language:
            postings.append(self._by_language.get(language, ()))
        candidates = min(postings, key=len) if postings else self._keys
        found: list[Book] = []
        for keys in candidates:
            if (
                (not title or title in keys.title)
                and (not author or author in keys.authors)
                and (not language or language in keys.languages)
                and tags <= keys.tags
            ):
                found.append(keys.book)
                if len(found) >= limit:
                    break
        return found


def select_file(book: Book, preference: FormatPreference) -> BookFile | None:
    """The file of a book that ingest reads: the preferred format if it is on disk, else the best other one
    (EPUB, PDF, then by name); None when none of its files is on disk. Preview, ingest and sync all ask this."""
    return next((f for f in sorted(book.files, key=lambda f: preference.rank(f.format)) if f.path.is_file()), None)


def resolve_file(book: Book, preference: FormatPreference) -> ResolvedFile:
    """The file ingest should read: the preferred format if on disk, else the best other one."""
    chosen = select_file(book, preference)
    if chosen is not None:
        return ResolvedFile(book=book, format=chosen.format, path=chosen.path, size_bytes=chosen.path.stat().st_size)
    if not book.files:
        raise FailedPrecondition(
            f"Book {book.id} ({book.title!r}) has no files in Calibre; add a format in Calibre."
        )
    looked = "; ".join(str(f.path) for f in book.files)
    raise FailedPrecondition(
        f"Book {book.id} ({book.title!r}): Calibre lists {', '.join(book.formats)} but none of its files is on "
        f"disk (looked for {looked}); run Calibre's Library maintenance > Check library."
    )


@dataclass(frozen=True)
class LibraryFile:
    """A book and the file of it ingest would read (None when none is on disk), with what identifies that
    file's version: its size and modification time."""

    book: Book
    file: BookFile | None
    size_bytes: int = 0
    mtime_ns: int = 0


def library_files(snapshot: LibrarySnapshot, preference: FormatPreference) -> list[LibraryFile]:
    """Every book of the library with the file ingest would read, in id order."""
    listed = []
    for book in snapshot.books.values():
        chosen = select_file(book, preference)
        if chosen is None:
            listed.append(LibraryFile(book, None))
            continue
        stat = chosen.path.stat()
        listed.append(LibraryFile(book, chosen, stat.st_size, stat.st_mtime_ns))
    return listed
