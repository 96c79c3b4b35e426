"""The store's records as types: what ingest writes into points and collections, and what query, catalog
and ingest read back, each converted in one place (`to_payload` / `from_payload`).

A book's points all carry its `BookRecord`; each point adds what it is (`ChunkRecord`: a passage, or a
chapter parent). A collection records the model that made its vectors (`CollectionModel`). Only points
of books written whole count for users: `complete_books` is the one query for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from alexandria.book_identity import FileVersion
from alexandria.errors import FailedPrecondition
from alexandria.store import schema as f
from alexandria.store.model import SENTENCES, WINDOWS, CollectionInfo, Filter, Store


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True)
class BookRecord:
    """What every point of a book says about the book."""

    book_key: str  # Calibre uuid, or a local file's `local_book_key`
    title: str
    author: str  # authors joined with " & "
    authors: tuple[str, ...] = ()
    language: str = ""
    file_path: str = ""
    format: str = ""
    calibre_id: int | None = None
    model: str = ""
    dimension: int = 0
    chunking: dict[str, Any] = field(default_factory=dict)  # threshold, min/max_chunk_size, hierarchical
    ingested_at: str = ""  # ISO 8601 UTC
    complete: bool = False  # written false; flipped to true once every point of the book is in
    version: int = 0  # when this version was ingested (ns): a re-ingest writes the book anew beside the old one
    file_version: FileVersion | None = None  # the version of the file it was read from (None: not known)

    def to_payload(self) -> dict[str, Any]:
        payload = {
            f.BOOK_KEY: self.book_key, f.BOOK_TITLE: self.title, f.AUTHOR: self.author,
            f.AUTHORS: list(self.authors), f.LANGUAGE: self.language, f.FILE_PATH: self.file_path,
            f.FORMAT: self.format, f.MODEL: self.model, f.DIMENSION: self.dimension, f.CHUNKING: self.chunking,
            f.INGESTED_AT: self.ingested_at, f.COMPLETE: self.complete, f.VERSION: self.version,
        }
        if self.calibre_id is not None:
            payload[f.CALIBRE_ID] = self.calibre_id
        if self.file_version is not None:
            payload[f.SOURCE] = self.file_version.to_stored(self.book_key)
        return payload

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> BookRecord:
        return cls(
            book_key=str(payload.get(f.BOOK_KEY, "")),
            title=str(payload.get(f.BOOK_TITLE, "")),
            author=str(payload.get(f.AUTHOR, "")),
            authors=tuple(payload.get(f.AUTHORS) or ()),
            language=str(payload.get(f.LANGUAGE, "")),
            file_path=str(payload.get(f.FILE_PATH, "")),
            format=str(payload.get(f.FORMAT, "")),
            calibre_id=_optional_int(payload.get(f.CALIBRE_ID)),
            model=str(payload.get(f.MODEL, "")),
            dimension=int(payload.get(f.DIMENSION, 0)),
            chunking=dict(payload.get(f.CHUNKING) or {}),
            ingested_at=str(payload.get(f.INGESTED_AT, "")),
            complete=payload.get(f.COMPLETE) is True,
            version=int(payload.get(f.VERSION, 0)),
            file_version=FileVersion.parse_stored(str(payload[f.SOURCE]))[1] if f.SOURCE in payload else None,
        )


@dataclass(frozen=True)
class ChunkRecord:
    """One point: a passage (a child chunk under a chapter, or a flat chunk), a chapter parent, or a reader's
    highlight (its chapter titles joined in `chapter_title`)."""

    book: BookRecord
    level: f.Level
    text: str
    chapter_title: str = ""
    chapter_index: int = 0
    position: int = 0  # order of the chunk in the whole book
    word_count: int = 0
    sibling_count: int = 0  # a child: the chunks of its chapter; a parent: its children
    sequence_index: int = 0  # a child's index among its siblings
    parent_id: str | None = None  # a child's parent point
    page_start: int | None = None
    page_end: int | None = None
    text_source: f.TextSource = f.TextSource.TEXT
    open_at: str = ""  # a passage's place for Calibre's viewer (services/ingest/locations.py); "": none known
    note: str = ""  # a highlight's note
    highlight_format: str = ""  # the format a highlight was made in; "": the book's

    def to_payload(self) -> dict[str, Any]:
        payload = {
            **self.book.to_payload(), f.LEVEL: str(self.level), f.TEXT: self.text,
            f.CHAPTER_TITLE: self.chapter_title, f.CHAPTER_INDEX: self.chapter_index, f.POSITION: self.position,
            f.WORD_COUNT: self.word_count, f.SIBLING_COUNT: self.sibling_count,
        }
        if self.level != f.Level.PARENT:
            payload[f.SEQUENCE_INDEX] = self.sequence_index
        if self.parent_id is not None:
            payload[f.PARENT_ID] = self.parent_id
        if self.page_start is not None:
            payload[f.PAGE_START] = self.page_start
            payload[f.PAGE_END] = self.page_end
        if self.text_source != f.TextSource.TEXT:
            payload[f.TEXT_SOURCE] = self.text_source
        if self.open_at:
            payload[f.OPEN_AT] = self.open_at
        if self.note:
            payload[f.NOTE] = self.note
        if self.highlight_format:
            payload[f.HIGHLIGHT_FORMAT] = self.highlight_format
        return payload

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> ChunkRecord:
        text = str(payload.get(f.TEXT, ""))
        return cls(
            book=BookRecord.from_payload(payload),
            level=f.Level(payload.get(f.LEVEL, f.Level.FLAT)),
            text=text,
            chapter_title=str(payload.get(f.CHAPTER_TITLE, "")),
            chapter_index=int(payload.get(f.CHAPTER_INDEX, 0)),
            position=int(payload.get(f.POSITION, 0)),
            word_count=int(payload.get(f.WORD_COUNT) or len(text.split())),
            sibling_count=int(payload.get(f.SIBLING_COUNT, 0)),
            sequence_index=int(payload.get(f.SEQUENCE_INDEX, 0)),
            parent_id=payload.get(f.PARENT_ID) or None,
            page_start=_optional_int(payload.get(f.PAGE_START)),
            page_end=_optional_int(payload.get(f.PAGE_END)),
            text_source=f.TextSource(payload.get(f.TEXT_SOURCE, f.TextSource.TEXT)),
            open_at=str(payload.get(f.OPEN_AT, "")),
            note=str(payload.get(f.NOTE, "")),
            highlight_format=str(payload.get(f.HIGHLIGHT_FORMAT, "")),
        )


@dataclass(frozen=True)
class CollectionModel:
    """The model that made a collection's vectors, and the multivector its passages carry, as the
    collection records them."""

    name: str | None  # None: a collection that recorded none
    dimension: int
    # WINDOWS; SENTENCES for a collection made before passages were embedded by windows (it records none)
    passage_vectors: str = WINDOWS

    def to_metadata(self) -> dict[str, Any]:
        return {f.MODEL: self.name, f.DIMENSION: self.dimension, f.PASSAGE_VECTORS: self.passage_vectors}

    @classmethod
    def of(cls, info: CollectionInfo) -> CollectionModel:
        return cls(info.metadata.get(f.MODEL), int(info.metadata.get(f.DIMENSION, info.vector_size)),
                   str(info.metadata.get(f.PASSAGE_VECTORS, SENTENCES)))

    def matches(self, model: str | None, dimension: int) -> bool:
        return self.name in (None, model) and self.dimension == dimension

    def check(self, collection: str, model: str | None, dimension: int) -> None:
        """Refuse vectors of another model (or another size) than the collection's."""
        if not self.matches(model, dimension):
            raise FailedPrecondition(
                f"Collection '{collection}' holds vectors of {self.name or 'an unnamed model'} ({self.dimension} "
                f"dims) but the embedder runs {model or 'an unnamed model'} ({dimension} dims); rebuild it under "
                f"the running model with `alexandria reindex --collection {collection}` (searches by words, "
                "search_mode lexical, keep answering meanwhile), or run the embedder with the collection's model."
            )

    def check_writable(self, collection: str) -> None:
        """Refuse to add books to a collection whose passages carry sentence vectors: its books would be
        scored two ways."""
        if self.passage_vectors != WINDOWS:
            raise FailedPrecondition(
                f"Collection '{collection}' was made by an earlier Alexandria, which embedded passages sentence "
                "by sentence; its searches still work, but books are added only to collections embedded by "
                f"passage windows: rebuild it with `alexandria reindex --collection {collection}` (its searches "
                "keep answering meanwhile)."
            )


def complete(**must: Any) -> Filter:
    """Points of books written whole (the only ones users see), narrowed by `must`."""
    return Filter(must={f.COMPLETE: True, **must})


def _complete_counts(store: Store, collection: str, key: str, **must: Any) -> dict[Any, int]:
    """Value of `key` -> points of books written whole into `collection` that hold it (narrowed by `must`).

    All points less those not complete: every point is complete but a book's being written, and a facet that
    checks a condition at each point it counts took 1.9-2.8 s for book keys at 2,250,000 points, where these
    two took 0.7-1.0 s together."""
    counts = store.facet_counts(collection, key, Filter(must=must))
    for value, partial in store.facet_counts(collection, key, Filter(must=must, must_not={f.COMPLETE: True})).items():
        if counts.get(value, 0) > partial:
            counts[value] -= partial
        else:
            counts.pop(value, None)
    return counts


def complete_books(store: Store, collection: str, **must: Any) -> dict[str, int]:
    """Book key -> points, of the books written whole into `collection` (narrowed by `must`)."""
    return _complete_counts(store, collection, f.BOOK_KEY, **must)


def complete_books_by_language(store: Store, collection: str, books_held: int) -> dict[str, int]:
    """Language as stored -> how many books `collection` holds whole in it (books with none are not counted).

    Every point of a book carries the book's one language, so the language with the most points holds the books
    the others do not: its own facet read, the longest of them (about 0.7 s at 7,500 books, holding the GIL), is
    left out for the books the collection holds whole (`books_held`, which its caller has counted)."""
    points = _complete_counts(store, collection, f.LANGUAGE)
    if not points:
        return {}
    largest = max(points, key=lambda language: points[language])
    books = {str(language): len(complete_books(store, collection, **{f.LANGUAGE: language}))
             for language in points if language != largest}
    books[str(largest)] = books_held - sum(books.values())
    return books


def book_file_versions(store: Store, collection: str, book_key: str) -> list[FileVersion]:
    """The versions of the files the book's versions held whole were read from (complete_file_versions, one book)."""
    return [FileVersion.parse_stored(str(value))[1]
            for value in _complete_counts(store, collection, f.SOURCE, **{f.BOOK_KEY: book_key})]


def complete_file_versions(store: Store, collection: str) -> dict[str, list[FileVersion]]:
    """Book key -> the versions of the files each book held whole was read from: one; none for a book ingested
    before file versions were kept; two where a write stopped between making the book's new version visible and
    dropping its old one (HeldBooks)."""
    versions: dict[str, list[FileVersion]] = {key: [] for key in complete_books(store, collection)}
    for value in _complete_counts(store, collection, f.SOURCE):
        key, version = FileVersion.parse_stored(str(value))
        if key in versions:
            versions[key].append(version)
    return versions


def complete_book_records(store: Store, collection: str) -> list[BookRecord]:
    """The record of each book `collection` holds whole (of its newest version), in book key order."""
    books = []
    for key in sorted(complete_books(store, collection)):
        points = store.scroll(collection, complete(**{f.BOOK_KEY: key}), limit=1)
        if points:
            books.append(BookRecord.from_payload(points[0].payload))
    return books
