"""The preview asks the store about all its books at once, and counts only complete ones."""

from __future__ import annotations

from typing import Any

from alexandria.book_formats import FormatPreference
from alexandria.store import CollectionInfo, Filter, schema
from catalog import expected
from services.catalog.calibre_db import read_library
from services.catalog.library import BookQuery
from services.catalog.preview import ingested_book_ids, preview


class FakeBookKeyStore:
    """Just the reads the preview makes, answering as a store holding `book_keys`, complete, would."""

    def __init__(self, book_keys: dict[str, int] | None) -> None:
        self.book_keys = book_keys
        self.facet_calls: list[tuple[str, str, Filter | None]] = []

    def collection_info(self, collection: str) -> CollectionInfo | None:
        if self.book_keys is None:
            return None
        return CollectionInfo(collection, sum(self.book_keys.values()), 384, "green", {})

    def facet_counts(
        self, collection: str, key: str, where: Filter | None = None, limit: int = 100000
    ) -> dict[Any, int]:
        self.facet_calls.append((collection, key, where))
        being_written = where is not None and where.must_not == {schema.COMPLETE: True}
        return {} if being_written else dict(self.book_keys or {})


def test_one_store_read_of_book_keys_for_all_books_of_a_preview() -> None:
    snapshot = read_library(expected.LIBRARIES["fixture"])
    store = FakeBookKeyStore({snapshot.get(2).uuid: 12, snapshot.get(4).uuid: 3})
    entries = preview(snapshot, BookQuery(), FormatPreference.ANY, 20, store, "books")
    assert [e.book.id for e in entries if e.already_ingested] == [2, 4]
    listed = {schema.CALIBRE_ID: [1, 2, 3, 4]}
    assert store.facet_calls == [
        ("books", schema.BOOK_KEY, Filter(must=listed)),
        ("books", schema.BOOK_KEY, Filter(must=listed, must_not={schema.COMPLETE: True})),
    ]


def test_no_store_or_no_collection_means_nothing_is_ingested() -> None:
    books = list(read_library(expected.LIBRARIES["fixture"]).books.values())
    assert ingested_book_ids(None, "books", books) == frozenset()
    missing = FakeBookKeyStore(None)
    assert ingested_book_ids(missing, "books", books) == frozenset()
    assert missing.facet_calls == []
