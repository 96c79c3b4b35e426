"""The fourteen MCP tools. Each validates its parameters (the signature is the schema),
makes one call to the service that owns the work, and shapes the result in one line.
No business logic lives here: defaults and limits are the contract's, the work is the services'.

Failures all leave through `GatewayTool.run`, in the contract's error shape with isError set:
bad arguments (naming the parameter and what it accepts), domain errors from the services
(their messages, which say what to do), and anything else (a generic message; the log has it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from google.protobuf.descriptor import Descriptor
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import ConfigDict, Field, ValidationError

from alexandria.contract import (
    BATCH_LIMIT,
    BOOK_SEARCH_LIMIT,
    CHUNK_THRESHOLD,
    MAX_CHUNK_SIZE,
    MIN_CHUNK_SIZE,
    PREVIEW_LIMIT,
    QUERY_LIMIT,
    QUERY_THRESHOLD,
)
from alexandria.enums import enum_number
from alexandria.errors import AlexandriaError, InvalidArgument
from alexandria.v1 import catalog_pb2, common_pb2, ingest_pb2, query_pb2
from gateway.backends import Backends
from gateway.progress import stream_result
from gateway.results import (
    INTERNAL_ERROR_MESSAGE,
    composite_schema,
    contract_dict,
    error_result,
    message_result,
    result_schema,
    tool_result,
)
from gateway.shutdown import ToolCalls

log = logging.getLogger(__name__)

Scope = Literal["read", "ingest"]

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
REMOVES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)

# How much of a rejected value an error message echoes back.
_ECHO_CHARS = 80


class GatewayTool(Tool):
    """An MCP tool that knows its auth scope and backing service, and fails in the contract's shape."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    scope: Scope = "ingest"  # fail closed: a tool that forgot its scope needs the stronger one
    service: str = ""
    max_arg_chars: int = 4096
    calls: ToolCalls = Field(default_factory=lambda: ToolCalls(0.0), exclude=True)

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        """Check the arguments, run the tool, and turn every failure into the contract's error result."""
        problem = self._argument_problem(arguments)
        if problem is not None:
            log.info("%s rejected its arguments: %s", self.name, problem)
            return error_result(problem)
        try:
            run_tool = super().run
            return await self.calls.run(self.name, lambda: run_tool(arguments, context, convert_result))
        except MCPError:
            raise  # a protocol error, answered as such by the SDK
        except Exception as exc:  # noqa: BLE001 - the SDK wraps what the tool raised; this unwraps it once
            return self._failure(exc.__cause__ or exc)

    def _argument_problem(self, arguments: dict[str, Any]) -> str | None:
        accepted = list(self.parameters.get("properties", {}))
        unknown = sorted(set(arguments) - set(accepted))
        if unknown:
            takes = f"it takes: {', '.join(accepted)}" if accepted else "it takes no parameters"
            return f"Unknown parameter {', '.join(map(repr, unknown))} for {self.name}; {takes}."
        for name, value in arguments.items():
            if _longest_string(value) > self.max_arg_chars:
                return (
                    f"Parameter '{name}' is longer than {self.max_arg_chars} characters, the gateway's limit "
                    "(GATEWAY_MAX_ARG_CHARS); shorten it and call again."
                )
        try:
            self.fn_metadata.validate_arguments(arguments)
        except ValidationError as exc:
            return f"Invalid arguments for {self.name}: {describe_validation_error(exc)}. Fix them and call again."
        return None

    def _failure(self, cause: BaseException) -> CallToolResult:
        if isinstance(cause, AlexandriaError):
            log.info("%s: %s: %s", self.name, type(cause).__name__, cause.message)
            return error_result(cause.message)
        log.error("%s failed unexpectedly", self.name, exc_info=cause)
        return error_result(INTERNAL_ERROR_MESSAGE)


def _longest_string(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return max((_longest_string(item) for item in value), default=0)
    return 0


def describe_validation_error(exc: ValidationError) -> str:
    """Pydantic's errors as one line per parameter: its name, what it accepts, and what it got."""
    problems = []
    for error in exc.errors(include_url=False):
        name = ".".join(str(part) for part in error["loc"]) or "arguments"
        if error["type"] == "missing":
            problems.append(f"'{name}' is required")
        else:
            got = repr(error["input"])
            got = got if len(got) <= _ECHO_CHARS else got[:_ECHO_CHARS] + "..."
            problems.append(f"'{name}': {error['msg']} (got {got})")
    return "; ".join(problems)


@dataclass(frozen=True)
class _ToolSpec:
    fn: Callable[..., Awaitable[CallToolResult]]
    title: str
    scope: Scope
    service: str
    annotations: ToolAnnotations
    output_schema: dict[str, Any]


_SPECS: list[_ToolSpec] = []


def _tool(
    *,
    title: str,
    scope: Scope,
    service: str,
    annotations: ToolAnnotations,
    output: Descriptor | dict[str, Any],
) -> Callable[[Callable[..., Awaitable[CallToolResult]]], Callable[..., Awaitable[CallToolResult]]]:
    """Declare a tool: its title, auth scope, backing service, annotations, and result message (or schema)."""

    def register(fn: Callable[..., Awaitable[CallToolResult]]) -> Callable[..., Awaitable[CallToolResult]]:
        schema = output if isinstance(output, dict) else result_schema(output)
        _SPECS.append(_ToolSpec(fn, title, scope, service, annotations, schema))
        return fn

    return register


def build_tools(max_arg_chars: int, calls: ToolCalls) -> list[GatewayTool]:
    """Fresh tool objects for one MCP server, string arguments capped at `max_arg_chars` characters, each
    call run through `calls` (which ends them when the gateway stops)."""
    tools = []
    for spec in _SPECS:
        tool = GatewayTool.from_function(spec.fn, title=spec.title, annotations=spec.annotations)
        tool.scope = spec.scope
        tool.service = spec.service
        tool.max_arg_chars = max_arg_chars
        tool.calls = calls
        # Results are built from proto descriptors, so is their schema; the SDK publishes it as outputSchema.
        tool.fn_metadata.output_schema = spec.output_schema
        tools.append(tool)
    return tools


def backends(ctx: Context) -> Backends:
    """The service clients the server's lifespan opened."""
    return ctx.request_context.lifespan_context


# Parameters several tools share.
BookId = Annotated[
    int,
    Field(ge=1, description="Calibre book id: the `id` from alexandria_search or alexandria_ingest_preview."),
]
Collection = Annotated[
    str | None, Field(min_length=1, description="Qdrant collection. Default: the server's QDRANT_COLLECTION.")
]
FormatPreference = Annotated[
    Literal["epub", "pdf"], Field(description="Which file to read when the book has several formats.")
]
Threshold = Annotated[
    float,
    CHUNK_THRESHOLD.field(
        "Chunking threshold (cosine similarity): a new chunk starts where neighbouring sentences are "
        "less similar than this. Higher gives more, smaller chunks."
    ),
]
Language = Annotated[
    str | None,
    Field(
        min_length=1,
        description="Only books in this language: an ISO 639 code or the language's English name "
        "('eng', 'en' and 'English' alike).",
    ),
]
MinChunkSize = Annotated[int, MIN_CHUNK_SIZE.field("Minimum words per chunk.")]
MaxChunkSize = Annotated[int, MAX_CHUNK_SIZE.field("Maximum words per chunk (above min_chunk_size).")]
Hierarchical = Annotated[
    bool,
    Field(
        description="Two-level chunking: chapter-level parents plus semantic child chunks. Needed for "
        "alexandria_query's contextual and comprehensive context modes."
    ),
]
FilePath = Annotated[
    str,
    Field(
        min_length=1,
        description="Absolute path of an EPUB, PDF, TXT, Markdown or HTML file in a local-ingest folder "
        "(see alexandria_browse_local).",
    ),
]


def _ingest_options(
    collection: str | None,
    format_preference: str,
    hierarchical: bool,
    threshold: float,
    min_chunk_size: int,
    max_chunk_size: int,
) -> ingest_pb2.IngestOptions:
    return ingest_pb2.IngestOptions(
        collection=collection or "",
        format_preference=format_preference,
        hierarchical=hierarchical,
        chunking=common_pb2.ChunkingParams(
            threshold=threshold, min_chunk_size=min_chunk_size, max_chunk_size=max_chunk_size
        ),
    )


# --- Query tools -------------------------------------------------------------------------------


@_tool(
    title="Search book passages",
    scope="read",
    service="query",
    annotations=READ_ONLY,
    output=query_pb2.SearchResponse.DESCRIPTOR,
)
async def alexandria_query(
    ctx: Context,
    query: Annotated[str, Field(min_length=1, description="The question or topic, in natural language.")],
    limit: Annotated[int, QUERY_LIMIT.field("How many passages to return.")] = QUERY_LIMIT.default,
    threshold: Annotated[
        float,
        QUERY_THRESHOLD.field(
            "Minimum relevance (0-1) a passage needs to be returned. At 0.5 (default) passages that "
            "merely share the subject drop out while the answering passages stay; 0 returns the best "
            "passages whatever their score."
        ),
    ] = QUERY_THRESHOLD.default,
    context_mode: Annotated[
        Literal["precise", "contextual", "comprehensive"],
        Field(
            description="precise: only the matching passages; contextual: plus the surrounding chapter text; "
            "comprehensive: plus the chapter and the neighbouring passages."
        ),
    ] = "precise",
    response_pattern: Annotated[
        str,
        Field(
            min_length=1,
            description="How the answer should be shaped: free, direct (cite sources), synthesis, extraction, "
            "critical, or a pattern id such as tldr or cross_perspective (see the pattern_* prompts).",
        ),
    ] = "free",
    guardian: Annotated[
        str | None,
        Field(
            min_length=1,
            description="Guardian persona whose voice flavours response_instruction (see alexandria_guardians); "
            "'none' for plain Alexandria. Default: the server's default guardian (zec).",
        ),
    ] = None,
    search_mode: Annotated[
        Literal["hybrid", "semantic", "lexical"] | None,
        Field(
            description="hybrid: meaning and exact words; semantic: meaning only; lexical: exact words only. "
            "Default: the mode measured best on this library."
        ),
    ] = None,
    collection: Collection = None,
    book_id: Annotated[int | None, Field(ge=1, description="Search only this Calibre book.")] = None,
    author: Annotated[
        str | None, Field(min_length=1, description="Search only books whose author contains this text.")
    ] = None,
    language: Language = None,
) -> CallToolResult:
    """Search the content of the ingested books by meaning and return the passages that answer a question.

    Use this for any question about what the books say. Results come best first, each with the passage text,
    its score, the book, author and chapter (section_name) and a locator to cite. `score` is the passage's
    relevance to the question in [0, 1] (meaning and exact words together, or a reranker's judgement when
    one is configured); `threshold` drops passages scoring under it, and `matched_lexically` marks a passage
    kept below it because it contains every word of the query (a name, a rare word). When nothing reaches
    the threshold, `notice` says how close the best passage came. Compose the
    answer following `response_instruction` in the result (the guardian persona and the response pattern),
    citing book and chapter. To find books by title or author instead of by content, use alexandria_search.
    """
    request = query_pb2.SearchRequest(
        query=query,
        limit=limit,
        threshold=threshold,
        context_mode=enum_number(query_pb2.ContextMode.DESCRIPTOR, context_mode),
        response_pattern=response_pattern,
        guardian=guardian or "",
        search_mode=enum_number(query_pb2.SearchMode.DESCRIPTOR, search_mode or "unspecified"),
        collection=collection or "",
        book_id=book_id,
        author=author or "",
        language=language or "",
    )
    return message_result(await backends(ctx).query.call("Search", request))


@_tool(
    title="List guardian personas",
    scope="read",
    service="query",
    annotations=READ_ONLY,
    output=query_pb2.ListGuardiansResponse.DESCRIPTOR,
)
async def alexandria_guardians(ctx: Context) -> CallToolResult:
    """List the guardian personas that can flavour Alexandria's answers: id, name, emoji, role and greeting.

    Pass a guardian's id as alexandria_query(guardian="...") to answer in that persona's voice.
    """
    return message_result(await backends(ctx).query.call("ListGuardians", query_pb2.ListGuardiansRequest()))


@_tool(
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


@_tool(
    title="Book details",
    scope="read",
    service="catalog",
    annotations=READ_ONLY,
    output=catalog_pb2.GetBookResponse.DESCRIPTOR,
)
async def alexandria_book(ctx: Context, book_id: BookId) -> CallToolResult:
    """Get the full Calibre metadata of one book: authors, series, ISBN, publisher, date, rating, formats."""
    return message_result(
        await backends(ctx).catalog.call("GetBook", catalog_pb2.GetBookRequest(book_id=book_id))
    )


@_tool(
    title="Library and collection statistics",
    scope="read",
    service="catalog, query",
    annotations=READ_ONLY,
    output=composite_schema(
        {
            "calibre": catalog_pb2.GetLibraryStatsResponse.DESCRIPTOR,
            "qdrant": query_pb2.CollectionStats.DESCRIPTOR,
        }
    ),
)
async def alexandria_stats(ctx: Context, collection: Collection = None) -> CallToolResult:
    """Statistics of the Calibre library (books, authors, formats, languages) and of the searchable collection
    (passages, books ingested, embedding model). A good first call to see what is available.

    If one side is down, its half reports the error and the other half still answers.
    """
    clients = backends(ctx)
    calibre, qdrant = await asyncio.gather(
        clients.catalog.call("GetLibraryStats", catalog_pb2.GetLibraryStatsRequest()),
        clients.query.call(
            "GetCollectionStats", query_pb2.GetCollectionStatsRequest(collection=collection or "")
        ),
        return_exceptions=True,
    )
    halves = {
        "calibre": _stats_half(calibre, {}),
        "qdrant": _stats_half(qdrant, {"connected": False}),
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


# --- Ingest tools (Calibre) --------------------------------------------------------------------


@_tool(
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
        Literal["epub", "pdf", "any"], Field(description="Which format a book must have to be listed.")
    ] = "epub",
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
        format_filter=enum_number(catalog_pb2.FormatFilter.DESCRIPTOR, format_filter),
        limit=limit,
        collection=collection or "",
    )
    return message_result(await backends(ctx).catalog.call("PreviewIngest", request))


@_tool(
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
    format_preference: FormatPreference = "epub",
    hierarchical: Hierarchical = True,
    threshold: Threshold = CHUNK_THRESHOLD.default,
    min_chunk_size: MinChunkSize = MIN_CHUNK_SIZE.default,
    max_chunk_size: MaxChunkSize = MAX_CHUNK_SIZE.default,
) -> CallToolResult:
    """Ingest one Calibre book into the searchable collection: extract its text, split it into semantic
    chunks, embed and store them, so alexandria_query can find its passages. Takes from seconds to minutes;
    progress is reported while it runs. Try parameters first with alexandria_test_chunking.
    """
    options = _ingest_options(
        collection, format_preference, hierarchical, threshold, min_chunk_size, max_chunk_size
    )
    request = ingest_pb2.IngestBookRequest(book_id=book_id, options=options)
    return message_result(await stream_result(ctx, backends(ctx).ingest.stream("IngestBook", request)))


@_tool(
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
    format_preference: FormatPreference = "epub",
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
        options=_ingest_options(
            collection, format_preference, hierarchical, threshold, min_chunk_size, max_chunk_size
        ),
    )
    return message_result(await stream_result(ctx, backends(ctx).ingest.stream("BatchIngest", request)))


@_tool(
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
    format_preference: FormatPreference = "epub",
) -> CallToolResult:
    """Chunk a Calibre book with the given parameters WITHOUT storing anything, and show the resulting chunk
    statistics and sample chunks. Use it to choose parameters before alexandria_ingest.
    """
    request = ingest_pb2.TestChunkingRequest(
        source=ingest_pb2.BookSource(book_id=book_id, format_preference=format_preference),
        chunking=common_pb2.ChunkingParams(
            threshold=threshold, min_chunk_size=min_chunk_size, max_chunk_size=max_chunk_size
        ),
    )
    return message_result(await stream_result(ctx, backends(ctx).ingest.stream("TestChunking", request)))


@_tool(
    title="Compare chunking thresholds",
    scope="read",
    service="ingest",
    annotations=READ_ONLY,
    output=ingest_pb2.CompareChunkingResult.DESCRIPTOR,
)
async def alexandria_compare_chunking(
    ctx: Context,
    book_id: BookId,
    format_preference: FormatPreference = "epub",
    min_chunk_size: MinChunkSize = MIN_CHUNK_SIZE.default,
    max_chunk_size: MaxChunkSize = MAX_CHUNK_SIZE.default,
) -> CallToolResult:
    """Chunk a Calibre book at several thresholds WITHOUT storing anything and compare them: chunk counts and
    sizes, coherence, semantic vs forced breaks with sample breaks, and a recommended threshold.
    """
    request = ingest_pb2.CompareChunkingRequest(
        source=ingest_pb2.BookSource(book_id=book_id, format_preference=format_preference),
        min_chunk_size=min_chunk_size,
        max_chunk_size=max_chunk_size,
    )
    return message_result(await stream_result(ctx, backends(ctx).ingest.stream("CompareChunking", request)))


# --- Ingest tools (local files) ----------------------------------------------------------------


@_tool(
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


@_tool(
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
        options=_ingest_options(collection, "", hierarchical, threshold, min_chunk_size, max_chunk_size),
    )
    return message_result(await stream_result(ctx, backends(ctx).ingest.stream("IngestFile", request)))


@_tool(
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
    request = ingest_pb2.TestChunkingRequest(
        source=ingest_pb2.BookSource(file_path=file_path),
        chunking=common_pb2.ChunkingParams(
            threshold=threshold, min_chunk_size=min_chunk_size, max_chunk_size=max_chunk_size
        ),
    )
    return message_result(await stream_result(ctx, backends(ctx).ingest.stream("TestChunking", request)))


@_tool(
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
    from (give exactly one). Returns the title and how many chunks were removed. Use it to re-ingest a book
    with other chunking parameters. The book's files are not touched.
    """
    if (book_id is None) == (file_path is None):
        raise InvalidArgument("Give exactly one of 'book_id' (a Calibre book) or 'file_path' (a local file).")
    request = ingest_pb2.RemoveBookRequest(collection=collection or "", book_id=book_id, file_path=file_path)
    return message_result(await backends(ctx).ingest.call("RemoveBook", request))
