"""The fourteen tools through the MCP SDK's own client, against fake services on real gRPC channels:
the tool list, parameters -> request fields, results -> contract fields (errors: test_gateway_errors.py;
progress and prompts: test_gateway_progress.py, test_gateway_prompts.py).
"""

from __future__ import annotations

import json
from typing import Any

import gateway_fakes as canned
import pytest
from gateway_fakes import FakeBackend, assert_clean_error
from google.protobuf.message import Message
from mcp import Client

from alexandria.errors import FailedPrecondition
from alexandria.grpc_server import ServiceServer
from alexandria.v1 import catalog_pb2, common_pb2, ingest_pb2, query_pb2
from gateway.app import Gateway

CONTRACT_TOOLS = {
    "alexandria_query",
    "alexandria_guardians",
    "alexandria_search",
    "alexandria_book",
    "alexandria_stats",
    "alexandria_ingest_preview",
    "alexandria_ingest",
    "alexandria_batch_ingest",
    "alexandria_test_chunking",
    "alexandria_compare_chunking",
    "alexandria_browse_local",
    "alexandria_ingest_file",
    "alexandria_test_chunking_file",
    "alexandria_remove",
}
READ_ONLY = CONTRACT_TOOLS - {
    "alexandria_ingest",
    "alexandria_batch_ingest",
    "alexandria_ingest_file",
    "alexandria_remove",
}

# The contract's result fields (seeds/000_0bf38fa05897f75c.txt); nested names list the fields of each item.
INGEST_FIELDS = [
    "success",
    "title",
    "author",
    "language",
    "chunks",
    "hierarchical",
    {"chunking_params": ["threshold", "min_chunk_size", "max_chunk_size"]},
    "file_size_mb",
    "collection",
    "format",
    "progress",
    "steps",
    "error",
]
TEST_CHUNKING_FIELDS = [
    "success",
    "title",
    {"parameters": ["threshold", "min", "max"]},
    {"stats": ["total_chunks", "avg_words", "min_words", "max_words"]},
    {"samples": ["chunk_num", "words", "text"]},
    "error",
]
CONTRACT_FIELDS: dict[str, list[Any]] = {
    "alexandria_query": [
        "query",
        {"results": ["score", "book_title", "author", "section_name", "text"]},
        "result_count",
        "context_mode",
        "response_instruction",
        "guardian",
        "guardian_name",
        "guardian_emoji",
        "parent_chunks",
        "hierarchy_stats",
        "error",
    ],
    "alexandria_guardians": [
        {"guardians": ["id", "name", "emoji", "role", "greeting"]},
        "default",
        "count",
        "error",
    ],
    "alexandria_search": [
        {"books": ["id", "title", "author", "language", "tags", "series", "series_index", "formats"]},
        "count",
        "error",
    ],
    "alexandria_book": [
        {
            "book": [
                "id",
                "title",
                "author",
                "language",
                "tags",
                "series",
                "series_index",
                "isbn",
                "publisher",
                "pubdate",
                "rating",
                "formats",
            ]
        },
        "error",
    ],
    "alexandria_stats": [
        {"calibre": ["total_books", "total_authors", "formats", "languages"]},
        {"qdrant": ["connected", "collection_name", "points_count", "vector_size", "status"]},
        "error",
    ],
    "alexandria_ingest_preview": [
        {"books": ["id", "title", "author", "language", "formats", "selected_format", "file_path"]},
        "count",
        "format_filter",
        "error",
    ],
    "alexandria_ingest": INGEST_FIELDS,
    "alexandria_batch_ingest": [
        "total",
        "succeeded",
        "skipped",
        "failed",
        {"results": ["id", "title", "author", "status", "chunks", "error"]},
        "summary",
        "error",
    ],
    "alexandria_test_chunking": TEST_CHUNKING_FIELDS,
    "alexandria_compare_chunking": [
        "success",
        "title",
        "author",
        "total_sentences",
        "total_words",
        {"similarity_distribution": ["min", "max", "mean", "median"]},
        {
            "comparisons": [
                "threshold",
                "chunks",
                "avg_words",
                "coherence",
                "semantic_breaks",
                "forced_breaks",
                "sample_breaks",
            ]
        },
        "recommendation",
        "recommendation_reason",
    ],
    "alexandria_browse_local": [
        "path",
        {"files": ["name", "size_mb", "format", "full_path"]},
        "count",
        "error",
    ],
    "alexandria_ingest_file": INGEST_FIELDS,
    "alexandria_test_chunking_file": TEST_CHUNKING_FIELDS,
    "alexandria_remove": ["success", "title", "author", "chunks_removed", "collection", "error"],
}

DEFAULT_CHUNKING = common_pb2.ChunkingParams(threshold=0.55, min_chunk_size=200, max_chunk_size=1200)
DEFAULT_OPTIONS = ingest_pb2.IngestOptions(
    format_preference=common_pb2.FORMAT_PREFERENCE_EPUB, hierarchical=True, chunking=DEFAULT_CHUNKING
)

# tool, arguments, the service method it calls, the request it must send.
MAPPINGS: list[tuple[str, dict[str, Any], str, Message]] = [
    (
        "alexandria_query",
        {"query": "lamp"},
        "Search",
        query_pb2.SearchRequest(
            query="lamp",
            limit=5,
            threshold=0.5,
            context_mode=query_pb2.CONTEXT_MODE_PRECISE,
            response_pattern="free",
            search_in=query_pb2.SEARCH_IN_PASSAGES,
        ),
    ),
    (
        "alexandria_query",
        {
            "query": "lamp",
            "limit": 3,
            "threshold": 0.0,
            "context_mode": "comprehensive",
            "response_pattern": "tldr",
            "guardian": "ariadne",
            "search_mode": "lexical",
            "collection": "c2",
            "book_id": 7,
            "author": "Holl",
            "language": "eng",
            "search_in": "both",
        },
        "Search",
        query_pb2.SearchRequest(
            query="lamp",
            limit=3,
            threshold=0.0,
            context_mode=query_pb2.CONTEXT_MODE_COMPREHENSIVE,
            response_pattern="tldr",
            guardian="ariadne",
            search_mode=query_pb2.SEARCH_MODE_LEXICAL,
            collection="c2",
            book_id=7,
            author="Holl",
            language="eng",
            search_in=query_pb2.SEARCH_IN_BOTH,
        ),
    ),
    ("alexandria_guardians", {}, "ListGuardians", query_pb2.ListGuardiansRequest()),
    (
        "alexandria_search",
        {"author": "Holl", "tags": " sea, almanac ,", "limit": 7},
        "SearchBooks",
        catalog_pb2.SearchBooksRequest(author="Holl", tags=["sea", "almanac"], limit=7),
    ),
    ("alexandria_search", {}, "SearchBooks", catalog_pb2.SearchBooksRequest(limit=20)),
    ("alexandria_book", {"book_id": 1}, "GetBook", catalog_pb2.GetBookRequest(book_id=1)),
    (
        "alexandria_stats",
        {"collection": "c2"},
        "GetCollectionStats",
        query_pb2.GetCollectionStatsRequest(collection="c2"),
    ),
    (
        "alexandria_ingest_preview",
        {"title": "Alma", "format_filter": "any", "limit": 5},
        "PreviewIngest",
        catalog_pb2.PreviewIngestRequest(title="Alma", format_filter=common_pb2.FORMAT_PREFERENCE_ANY, limit=5),
    ),
    (
        "alexandria_ingest_preview",
        {},
        "PreviewIngest",
        catalog_pb2.PreviewIngestRequest(format_filter=common_pb2.FORMAT_PREFERENCE_EPUB, limit=20),
    ),
    (
        "alexandria_ingest",
        {
            "book_id": 1,
            "collection": "c2",
            "format_preference": "pdf",
            "hierarchical": False,
            "threshold": 0.6,
            "min_chunk_size": 100,
            "max_chunk_size": 900,
        },
        "IngestBook",
        ingest_pb2.IngestBookRequest(
            book_id=1,
            options=ingest_pb2.IngestOptions(
                collection="c2",
                format_preference=common_pb2.FORMAT_PREFERENCE_PDF,
                hierarchical=False,
                chunking=common_pb2.ChunkingParams(threshold=0.6, min_chunk_size=100, max_chunk_size=900),
            ),
        ),
    ),
    (
        "alexandria_ingest",
        {"book_id": 1},
        "IngestBook",
        ingest_pb2.IngestBookRequest(book_id=1, options=DEFAULT_OPTIONS),
    ),
    (
        "alexandria_batch_ingest",
        {"book_ids": [1, 2, 3], "limit": 3},
        "BatchIngest",
        ingest_pb2.BatchIngestRequest(book_ids=[1, 2, 3], limit=3, options=DEFAULT_OPTIONS),
    ),
    (
        "alexandria_batch_ingest",
        {"author": "Holl", "language": "eng"},
        "BatchIngest",
        ingest_pb2.BatchIngestRequest(author="Holl", language="eng", limit=10, options=DEFAULT_OPTIONS),
    ),
    (
        "alexandria_test_chunking",
        {"book_id": 1, "threshold": 0.7},
        "TestChunking",
        ingest_pb2.TestChunkingRequest(
            source=ingest_pb2.BookSource(book_id=1, format_preference=common_pb2.FORMAT_PREFERENCE_EPUB),
            chunking=common_pb2.ChunkingParams(threshold=0.7, min_chunk_size=200, max_chunk_size=1200),
        ),
    ),
    (
        "alexandria_compare_chunking",
        {"book_id": 1, "format_preference": "pdf"},
        "CompareChunking",
        ingest_pb2.CompareChunkingRequest(
            source=ingest_pb2.BookSource(book_id=1, format_preference=common_pb2.FORMAT_PREFERENCE_PDF),
            min_chunk_size=200,
            max_chunk_size=1200,
        ),
    ),
    (
        "alexandria_browse_local",
        {"path": "/inbox", "recursive": True},
        "BrowseLocal",
        ingest_pb2.BrowseLocalRequest(path="/inbox", recursive=True),
    ),
    ("alexandria_browse_local", {}, "BrowseLocal", ingest_pb2.BrowseLocalRequest()),
    (
        "alexandria_ingest_file",
        {"file_path": "/inbox/book.epub", "title": "T", "author": "A", "language": "eng"},
        "IngestFile",
        ingest_pb2.IngestFileRequest(
            file_path="/inbox/book.epub",
            title="T",
            author="A",
            language="eng",
            options=ingest_pb2.IngestOptions(hierarchical=True, chunking=DEFAULT_CHUNKING),
        ),
    ),
    (
        "alexandria_test_chunking_file",
        {"file_path": "/inbox/book.epub", "max_chunk_size": 800},
        "TestChunking",
        ingest_pb2.TestChunkingRequest(
            source=ingest_pb2.BookSource(file_path="/inbox/book.epub"),
            chunking=common_pb2.ChunkingParams(threshold=0.55, min_chunk_size=200, max_chunk_size=800),
        ),
    ),
    (
        "alexandria_remove",
        {"file_path": "/inbox/book.epub", "collection": "c2"},
        "RemoveBook",
        ingest_pb2.RemoveBookRequest(collection="c2", file_path="/inbox/book.epub"),
    ),
    ("alexandria_remove", {"book_id": 1}, "RemoveBook", ingest_pb2.RemoveBookRequest(book_id=1)),
]


def assert_has_fields(data: dict[str, Any], fields: list[Any], where: str = "result") -> None:
    for spec in fields:
        name, inner = next(iter(spec.items())) if isinstance(spec, dict) else (spec, None)
        assert name in data, f"{where} lacks the contract field {name!r}"
        if inner is not None:
            items = data[name] if isinstance(data[name], list) else [data[name]]
            assert items, f"{where}.{name} is empty, so its fields cannot be checked"
            for item in items:
                assert_has_fields(item, inner, f"{where}.{name}")


def first_call(name: str) -> dict[str, Any]:
    return next(arguments for tool, arguments, _, _ in MAPPINGS if tool == name)


@pytest.mark.asyncio
async def test_tools_list_has_the_fourteen_tools_with_annotations_and_schemas(
    served_gateway: Gateway,
) -> None:
    async with Client(served_gateway.mcp) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == CONTRACT_TOOLS
        for name, tool in tools.items():
            assert tool.description and tool.title, name
            assert tool.annotations is not None and tool.annotations.open_world_hint is False
            assert tool.annotations.read_only_hint is (name in READ_ONLY), name
            for parameter, schema in tool.input_schema.get("properties", {}).items():
                assert schema.get("description"), f"{name}.{parameter} has no description"
            assert tool.output_schema is not None and "error" in tool.output_schema["properties"], name
        assert tools["alexandria_remove"].annotations.destructive_hint is True
        assert tools["alexandria_remove"].annotations.idempotent_hint is True
        assert tools["alexandria_ingest"].annotations.destructive_hint is False
        assert tools["alexandria_query"].input_schema["required"] == ["query"]
        assert tools["alexandria_query"].input_schema["properties"]["context_mode"]["enum"] == [
            "precise",
            "contextual",
            "comprehensive",
        ]


@pytest.mark.asyncio
@pytest.mark.parametrize(("tool", "arguments", "method", "expected"), MAPPINGS, ids=[m[0] for m in MAPPINGS])
async def test_parameters_become_request_fields(
    served_gateway: Gateway,
    backend: FakeBackend,
    tool: str,
    arguments: dict[str, Any],
    method: str,
    expected: Message,
) -> None:
    async with Client(served_gateway.mcp) as client:
        result = await client.call_tool(tool, arguments)
        assert not result.is_error, result.structured_content
        assert backend.last(method) == expected


@pytest.mark.asyncio
@pytest.mark.parametrize("tool", sorted(CONTRACT_FIELDS))
async def test_results_have_the_contract_fields(served_gateway: Gateway, tool: str) -> None:
    async with Client(served_gateway.mcp) as client:
        result = await client.call_tool(tool, first_call(tool))
        assert not result.is_error, result.structured_content
        assert_has_fields(result.structured_content, CONTRACT_FIELDS[tool])
        assert json.loads(result.content[0].text) == result.structured_content


@pytest.mark.asyncio
async def test_result_values_are_rendered_for_the_contract(served_gateway: Gateway) -> None:
    async with Client(served_gateway.mcp) as client:
        query = (await client.call_tool("alexandria_query", {"query": "lamp"})).structured_content
        assert query["results"][0]["book_id"] == 1
        assert query["results"][0]["locator"]["page_start"] is None
        assert query["hierarchy_stats"] is None and query["error"] is None
        book = (await client.call_tool("alexandria_book", {"book_id": 1})).structured_content["book"]
        assert (
            book["isbn"] is None
            and book["series"] == "Coast"
            and book["identifiers"] == {"isbn": "9780000000001"}
        )
        batch = (
            await client.call_tool("alexandria_batch_ingest", {"book_ids": [1, 2, 3]})
        ).structured_content
        assert [row["status"] for row in batch["results"]] == ["success", "skipped", "failed"]
        assert (
            batch["results"][2]["error"] == "No EPUB file on disk." and batch["results"][0]["error"] is None
        )
        stats = (await client.call_tool("alexandria_stats", {})).structured_content
        assert stats["calibre"]["formats"] == {"EPUB": 4, "PDF": 1} and stats["qdrant"]["connected"] is True
        # Beyond the contract's fields, beside them: what the collection takes on disk, and its quantisation.
        assert (stats["qdrant"]["disk_bytes"], stats["qdrant"]["wal_bytes"], stats["qdrant"]["quantization"]) == (
            72_000_000, 9_000_000, "int8")


@pytest.mark.asyncio
async def test_a_search_while_a_sync_fills_the_collection_says_how_far_it_is_and_never_to_ingest_a_book(
    served_gateway: Gateway, backend: FakeBackend
) -> None:
    async with Client(served_gateway.mcp) as client:
        backend.auto_sync = ingest_pb2.AutoSyncStatus(enabled=True, collection="alexandria", running=True,
                                                      books_indexed=3, books_total=8, seconds_left=590)
        answered = (await client.call_tool("alexandria_query", {"query": "lamp"})).structured_content
        assert answered["results"] and answered["notice"].startswith(
            "A sync is filling the collection: 3 of 8 books are searchable so far, the rest in about 10 min"), answered
        other = (await client.call_tool("alexandria_query", {"query": "lamp", "collection": "other"}))
        assert "sync" not in other.structured_content["notice"], "another collection is not the one being filled"

        backend.auto_sync = ingest_pb2.AutoSyncStatus(enabled=True, collection="alexandria", running=True,
                                                      books_total=8)
        backend.failures["Search"] = FailedPrecondition(
            "Collection 'alexandria' is empty; ingest a book into it before searching.")
        first = await client.call_tool("alexandria_query", {"query": "lamp"})
        assert not first.is_error and first.structured_content["results"] == []
        assert "0 of 8 books are searchable so far" in first.structured_content["notice"]
        assert "ingest a book" not in json.dumps(first.structured_content)

        backend.auto_sync = ingest_pb2.AutoSyncStatus(enabled=True, collection="alexandria")
        idle = assert_clean_error(await client.call_tool("alexandria_query", {"query": "lamp"}))
        assert "ingest a book" in idle["error"], "with no sync running, the empty collection is said as it is"


@pytest.mark.asyncio
async def test_stats_ask_both_services(served_gateway: Gateway, backend: FakeBackend) -> None:
    async with Client(served_gateway.mcp) as client:
        await client.call_tool("alexandria_stats", {})
        assert backend.last("GetLibraryStats") == catalog_pb2.GetLibraryStatsRequest()
        assert backend.last("GetCollectionStats") == query_pb2.GetCollectionStatsRequest()


@pytest.mark.asyncio
async def test_stats_report_a_down_half_and_still_answer_with_the_other(
    served_gateway: Gateway, fake_servers: dict[str, ServiceServer]
) -> None:
    async with Client(served_gateway.mcp) as client:
        await fake_servers["query"].stop(0)
        result = await client.call_tool("alexandria_stats", {})
        assert not result.is_error
        stats = result.structured_content
        assert stats["calibre"]["total_books"] == 4 and stats["calibre"]["error"] is None
        assert (
            stats["qdrant"]["connected"] is False
            and "query service is unavailable" in stats["qdrant"]["error"]
        )
        await fake_servers["catalog"].stop(0)
        both_down = await client.call_tool("alexandria_stats", {})
        assert both_down.is_error and both_down.structured_content["success"] is False
        assert "error" in both_down.structured_content["calibre"]


@pytest.mark.asyncio
async def test_needs_metadata_is_an_error_with_the_full_contract_fields(
    served_gateway: Gateway, backend: FakeBackend
) -> None:
    async with Client(served_gateway.mcp) as client:
        backend.ingest_file_result = canned.NEEDS_METADATA
        result = await client.call_tool("alexandria_ingest_file", {"file_path": "/inbox/book.pdf"})
        assert result.is_error
        data = result.structured_content
        assert data["success"] is False and data["needs_metadata"] is True
        assert data["extracted"] == {"title": None, "author": None, "language": "eng"}
        assert data["missing_fields"] == ["title", "author"] and data["file_name"] == "book.pdf"
        assert data["error"].startswith("Missing required metadata: title, author.")


@pytest.mark.asyncio
@pytest.mark.parametrize("arguments", [{}, {"book_id": 1, "file_path": "/inbox/book.epub"}])
async def test_remove_needs_exactly_one_of_book_id_and_file_path(
    served_gateway: Gateway, backend: FakeBackend, arguments: dict[str, Any]
) -> None:
    async with Client(served_gateway.mcp) as client:
        result = await client.call_tool("alexandria_remove", arguments)
        assert result.is_error and "'book_id'" in result.structured_content["error"]
        assert "'file_path'" in result.structured_content["error"]
        assert "RemoveBook" not in backend.requests
