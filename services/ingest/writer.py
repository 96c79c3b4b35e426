"""The writer stage: the only code that puts books into, and takes them out of, the store.

`build_points` turns a chunked, embedded book into its points, each with an id from `point_id`. A book's points are upserted with `complete` false and become visible to queries
only when one final update flips them all to true. Leftovers of an earlier
attempt that died half-way are deleted before writing, so a retry starts clean.
Already-ingested books are found by book key (never by title) and refused.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from alexandria.book_identity import FileVersion
from alexandria.errors import AlreadyExists, FailedPrecondition, NotFound
from alexandria.store import Filter, SparseVector, Store, StoredPoint, collection_not_found
from alexandria.store import schema as f
from alexandria.store.lexical import encode_document
from alexandria.store.records import (
    BookRecord,
    ChunkRecord,
    CollectionModel,
    book_file_versions,
    complete,
    complete_file_versions,
)
from services.ingest.documents import Chunk, ChunkedBook, ParentChunk

log = logging.getLogger(__name__)

# Fixed namespace: a point's id is a pure function of its book key and place in the book.
POINT_NAMESPACE = uuid.UUID("5f0c4a6e-2f7e-4a57-9a39-0a7e1c1d2b33")
UPSERT_BATCH = 256


def point_id(book_key: str, version: int, level: str, index: int) -> str:
    """Deterministic point id: a version of a book, cut the same way, always gets the same ids, and two
    versions of one book never share one."""
    return str(uuid.uuid5(POINT_NAMESPACE, f"{book_key}@{version}/{level}/{index}"))


def lexical_vector(level: f.Level, text: str) -> SparseVector | None:
    """A point's lexical vector. A chapter has none: it is never searched, and its terms would count a second
    time in the IDF."""
    return None if level == f.Level.PARENT else encode_document(text)


def build_points(book: BookRecord, chunked: ChunkedBook, sentence_vectors: np.ndarray,
                 window_vectors: Sequence[np.ndarray], parent_vectors: np.ndarray,
                 open_at: Sequence[str] = ()) -> list[StoredPoint]:
    """Every point of one version of a book, children first then parents, all written with `complete` false.
    A passage's dense vector is the normalised mean of its sentences' vectors; it keeps its window vectors, and
    its place for Calibre's viewer when `open_at` has one (in chunk order)."""
    parent_ids = [point_id(book.book_key, book.version, f.Level.PARENT, n) for n in range(len(chunked.parents))]
    points = []
    for n, chunk in enumerate(chunked.chunks):
        record = _record(book, chunk, chunk.level, chunk.sibling_count, sequence_index=chunk.sequence_index,
                         parent_id=None if chunk.parent_index is None else parent_ids[chunk.parent_index],
                         open_at=open_at[n] if open_at else "")
        centroid = sentence_vectors[chunk.first_sentence : chunk.end_sentence].mean(axis=0)
        points.append(StoredPoint(point_id(book.book_key, book.version, str(chunk.level), n),
                                  centroid / np.linalg.norm(centroid), lexical_vector(chunk.level, chunk.text),
                                  record.to_payload(), window_vectors[n]))
    for n, parent in enumerate(chunked.parents):
        record = _record(book, parent, f.Level.PARENT, parent.child_count)
        points.append(StoredPoint(parent_ids[n], parent_vectors[n], lexical_vector(f.Level.PARENT, parent.text),
                                  record.to_payload()))
    return points


def _record(book: BookRecord, chunk: Chunk | ParentChunk, level: f.Level, sibling_count: int,
            sequence_index: int = 0, parent_id: str | None = None, open_at: str = "") -> ChunkRecord:
    locator = chunk.locator
    return ChunkRecord(
        book=book, level=level, text=chunk.text, chapter_title=locator.chapter_title,
        chapter_index=locator.chapter_index, position=locator.position, word_count=chunk.word_count,
        sibling_count=sibling_count, sequence_index=sequence_index, parent_id=parent_id,
        page_start=locator.page_start, page_end=locator.page_end, text_source=locator.text_source, open_at=open_at,
    )


@dataclass(frozen=True)
class CalibreMetadata:
    """What a Calibre book's points say of it that Calibre's record of the book decides: its title, its authors, its
    language and the path of its file (Calibre moves the file when the title or an author changes). Changed in
    Calibre with the file's bytes the same, it is set on the points in place: nothing is read or embedded again."""

    title: str
    authors: tuple[str, ...]
    language: str  # "": Calibre names none, and the points keep the language read from the file
    file_path: str

    def to_payload(self) -> dict[str, object]:
        payload: dict[str, object] = {f.BOOK_TITLE: self.title, f.AUTHOR: " & ".join(self.authors),
                                      f.AUTHORS: list(self.authors), f.FILE_PATH: self.file_path}
        if self.language:
            payload[f.LANGUAGE] = self.language
        return payload

    def differs_from(self, book: BookRecord) -> bool:
        """Whether the points of `book` say otherwise than this record."""
        return ((self.title, self.authors, self.file_path) != (book.title, book.authors, book.file_path)
                or self.language not in ("", book.language))


@dataclass(frozen=True)
class HeldBooks:
    """What a collection holds whole: each book's file version (None for a book ingested before file versions were
    kept) and the books held whole in more than one version (each one's file version is its newest's). Only a write
    stopped between making a new version visible and dropping the old (`BookWriter.write`) leaves two, each found
    by searches; no later write of the book comes while its file stays as it is, so the sync drops the older
    (`BookWriter.keep_newest`)."""

    file_versions: dict[str, FileVersion | None]
    held_twice: set[str]
    records: dict[str, BookRecord]  # what each book's points say of it (of its newest version)


@dataclass(frozen=True)
class RemovedBook:
    book_key: str
    title: str
    author: str
    points: int


class BookWriter:
    def __init__(self, store: Store, collection: str) -> None:
        self.store = store
        self.collection = collection

    def ensure_collection(self, dimension: int, model: str) -> None:
        """Create the collection for this model, or refuse one whose vectors another model made. The store completes
        an existing one too: the payload indexes added since it was made, or that a process killed amid its
        creation never made (filters and facets on a field want its index)."""
        info = self.store.collection_info(self.collection)
        if info is not None:
            recorded = CollectionModel.of(info)
            recorded.check(self.collection, model, dimension)
            recorded.check_writable(self.collection)
        self.store.ensure_collection(self.collection, dimension, CollectionModel(model, dimension).to_metadata())

    def _book(self, book_key: str, **more: object) -> Filter:
        return Filter(must={f.BOOK_KEY: book_key, **more})

    def refuse_if_ingested(self, book_key: str, title: str) -> None:
        if self.store.collection_info(self.collection) is None:
            return
        if self.store.count(self.collection, complete(**{f.BOOK_KEY: book_key})):
            raise AlreadyExists(
                f"Book already ingested: '{title}' is in collection '{self.collection}'. "
                "Remove it first (alexandria_remove; `alexandria remove` in a terminal) to ingest it again with other "
                "parameters."
            )

    def write(self, book_key: str, version: int, points: list[StoredPoint]) -> int:
        """Write every point of this version invisibly, make it visible at once, then drop any older version.

        While a new version replaces an old one both are visible for a moment; a search keeps the newest
        version of each book it finds, so it never returns a book twice, nor misses it. A reindex that moves the
        collection's name to its rebuilt collection meanwhile (reindex.py) would have the later batches land there
        and be made visible as a part of the book: the write then takes back what reached it and is refused.
        """
        written_to = self.store.collection_target(self.collection)
        self.store.delete(self.collection, self._book(book_key, **{f.COMPLETE: False}))
        # Named, not "all but this one": a reindex that moves the name to its rebuilt collection after the check
        # below would have that delete drop the copy of this book the reindex made there.
        older = self._versions(book_key)
        for start in range(0, len(points), UPSERT_BATCH):
            self.store.upsert(self.collection, points[start : start + UPSERT_BATCH])
        if self.store.collection_target(self.collection) != written_to:
            self.store.delete(self.collection, self._book(book_key, **{f.VERSION: version}))
            raise self._replaced()
        self.store.set_payload(self.collection, self._book(book_key, **{f.VERSION: version}), {f.COMPLETE: True})
        if older:
            self.store.delete(self.collection, self._book(book_key, **{f.VERSION: older}))
        if self.store.collection_target(self.collection) != written_to:
            raise self._replaced()  # made whole in the collection the reindex dropped, not in the one it made
        return len(points)

    def _versions(self, book_key: str) -> list[int]:
        """The versions of the book the collection holds (one; two after a write stopped midway: HeldBooks)."""
        versions: list[int] = []
        while found := self.store.scroll(self.collection, Filter(must={f.BOOK_KEY: book_key},
                                                                 must_not={f.VERSION: versions} if versions else {}), 1):
            versions.append(BookRecord.from_payload(found[0].payload).version)
        return versions

    def _replaced(self) -> FailedPrecondition:
        return FailedPrecondition(f"Collection '{self.collection}' was replaced by its reindex while this book was "
                                  "written; ingest the book again.")

    def restamp(self, book_key: str, file_version: FileVersion) -> None:
        """Record that the book's file changed its stamp but not its content: no need to ingest it again."""
        self.store.set_payload(self.collection, self._book(book_key), {f.SOURCE: file_version.to_stored(book_key)})

    def update_metadata(self, book_key: str, metadata: CalibreMetadata) -> None:
        """Set what Calibre now says of the book on every point of it (its highlights' too), in place."""
        self.store.set_payload(self.collection, self._book(book_key), metadata.to_payload())

    def find_book_key(self, where: Filter, what: str) -> tuple[str, str, str]:
        """(book key, title, author) of the one book matching `where`, or NotFound naming `what`."""
        if self.store.collection_info(self.collection) is None:
            raise collection_not_found(self.collection)
        records = self.store.scroll(self.collection, where, limit=1)
        if not records:
            raise NotFound(f"No ingested book matches {what} in collection '{self.collection}'.")
        book = BookRecord.from_payload(records[0].payload)
        return book.book_key, book.title, book.author

    def held_books(self) -> HeldBooks:
        """The books the collection holds whole (none when it does not exist yet); reads only."""
        if self.store.collection_info(self.collection) is None:
            return HeldBooks({}, set(), {})
        file_versions: dict[str, FileVersion | None] = {}
        held_twice: set[str] = set()
        records: dict[str, BookRecord] = {}
        for key, versions in complete_file_versions(self.store, self.collection).items():
            newest = self._newest_written(key, versions) if len(versions) > 1 else None
            if newest is not None:
                held_twice.add(key)
                records[key] = newest
            elif found := self.store.scroll(self.collection, complete(**{f.BOOK_KEY: key}), limit=1):
                records[key] = BookRecord.from_payload(found[0].payload)
            file_versions[key] = newest.file_version if newest else next(iter(versions), None)
        return HeldBooks(file_versions, held_twice, records)

    def _newest_written(self, book_key: str, versions: list[FileVersion]) -> BookRecord | None:
        """The record of the newest written of a book's versions held whole (none if all went meanwhile)."""
        written = []
        for version in versions:
            where = complete(**{f.BOOK_KEY: book_key, f.SOURCE: version.to_stored(book_key)})
            written += [BookRecord.from_payload(r.payload) for r in self.store.scroll(self.collection, where, limit=1)]
        return max(written, key=lambda book: book.version, default=None)

    def keep_newest(self, book_key: str) -> int:
        """Drop every version of the book but the newest held whole now (read again: an ingest may have written a
        newer one since `held_books`); how many points went. Under the book's claim: an ingest's batches written and
        not yet visible are another version too."""
        newest = self._newest_written(book_key, book_file_versions(self.store, self.collection, book_key))
        if newest is None:
            return 0
        dropped = self.store.delete(self.collection, Filter(must={f.BOOK_KEY: book_key},
                                                            must_not={f.VERSION: newest.version}))
        if dropped:
            log.warning("'%s' was held whole in more than one version in '%s' (a write stopped midway): the older "
                        "versions' %d points dropped", newest.title, self.collection, dropped)
        return dropped

    def remove(self, book_key: str, title: str, author: str) -> RemovedBook:
        removed = self.store.delete(self.collection, self._book(book_key))
        return RemovedBook(book_key, title, author, removed)
