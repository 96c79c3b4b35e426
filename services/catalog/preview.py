"""alexandria_ingest_preview: the books a search finds, the file ingest would read, and whether each is in.

"Already ingested" is asked of the store, never kept here: a book is in a collection
when the store holds points with its Calibre id and `complete` true (ingest flips
`complete` only when every point of the book is written) under its book key, which for
a Calibre book is its uuid, as ingest writes it. The store counts values of keyword
fields only, so the one query counts book keys among the points of these Calibre ids.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from alexandria.book_formats import BookFormat, FormatPreference
from alexandria.pdf_pages import looks_scanned
from alexandria.store import Store, schema
from alexandria.store.records import complete_books
from services.catalog.library import Book, BookFile, BookQuery, LibrarySnapshot, select_file


@dataclass(frozen=True)
class PreviewEntry:
    book: Book
    file: BookFile | None  # None when no file of the filter's format is on disk
    already_ingested: bool
    scanned: bool = False  # a PDF that only OCR can read


def ingested_book_ids(store: Store | None, collection: str, books: Collection[Book]) -> frozenset[int]:
    """Which of `books` are wholly in `collection`: one facet query for all of them."""
    if store is None or not books or store.collection_info(collection) is None:
        return frozenset()
    book_keys = complete_books(store, collection, **{schema.CALIBRE_ID: [b.id for b in books]})
    return frozenset(b.id for b in books if book_keys.get(b.uuid, 0) > 0)


def preview(
    snapshot: LibrarySnapshot,
    query: BookQuery,
    format_filter: FormatPreference,
    limit: int,
    store: Store | None,
    collection: str,
) -> list[PreviewEntry]:
    """The books matching `query` (at most `limit`), each with its selected file and ingested flag."""
    books = snapshot.search(query, limit)
    ingested = ingested_book_ids(store, collection, books)
    entries = []
    for book in books:
        file = select_file(book, format_filter)
        scanned = file is not None and file.format == BookFormat.PDF and looks_scanned(file.path)
        entries.append(PreviewEntry(book, file, already_ingested=book.id in ingested, scanned=scanned))
    return entries
