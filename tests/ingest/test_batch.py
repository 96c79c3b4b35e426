"""A batch goes on whatever happens to one of its books, and its progress only moves forward."""

from __future__ import annotations

import pytest

from alexandria.contract import BATCH_LIMIT
from alexandria.errors import AlreadyExists, InvalidArgument, NotFound
from services.ingest.batch import (
    BatchBook,
    BatchSelection,
    BatchStatus,
    book_fraction,
    ingest_batch,
    select_books,
    summary,
)


async def test_each_book_gets_a_row_and_a_failure_never_stops_the_batch() -> None:
    books = [BatchBook(1, "book 1"), BatchBook(2, "book 2"), BatchBook(3, "book 3"), BatchBook(4, "book 4")]
    progress: list[tuple[int, int, str]] = []
    heard: list[int] = []

    async def resolve(book: BatchBook) -> tuple[BatchBook, int]:
        if book.id == 3:
            raise NotFound("No book with id 3 in the Calibre library.")
        return BatchBook(book.id, f"Title {book.id}", "An Author"), book.id

    async def ingest(book_id: int, report) -> int:
        report("embed sentences", 1, 2, "half")
        if book_id == 2:
            raise AlreadyExists("Book already ingested: 'Title 2'.")
        if book_id == 4:
            raise RuntimeError("a bug")
        return 10 * book_id

    def report(stage: str, done: int, total: int, message: str = "") -> None:
        progress.append((done, total, message))

    rows = await ingest_batch(books, resolve, ingest, report, lambda row: heard.append(row.book.id))
    assert [(r.book.title, r.status, r.chunks) for r in rows] == [
        ("Title 1", BatchStatus.SUCCESS, 10), ("Title 2", BatchStatus.SKIPPED, 0),
        ("book 3", BatchStatus.FAILED, 0), ("Title 4", BatchStatus.FAILED, 0),
    ]
    assert "id 3" in rows[2].error and rows[3].error == "Internal error; the ingest service log has details."
    assert heard == [1, 2, 3, 4]
    assert [done for done, _, _ in progress] == sorted(done for done, _, _ in progress)
    # Counted in books, the book under way's own progress said in the message.
    assert progress[0] == (0, 4, "0/4 books done; book 1: 28%, half")
    assert progress[-1] == (4, 4, "4/4 books done; Title 4: failed")
    assert summary(rows) == "📚 Batch ingest complete: 1/4 succeeded, 1 skipped, 2 failed"


def test_a_books_stages_fill_its_share_in_order() -> None:
    stages = [("extract", 1, 1), ("embed sentences", 5, 10), ("embed sentences", 10, 10), ("embed parents", 2, 2),
              ("write", 0, 9), ("write", 9, 9)]
    fractions = [round(book_fraction(*stage), 9) for stage in stages]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0


async def test_every_id_given_is_selected_up_to_the_contracts_bound_and_more_are_refused() -> None:
    eleven = tuple(range(1, 12))
    selected = await select_books(BatchSelection(book_ids=eleven), catalog=None)  # ids need no catalog
    assert [book.id for book in selected] == list(eleven)
    fifty = tuple(range(1, BATCH_LIMIT.high + 1))
    assert len(await select_books(BatchSelection(book_ids=fifty), catalog=None)) == BATCH_LIMIT.high
    with pytest.raises(InvalidArgument, match=f"at most {BATCH_LIMIT.high} book ids, got 51"):
        await select_books(BatchSelection(book_ids=(*fifty, 51)), catalog=None)


async def test_ids_with_a_search_are_refused_rather_than_the_search_ignored() -> None:
    with pytest.raises(InvalidArgument, match="Give book_ids or author / language to search by, not both"):
        await select_books(BatchSelection(book_ids=(5, 6), author="Austen", language="en"), catalog=None)
