"""The ingest service's tools: ingest, batch ingest, the chunking tests, local files and remove."""

from __future__ import annotations

from typing import Annotated

from google.protobuf.message import Message
from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from pydantic import Field

from alexandria.contract import BATCH_LIMIT, CHUNK_THRESHOLD, MAX_CHUNK_SIZE, MIN_CHUNK_SIZE
from alexandria.errors import InvalidArgument
from alexandria.v1 import ingest_pb2
from gateway.backends import backends
from gateway.progress import stream_result
from gateway.results import message_result
from gateway.tools.base import READ_ONLY, REMOVES, WRITES, register_tool
from gateway.tools.params import (
    DEFAULT_FORMAT_PREFERENCE,
    BookId,
    Collection,
    FilePath,
    FormatPreference,
    Hierarchical,
    Language,
    MaxChunkSize,
    MinChunkSize,
    Threshold,
    book_source,
    chunking_params,
    ingest_options,
)

# --- Ingest tools (Calibre) --------------------------------------------------------------------


@register_tool(
    title="Ingest a Calibre book",
    scope="ingest",
    service="ingest",
    annotations=WRITES,
    output=ingest_pb2.IngestResult.DESCRIPTOR,
)
async def alexandria_ingest(
    ctx: Context,
    book_id: BookId,
    collection: Collection = None,
    format_preference: FormatPreference = DEFAULT_FORMAT_PREFERENCE,
    hierarchical: Hierarchical = True,
    threshold: Threshold = CHUNK_THRESHOLD.default,
    min_chunk_size: MinChunkSize = MIN_CHUNK_SIZE.default,
    max_chunk_size: MaxChunkSize = MAX_CHUNK_SIZE.default,
) -> CallToolResult:
    """Ingest one Calibre book into the searchable collection: extract its text, split it into semantic
    chunks, embed and store them, so alexandria_query can find its passages. Takes from seconds to minutes;
    progress is reported while it runs. Try parameters first with alexandria_test_chunking.
    """
    options = ingest_options(
        collection, format_preference, hierarchical, threshold, min_chunk_size, max_chunk_size
    )
    request = ingest_pb2.IngestBookRequest(book_id=book_id, options=options)
    return await _stream_ingest(ctx, "IngestBook", request)


@register_tool(
    title="Ingest several Calibre books",
    scope="ingest",
    service="ingest",
    annotations=WRITES,
    output=ingest_pb2.BatchIngestResult.DESCRIPTOR,
)
async def alexandria_batch_ingest(
    ctx: Context,
    book_ids: Annotated[
        list[Annotated[int, Field(ge=1)]] | None,
        Field(
            max_length=50,
            description="Calibre book ids to ingest. Or select books with author/title/language.",
        ),
    ] = None,
    author: Annotated[
        str | None, Field(min_length=1, description="Select books by author (partial).")
    ] = None,
    title: Annotated[str | None, Field(min_length=1, description="Select books by title (partial).")] = None,
    language: Language = None,
    limit: Annotated[int, BATCH_LIMIT.field("Maximum number of books to ingest.")] = BATCH_LIMIT.default,
    collection: Collection = None,
    format_preference: FormatPreference = DEFAULT_FORMAT_PREFERENCE,
    hierarchical: Hierarchical = True,
    threshold: Threshold = CHUNK_THRESHOLD.default,
    min_chunk_size: MinChunkSize = MIN_CHUNK_SIZE.default,
    max_chunk_size: MaxChunkSize = MAX_CHUNK_SIZE.default,
) -> CallToolResult:
    """Ingest several Calibre books, chosen by id or by author/title/language, one after another. Books
    already in the collection are skipped; a failing book does not stop the batch. Each finished book is
    reported as progress, and the result lists every book's status (success, skipped, failed).
    """
    request = ingest_pb2.BatchIngestRequest(
        book_ids=book_ids or [],
        author=author or "",
        title=title or "",
        language=language or "",
        limit=limit,
        options=ingest_options(
            collection, format_preference, hierarchical, threshold, min_chunk_size, max_chunk_size
        ),
    )
    return await _stream_ingest(ctx, "BatchIngest", request)


@register_tool(
    title="Test chunking parameters",
    scope="read",
    service="ingest",
    annotations=READ_ONLY,
    output=ingest_pb2.TestChunkingResult.DESCRIPTOR,
)
async def alexandria_test_chunking(
    ctx: Context,
    book_id: BookId,
    threshold: Threshold = CHUNK_THRESHOLD.default,
    min_chunk_size: MinChunkSize = MIN_CHUNK_SIZE.default,
    max_chunk_size: MaxChunkSize = MAX_CHUNK_SIZE.default,
    format_preference: FormatPreference = DEFAULT_FORMAT_PREFERENCE,
) -> CallToolResult:
    """Chunk a Calibre book with the given parameters WITHOUT storing anything, and show the resulting chunk
    statistics and sample chunks. Use it to choose parameters before alexandria_ingest.
    """
    source = book_source(book_id, format_preference)
    return await _test_chunking(ctx, source, threshold, min_chunk_size, max_chunk_size)


@register_tool(
    title="Compare chunking thresholds",
    scope="read",
    service="ingest",
    annotations=READ_ONLY,
    output=ingest_pb2.CompareChunkingResult.DESCRIPTOR,
)
async def alexandria_compare_chunking(
    ctx: Context,
    book_id: BookId,
    format_preference: FormatPreference = DEFAULT_FORMAT_PREFERENCE,
    min_chunk_size: MinChunkSize = MIN_CHUNK_SIZE.default,
    max_chunk_size: MaxChunkSize = MAX_CHUNK_SIZE.default,
) -> CallToolResult:
    """Chunk a Calibre book at several thresholds WITHOUT storing anything and compare them: chunk counts and
    sizes, coherence, semantic vs forced breaks with sample breaks, and a recommended threshold.
    """
    request = ingest_pb2.CompareChunkingRequest(
        source=book_source(book_id, format_preference),
        min_chunk_size=min_chunk_size,
        max_chunk_size=max_chunk_size,
    )
    return await _stream_ingest(ctx, "CompareChunking", request)


# --- Ingest tools (local files) ----------------------------------------------------------------


@register_tool(
    title="Browse local files",
    scope="read",
    service="ingest",
    annotations=READ_ONLY,
    output=ingest_pb2.BrowseLocalResponse.DESCRIPTOR,
)
async def alexandria_browse_local(
    ctx: Context,
    path: Annotated[
        str | None,
        Field(min_length=1, description="Directory to list. Default: the server's LOCAL_INGEST_PATH."),
    ] = None,
    recursive: Annotated[bool, Field(description="Also list files in subdirectories.")] = False,
) -> CallToolResult:
    """List book files (EPUB, PDF, TXT, Markdown, HTML) in a local folder that can be ingested without
    Calibre, with their size, format and full path for alexandria_ingest_file.
    """
    request = ingest_pb2.BrowseLocalRequest(path=path or "", recursive=recursive)
    return message_result(await backends(ctx).ingest.call("BrowseLocal", request))


@register_tool(
    title="Ingest a local file",
    scope="ingest",
    service="ingest",
    annotations=WRITES,
    output=ingest_pb2.IngestResult.DESCRIPTOR,
)
async def alexandria_ingest_file(
    ctx: Context,
    file_path: FilePath,
    title: Annotated[
        str | None, Field(min_length=1, description="Book title; required when the file's metadata has none.")
    ] = None,
    author: Annotated[
        str | None,
        Field(min_length=1, description="Book author; required when the file's metadata has none."),
    ] = None,
    language: Annotated[
        str | None,
        Field(min_length=1, description="The book's language, instead of the file's metadata: an ISO 639 code or name."),
    ] = None,
    collection: Collection = None,
    hierarchical: Hierarchical = True,
    threshold: Threshold = CHUNK_THRESHOLD.default,
    min_chunk_size: MinChunkSize = MIN_CHUNK_SIZE.default,
    max_chunk_size: MaxChunkSize = MAX_CHUNK_SIZE.default,
) -> CallToolResult:
    """Ingest a local book file (not from Calibre) into the searchable collection. If the file's metadata
    lacks a title or author, nothing is written and the result (needs_metadata) says which fields to pass:
    call again with title and author.
    """
    request = ingest_pb2.IngestFileRequest(
        file_path=file_path,
        title=title or "",
        author=author or "",
        language=language or "",
        options=ingest_options(collection, None, hierarchical, threshold, min_chunk_size, max_chunk_size),
    )
    return await _stream_ingest(ctx, "IngestFile", request)


@register_tool(
    title="Test chunking on a local file",
    scope="read",
    service="ingest",
    annotations=READ_ONLY,
    output=ingest_pb2.TestChunkingResult.DESCRIPTOR,
)
async def alexandria_test_chunking_file(
    ctx: Context,
    file_path: FilePath,
    threshold: Threshold = CHUNK_THRESHOLD.default,
    min_chunk_size: MinChunkSize = MIN_CHUNK_SIZE.default,
    max_chunk_size: MaxChunkSize = MAX_CHUNK_SIZE.default,
) -> CallToolResult:
    """Chunk a local book file with the given parameters WITHOUT storing anything, and show chunk statistics
    and sample chunks. Use it to choose parameters before alexandria_ingest_file.
    """
    source = ingest_pb2.BookSource(file_path=file_path)
    return await _test_chunking(ctx, source, threshold, min_chunk_size, max_chunk_size)


@register_tool(
    title="Remove a book from a collection",
    scope="ingest",
    service="ingest",
    annotations=REMOVES,
    output=ingest_pb2.RemoveBookResponse.DESCRIPTOR,
)
async def alexandria_remove(
    ctx: Context,
    book_id: Annotated[int | None, Field(ge=1, description="Calibre id of the book to remove.")] = None,
    file_path: Annotated[
        str | None, Field(min_length=1, description="Path of the local file the book was ingested from.")
    ] = None,
    collection: Collection = None,
) -> CallToolResult:
    """Remove one book's passages from a collection, by Calibre book_id or by the file_path it was ingested
    from (give exactly one). Returns the title and chunks_removed: the points removed, its passages and its
    chapter-level parents together (an ingest's chunks + parent_chunks). Use it to re-ingest a book
    with other chunking parameters. The book's files are not touched.
    """
    if (book_id is None) == (file_path is None):
        raise InvalidArgument("Give exactly one of 'book_id' (a Calibre book) or 'file_path' (a local file).")
    request = ingest_pb2.RemoveBookRequest(collection=collection or "", book_id=book_id, file_path=file_path)
    return message_result(await backends(ctx).ingest.call("RemoveBook", request))


async def _test_chunking(
    ctx: Context, source: ingest_pb2.BookSource, threshold: float, min_chunk_size: int, max_chunk_size: int
) -> CallToolResult:
    """The chunking test of a Calibre book or a local file: the same call, only the source differs."""
    request = ingest_pb2.TestChunkingRequest(
        source=source, chunking=chunking_params(threshold, min_chunk_size, max_chunk_size)
    )
    return await _stream_ingest(ctx, "TestChunking", request)


async def _stream_ingest(ctx: Context, method: str, request: Message) -> CallToolResult:
    """Call a streaming ingest method, relaying its progress to the client, and shape its final result."""
    return message_result(await stream_result(ctx, backends(ctx).ingest.stream(method, request)))
