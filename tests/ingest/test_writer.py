"""The writer on both store backends (the `store` fixture): a book is visible whole or not at all, and a new
version replaces the old one without a search ever seeing the book twice."""

from __future__ import annotations

import numpy as np
import pytest

from alexandria.book_identity import FileVersion
from alexandria.errors import AlreadyExists, FailedPrecondition, NotFound
from alexandria.store import SENTENCES, WINDOWS, Filter, Hit, Store, StoredPoint
from alexandria.store import schema as f
from alexandria.store.lexical import encode_document
from alexandria.store.records import (
    BookRecord,
    ChunkRecord,
    CollectionModel,
    complete,
    complete_file_versions,
)
from services.ingest.writer import BookWriter, point_id
from services.query.search import newest_versions

KEY = "uuid-emma"
DIMENSION = 4


def version_points(version: int, texts: list[str]) -> list[StoredPoint]:
    book = BookRecord(book_key=KEY, title="Emma", author="Jane Austen", model="m", dimension=DIMENSION,
                      version=version, file_version=FileVersion.parse(f"EPUB:{version}:1:hash{version}"))
    points = []
    for n, text in enumerate(texts):
        record = ChunkRecord(book=book, level=f.Level.FLAT, text=text, position=n)
        vector = np.eye(DIMENSION, dtype=np.float32)[n % DIMENSION]
        points.append(StoredPoint(point_id(KEY, version, "flat", n), vector, encode_document(text), record.to_payload()))
    return points


def test_a_new_version_replaces_the_old_one_whole(store: Store) -> None:
    writer = BookWriter(store, "books")
    writer.ensure_collection(DIMENSION, "m")
    writer.write(KEY, 1, version_points(1, ["old one", "old two", "old three"]))
    assert store.count("books", complete()) == 3
    writer.write(KEY, 2, version_points(2, ["new one", "new two"]))
    left = store.scroll("books", Filter(must={f.BOOK_KEY: KEY}), limit=10)
    assert sorted(ChunkRecord.from_payload(r.payload).text for r in left) == ["new one", "new two"]
    assert all(ChunkRecord.from_payload(r.payload).book.complete for r in left)
    assert complete_file_versions(store, "books") == {KEY: [FileVersion.parse("EPUB:2:1:hash2")]}
    writer.restamp(KEY, FileVersion.parse("EPUB:2:5:hash2"))
    assert complete_file_versions(store, "books") == {KEY: [FileVersion.parse("EPUB:2:5:hash2")]}


def test_while_two_versions_are_visible_a_search_keeps_the_newest_of_each_book() -> None:
    def hit(name: str, key: str, version: int) -> Hit:
        return Hit(name, 1.0, {f.BOOK_KEY: key, f.VERSION: version, f.TEXT: name})

    hits = [hit("old", KEY, 1), hit("new", KEY, 2), hit("other", "uuid-persuasion", 1), hit("new too", KEY, 2)]
    assert [h.id for h in newest_versions(hits)] == ["new", "other", "new too"]


def test_the_sync_reads_and_removes_books_through_the_writer(store: Store) -> None:
    writer = BookWriter(store, "books")
    assert writer.held_books().file_versions == {}  # no collection yet
    writer.refuse_if_ingested(KEY, "Emma")
    with pytest.raises(NotFound, match="'books' does not exist"):
        writer.find_book_key(Filter(must={f.BOOK_KEY: KEY}), KEY)

    writer.ensure_collection(DIMENSION, "m")
    writer.ensure_collection(DIMENSION, "m")  # the collection of this model: kept
    with pytest.raises(FailedPrecondition, match="holds vectors of m"):
        writer.ensure_collection(DIMENSION, "other")
    writer.write(KEY, 1, version_points(1, ["one", "two"]))

    assert writer.held_books().file_versions == {KEY: FileVersion.parse("EPUB:1:1:hash1")}
    with pytest.raises(AlreadyExists, match="'Emma' is in collection 'books'"):
        writer.refuse_if_ingested(KEY, "Emma")
    assert writer.find_book_key(Filter(must={f.BOOK_KEY: KEY}), KEY) == (KEY, "Emma", "Jane Austen")
    with pytest.raises(NotFound, match="No ingested book matches uuid-other"):
        writer.find_book_key(Filter(must={f.BOOK_KEY: "uuid-other"}), "uuid-other")

    assert writer.remove(KEY, "Emma", "Jane Austen").points == 2
    assert writer.held_books().file_versions == {}
    writer.refuse_if_ingested(KEY, "Emma")


def test_a_collection_made_before_passage_windows_is_searched_by_sentences_and_takes_no_new_books(
    store: Store,
) -> None:
    store.ensure_collection("old", DIMENSION, {f.MODEL: "m", f.DIMENSION: DIMENSION})  # records no passage vectors
    info = store.collection_info("old")
    assert info is not None and CollectionModel.of(info).passage_vectors == SENTENCES
    with pytest.raises(FailedPrecondition, match="alexandria reindex --collection old"):
        BookWriter(store, "old").ensure_collection(DIMENSION, "m")
    BookWriter(store, "new").ensure_collection(DIMENSION, "m")
    made = store.collection_info("new")
    assert made is not None and CollectionModel.of(made).passage_vectors == WINDOWS


def test_what_a_killed_ingest_left_is_gone_once_the_book_is_written(store: Store) -> None:
    writer = BookWriter(store, "books")
    writer.ensure_collection(DIMENSION, "m")
    store.upsert("books", version_points(1, ["half", "of a", "book"]))  # written, never made visible: killed
    assert store.count("books") == 3 and store.count("books", complete()) == 0
    writer.write(KEY, 2, version_points(2, ["the whole", "book"]))
    left = store.scroll("books", None, limit=10)  # every point, complete or not
    assert sorted(ChunkRecord.from_payload(r.payload).text for r in left) == ["book", "the whole"]
    assert {ChunkRecord.from_payload(r.payload).book.version for r in left} == {2}


def test_a_reindex_swap_amid_a_write_leaves_no_part_of_the_book_in_the_new_collection(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reindex rebuilt "books" as "books-rebuilt" and moves the name to it while this book's batches are written.
    writer = BookWriter(store, "books")
    writer.ensure_collection(DIMENSION, "m")
    BookWriter(store, "books-rebuilt").ensure_collection(DIMENSION, "m")
    monkeypatch.setattr("services.ingest.writer.UPSERT_BATCH", 2)
    upsert = store.upsert
    batches: list[str] = []

    def swapped_after_the_first(collection: str, points: list[StoredPoint]) -> None:
        batches.append(collection)
        upsert(collection, points)
        if len(batches) == 1:
            store.replace_collection("books", "books-rebuilt")

    monkeypatch.setattr(store, "upsert", swapped_after_the_first)
    with pytest.raises(FailedPrecondition, match="'books' was replaced by its reindex while this book was written"):
        writer.write(KEY, 1, version_points(1, ["one", "two", "three", "four"]))
    assert batches == ["books", "books"]
    assert store.count("books") == 0, "the name now stands for the rebuilt collection, which has no part of the book"


@pytest.mark.parametrize("first_reindex", [True, False])
def test_a_reindex_swap_as_a_write_makes_its_book_visible_leaves_the_rebuilt_copy_of_the_book_whole(
    store: Store, monkeypatch: pytest.MonkeyPatch, first_reindex: bool
) -> None:
    # "books" is a collection (its first reindex) or names "books-v1"; a reindex rebuilt it as "books-v2", this book
    # included, and moves the name just as the write below has written its points and makes them visible.
    for name in ("books", "books-v2") if first_reindex else ("books-v1", "books-v2"):
        BookWriter(store, name).ensure_collection(DIMENSION, "m")
    if not first_reindex:
        store.replace_collection("books", "books-v1")
    BookWriter(store, "books").write(KEY, 1, version_points(1, ["old one", "old two"]))
    BookWriter(store, "books-v2").write(KEY, 2, version_points(2, ["rebuilt one", "rebuilt two"]))
    set_payload = store.set_payload

    def swapped_first(collection: str, where: Filter, payload: dict[str, object]) -> None:
        store.replace_collection("books", "books-v2")
        set_payload(collection, where, payload)

    monkeypatch.setattr(store, "set_payload", swapped_first)
    with pytest.raises(FailedPrecondition, match="'books' was replaced by its reindex while this book was written"):
        BookWriter(store, "books").write(KEY, 3, version_points(3, ["new one", "new two", "new three"]))
    left = store.scroll("books", complete(**{f.BOOK_KEY: KEY}), limit=10)
    assert sorted(ChunkRecord.from_payload(r.payload).text for r in left) == ["rebuilt one", "rebuilt two"]


def test_a_book_left_in_two_versions_by_a_write_stopped_midway_is_read_as_its_newest_and_kept_so(
    store: Store,
) -> None:
    writer = BookWriter(store, "books")
    writer.ensure_collection(DIMENSION, "m")
    writer.write(KEY, 1, version_points(1, ["old one", "old two", "old three"]))
    # The new version written and made visible; the process stopped before the old one was dropped.
    store.upsert("books", version_points(2, ["new one", "new two"]))
    store.set_payload("books", Filter(must={f.BOOK_KEY: KEY, f.VERSION: 2}), {f.COMPLETE: True})
    assert store.count("books", complete()) == 5

    held = writer.held_books()
    assert held.file_versions == {KEY: FileVersion.parse("EPUB:2:1:hash2")}
    assert held.held_twice == {KEY}
    assert store.count("books", complete()) == 5, "reading drops nothing (a dry run reads it too)"
    # A newer version written whole since the read (an ingest of the book, under its claim) is the one kept.
    writer.write(KEY, 3, version_points(3, ["newest"]))
    assert writer.keep_newest(KEY) == 0 and store.count("books", complete()) == 1
    store.upsert("books", version_points(2, ["new one", "new two"]))
    store.set_payload("books", Filter(must={f.BOOK_KEY: KEY, f.VERSION: 2}), {f.COMPLETE: True})
    assert writer.keep_newest(KEY) == 2
    left = store.scroll("books", None, limit=10)
    assert sorted(ChunkRecord.from_payload(r.payload).text for r in left) == ["newest"]
    assert writer.held_books().held_twice == set()
