"""The catalog's tools: search, book, stats (with the query service's half) and the ingest preview."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from pydantic import Field

from alexandria import book_formats
from alexandria.contract import BOOK_SEARCH_LIMIT, PREVIEW_LIMIT
from alexandria.errors import AlexandriaError
from alexandria.v1 import catalog_pb2, ingest_pb2, query_pb2
from gateway.backends import backends
from gateway.results import composite_schema, contract_dict, error_result, message_result, tool_result
from gateway.tools.base import READ_ONLY, register_tool
from gateway.tools.params import BookId, Collection, Language


@register_tool(
    title="Find books by metadata",
    scope="read",
    service="catalog",
    annotations=READ_ONLY,
    output=catalog_pb2.SearchBooksResponse.DESCRIPTOR,
)
async def alexandria_search(
    ctx: Context,
    author: Annotated[
        str | None, Field(min_length=1, description="Author name, partial, case-insensitive.")
    ] = None,
    title: Annotated[
        str | None, Field(min_length=1, description="Book title, partial, case-insensitive.")
    ] = None,
    language: Language = None,
    tags: Annotated[
        str | None,
        Field(description="Comma-separated tags; books must have all of them. E.g. 'philosophy, ethics'."),
    ] = None,
    limit: Annotated[int, BOOK_SEARCH_LIMIT.field("Maximum number of books.")] = BOOK_SEARCH_LIMIT.default,
) -> CallToolResult:
    """Find books in the Calibre library by author, title, language or tags (metadata, not content).

    Returns each book's id, title, author, language, tags, series and formats. Use the id with alexandria_book,
    alexandria_ingest or alexandria_query(book_id=...). To search what books say, use alexandria_query.
    """
    request = catalog_pb2.SearchBooksRequest(
        author=author or "",
        title=title or "",
        language=language or "",
        tags=[tag.strip() for tag in (tags or "").split(",") if tag.strip()],
        limit=limit,
    )
    return message_result(await backends(ctx).catalog.call("SearchBooks", request))


@register_tool(
    title="Book details",
    scope="read",
    service="catalog",
    annotations=READ_ONLY,
    output=catalog_pb2.GetBookResponse.DESCRIPTOR,
)
async def alexandria_book(ctx: Context, book_id: BookId) -> CallToolResult:
    """Get the full Calibre metadata of one book: authors, series, ISBN, publisher, date, rating, formats, and how
    many highlights the reader made in Calibre's viewer (`highlights`)."""
    return message_result(
        await backends(ctx).catalog.call("GetBook", catalog_pb2.GetBookRequest(book_id=book_id))
    )


@register_tool(
    title="Library and collection statistics",
    scope="read",
    service="catalog, query, ingest",
    annotations=READ_ONLY,
    output=composite_schema(
        {
            "calibre": catalog_pb2.GetLibraryStatsResponse.DESCRIPTOR,
            "qdrant": query_pb2.CollectionStats.DESCRIPTOR,
            "auto_sync": ingest_pb2.AutoSyncStatus.DESCRIPTOR,
        }
    ),
)
async def alexandria_stats(ctx: Context, collection: Collection = None) -> CallToolResult:
    """Statistics of the Calibre library (books, authors, formats, languages) and of the searchable collection
    (passages, books ingested, embedding model; `language_note` says when many books are in languages that model
    was not trained on, so their searches work poorly (read again at most once a minute); `model_note` when the running model did not make the
    collection; `search_note` when its size changed how its searches walk the index), and the automatic sync's state (`auto_sync`: whether a sync runs now (`running`, its `progress`
    counted in books) and whether another is `queued` behind it or `pending`; the last few syncs with what each did
    (`recent_runs`, newest first), the last that changed anything (`last_change`), and how many ran since the stack
    started (`runs`)). A good first call to see what is available.

    If one side is down, its half reports the error and the other half still answers.
    """
    clients = backends(ctx)
    calibre, qdrant, auto_sync = await asyncio.gather(
        clients.catalog.call("GetLibraryStats", catalog_pb2.GetLibraryStatsRequest()),
        clients.query.call(
            "GetCollectionStats", query_pb2.GetCollectionStatsRequest(collection=collection or "")
        ),
        clients.ingest.call("GetAutoSyncStatus", ingest_pb2.GetAutoSyncStatusRequest()),
        return_exceptions=True,
    )
    halves = {
        "calibre": _stats_half(calibre, {}),
        "qdrant": _stats_half(qdrant, {"connected": False}),
        "auto_sync": _stats_half(auto_sync, {}),
    }
    if isinstance(calibre, BaseException) and isinstance(qdrant, BaseException):
        return error_result(
            "Neither the catalog nor the query service answered; check that they are running.", **halves
        )
    return tool_result({**halves, "error": None})


def _stats_half(outcome: Any, when_down: dict[str, Any]) -> dict[str, Any]:
    if isinstance(outcome, AlexandriaError):
        return {**when_down, "error": outcome.message}
    if isinstance(outcome, BaseException):
        raise outcome
    return {**contract_dict(outcome), "error": None}


# --- Ingest preview -----------------------------------------------------------------------------------------


@register_tool(
    title="Preview books to ingest",
    scope="read",
    service="catalog",
    annotations=READ_ONLY,
    output=catalog_pb2.PreviewIngestResponse.DESCRIPTOR,
)
async def alexandria_ingest_preview(
    ctx: Context,
    author: Annotated[str | None, Field(min_length=1, description="Filter by author (partial).")] = None,
    title: Annotated[str | None, Field(min_length=1, description="Filter by title (partial).")] = None,
    language: Language = None,
    format_filter: Annotated[
        Literal[book_formats.FORMAT_FILTER_WORDS], Field(description=(
            "Preferred format: which of a book's files would be read (selected_format), that format when the "
            "book has it, else its best other one; 'any': its best file. Books are listed whatever their formats."))
    ] = book_formats.DEFAULT_PREFERENCE.value,
    limit: Annotated[int, PREVIEW_LIMIT.field("Maximum number of books.")] = PREVIEW_LIMIT.default,
    collection: Collection = None,
) -> CallToolResult:
    """Preview which Calibre books could be ingested: the file that would be read (selected_format, file_path)
    and whether each is already in the collection. Nothing is written; follow with alexandria_ingest or
    alexandria_batch_ingest.
    """
    request = catalog_pb2.PreviewIngestRequest(
        author=author or "",
        title=title or "",
        language=language or "",
        format_filter=book_formats.FormatPreference(format_filter).to_proto(),
        limit=limit,
        collection=collection or "",
    )
    return message_result(await backends(ctx).catalog.call("PreviewIngest", request))
