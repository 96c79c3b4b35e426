"""Batch ingest: the books a batch covers, and each ingested in turn whatever happens to the others.

Progress of a batch only moves forward: each book's stages (extract, embed, write) are weighted into
its share of the batch.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from alexandria.clients import ServiceClient
from alexandria.contract import BATCH_LIMIT
from alexandria.errors import AlexandriaError, AlreadyExists, InvalidArgument
from alexandria.v1 import catalog_pb2
from services.ingest.progress import Report

log = logging.getLogger(__name__)

# How much of one book's ingest each stage stands for: (start, weight) within the book's share.
STAGE_WEIGHTS = {"extract": (0.0, 0.05), "ocr": (0.0, 0.05), "embed sentences": (0.05, 0.45),
                 "embed windows": (0.5, 0.4), "embed parents": (0.9, 0.05), "write": (0.95, 0.05)}
INTERNAL_FAILURE = "Internal error; the ingest service log has details."


def book_fraction(stage: str, done: int, total: int) -> float:
    """How far one book's ingest is, from 0 to 1, at `done` of `total` in `stage`."""
    start, weight = STAGE_WEIGHTS.get(stage, (0.0, 0.0))
    return start + weight * (done / total if total else 1.0)


@dataclass(frozen=True)
class BatchBook:
    id: int
    title: str
    author: str = ""


class BatchStatus(StrEnum):
    SUCCESS = "success"
    SKIPPED = "skipped"  # already in the collection
    FAILED = "failed"


@dataclass(frozen=True)
class BatchRow:
    book: BatchBook
    status: BatchStatus
    chunks: int = 0
    error: str | None = None


@dataclass(frozen=True)
class BatchSelection:
    """Which books: these ids (every one of them), else a catalog search by author, title and language for
    at most `limit` books."""

    book_ids: tuple[int, ...] = ()
    author: str = ""
    title: str = ""
    language: str = ""
    limit: int = 0  # 0: the contract's default


async def select_books(selection: BatchSelection, catalog: ServiceClient) -> list[BatchBook]:
    """The books of a batch. Ids given are all ingested, never cut to `limit` (a caller who named eleven
    books wants eleven); more than the contract's bound are refused, naming it."""
    if selection.book_ids:
        if searched := [name for name in ("author", "title", "language") if getattr(selection, name)]:
            raise InvalidArgument(f"Give book_ids or {' / '.join(searched)} to search by, not both: the ids are "
                                  "ingested as they are, and the search would be ignored.")
        book_ids = list(dict.fromkeys(selection.book_ids))
        if len(book_ids) > BATCH_LIMIT.high:
            raise InvalidArgument(f"A batch takes at most {BATCH_LIMIT.high} book ids, got {len(book_ids)}; "
                                  "split them into several batches.")
        return [BatchBook(book_id, f"book {book_id}") for book_id in book_ids]
    limit = BATCH_LIMIT.clamp(selection.limit)
    if not (selection.author or selection.title or selection.language):
        raise InvalidArgument("Say which books to ingest: book_ids, or an author, title or language to search by.")
    found = await catalog.call("SearchBooks", catalog_pb2.SearchBooksRequest(
        author=selection.author, title=selection.title, language=selection.language, limit=limit))
    return [BatchBook(b.id, b.title, b.author) for b in found.books]


S = TypeVar("S")
# The book as the library names it, and its source to ingest (resolving may fail, like ingesting).
Resolve = Callable[[BatchBook], Awaitable[tuple[BatchBook, S]]]
# Ingest a resolved book, reporting its progress; returns its chunk count.
Ingest = Callable[[S, Report], Awaitable[int]]


async def ingest_batch(books: list[BatchBook], resolve: Resolve[S], ingest: Ingest[S], report: Report,
                       on_row: Callable[[BatchRow], None], stage: str = "batch",
                       fatal: tuple[type[AlexandriaError], ...] = ()) -> list[BatchRow]:
    """Each book in turn; one that fails is recorded as failed (or skipped, when already in) and the batch
    goes on, except on a `fatal` error, which ends it. `on_row` hears of each book as soon as it is done;
    progress is reported as `stage`, counted in books, the book under way's own progress in the message."""
    rows = []
    for n, book in enumerate(books):
        def book_report(step: str, done: int, total: int, message: str = "", n: int = n, title: str = book.title) -> None:
            share = round(100 * book_fraction(step, done, total))
            report(stage, n, len(books), f"{n}/{len(books)} books done; {title}: {share}%, {message}")

        row = await _one(book, resolve, ingest, book_report, fatal)
        rows.append(row)
        on_row(row)
        report(stage, n + 1, len(books), f"{n + 1}/{len(books)} books done; {row.book.title}: {row.status}")
    return rows


async def _one(book: BatchBook, resolve: Resolve[S], ingest: Ingest[S], report: Report,
               fatal: tuple[type[AlexandriaError], ...]) -> BatchRow:
    named = book
    try:
        named, source = await resolve(book)
        chunks = await ingest(source, report)
    except fatal:
        raise
    except AlreadyExists as exc:
        return BatchRow(named, BatchStatus.SKIPPED, error=exc.message)
    except AlexandriaError as exc:
        return BatchRow(named, BatchStatus.FAILED, error=exc.message)
    except Exception:  # one bad book never stops the batch; the log has the details
        log.exception("batch ingest of book %d failed", book.id)
        return BatchRow(named, BatchStatus.FAILED, error=INTERNAL_FAILURE)
    return BatchRow(named, BatchStatus.SUCCESS, chunks=chunks)


def count(rows: list[BatchRow]) -> dict[BatchStatus, int]:
    return {status: sum(1 for row in rows if row.status == status) for status in BatchStatus}


def summary(rows: list[BatchRow]) -> str:
    counts = count(rows)
    return (f"📚 Batch ingest complete: {counts[BatchStatus.SUCCESS]}/{len(rows)} succeeded, "
            f"{counts[BatchStatus.SKIPPED]} skipped, {counts[BatchStatus.FAILED]} failed")
