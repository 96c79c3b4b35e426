"""Fake catalog, ingest and query servicers for the gateway's unit tests.

They run on real grpc.aio servers (built with the kernel's `build_server`, so the
error interceptor and health service are the real ones) and answer with canned
messages while recording every request, so a test can check both directions of
the gateway's mapping: tool parameters -> request fields, response -> contract fields.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf.message import Message
from mcp_types import CallToolResult

from alexandria.grpc_server import ServiceServer, build_server
from alexandria.settings import ClientSettings, GatewaySettings
from alexandria.v1 import (
    catalog_pb2,
    catalog_pb2_grpc,
    common_pb2,
    ingest_pb2,
    ingest_pb2_grpc,
    query_pb2,
    query_pb2_grpc,
)

LOCATOR = common_pb2.Locator(chapter_title="The Lamp", chapter_index=2, position=41, text_source="text")
CHUNKING = common_pb2.ChunkingParams(threshold=0.55, min_chunk_size=200, max_chunk_size=1200)

SEARCH = query_pb2.SearchResponse(
    query="how is the lamp trimmed",
    results=[
        query_pb2.SearchHit(
            score=0.83,
            book_title="The Lighthouse Keeper's Almanac",
            author="Margaret Holloway",
            section_name="The Lamp",
            text="Trim the wick each dusk.",
            chunk_id="c-1",
            locator=LOCATOR,
            book_id=1,
            book_key="calibre:1",
            language="eng",
            parent_id="p-1",
            sequence_index=41,
        )
    ],
    result_count=1,
    context_mode="precise",
    search_mode="hybrid",
    response_instruction="Answer as Zec.",
    guardian="zec",
    guardian_name="Zec",
    guardian_emoji="📮",
    response_pattern="free",
)
GUARDIANS = query_pb2.ListGuardiansResponse(
    guardians=[
        query_pb2.Guardian(
            id="zec",
            name="Zec",
            emoji="📮",
            role="Meta-postman of Alexandria",
            greeting="Post for you.",
            personality_prompt="Sharp and ironic; question the premise.",
        ),
        query_pb2.Guardian(
            id="ariadne", name="Ariadne", emoji="🧵", role="Patient guide", greeting="Follow me."
        ),
    ],
    default="zec",
    count=2,
)
PATTERNS = query_pb2.ListResponsePatternsResponse(
    patterns=[
        query_pb2.ResponsePattern(
            id="tldr",
            category="direct",
            name="TL;DR",
            description="Short answer",
            instruction="Answer in 3 lines.",
        )
    ],
    category_defaults={"direct": "tldr"},
)
COLLECTION_STATS = query_pb2.CollectionStats(
    connected=True,
    collection_name="alexandria",
    points_count=450,
    vector_size=384,
    status="green",
    books=3,
    model="all-MiniLM-L6-v2",
    backend="embedded",
    disk_bytes=72_000_000,
    wal_bytes=9_000_000,
    quantization="int8",
)
BOOKS = catalog_pb2.SearchBooksResponse(
    books=[
        catalog_pb2.BookSummary(
            id=1,
            title="The Lighthouse Keeper's Almanac",
            author="Margaret Holloway",
            authors=["Margaret Holloway"],
            language="eng",
            languages=["eng"],
            tags=["sea", "almanac"],
            formats=["EPUB"],
        )
    ],
    count=1,
)
BOOK = catalog_pb2.GetBookResponse(
    book=catalog_pb2.BookDetail(
        id=1,
        title="The Lighthouse Keeper's Almanac",
        author="Margaret Holloway",
        authors=["Margaret Holloway"],
        language="eng",
        series="Coast",
        series_index=1.0,
        publisher="Tidewater",
        formats=["EPUB", "PDF"],
        identifiers={"isbn": "9780000000001"},
        uuid="u-1",
    )
)
LIBRARY_STATS = catalog_pb2.GetLibraryStatsResponse(
    total_books=4, total_authors=4, formats={"EPUB": 4, "PDF": 1}, languages={"eng": 3, "hrv": 1}
)
PREVIEW = catalog_pb2.PreviewIngestResponse(
    books=[
        catalog_pb2.PreviewBook(
            id=1,
            title="The Lighthouse Keeper's Almanac",
            author="Margaret Holloway",
            language="eng",
            formats=["EPUB"],
            selected_format="EPUB",
            file_path="/library/almanac.epub",
            already_ingested=True,
        )
    ],
    count=1,
    format_filter="epub",
)
INGESTED = ingest_pb2.IngestResult(
    success=True,
    title="The Lighthouse Keeper's Almanac",
    author="Margaret Holloway",
    language="eng",
    chunks=202,
    parent_chunks=12,
    hierarchical=True,
    chunking_params=CHUNKING,
    file_size_mb=1.5,
    collection="alexandria",
    format="EPUB",
    progress="[████████████████████] 100%",
    steps=["📖 Found", "✅ Successfully ingested!"],
    book_key="calibre:1",
    book_id=1,
)
NEEDS_METADATA = ingest_pb2.IngestResult(
    success=False,
    needs_metadata=True,
    file_path="/inbox/book.pdf",
    file_name="book.pdf",
    file_size_mb=1.5,
    format="PDF",
    extracted=ingest_pb2.ExtractedMetadata(language="eng"),
    missing_fields=["title", "author"],
    progress="[██████████░░░░░░░░░░] 50%",
    steps=["📄 Read book.pdf"],
    error='Missing required metadata: title, author. Please provide: alexandria_ingest_file(file_path="/inbox/book.pdf", '
    'title="...", author="...")',
)
PROGRESS = [
    common_pb2.Progress(stage="extract", done=1, total=1, message="extracted 12 chapters"),
    common_pb2.Progress(stage="embed", done=100, total=202, message="embedded 100/202"),
    common_pb2.Progress(stage="embed", done=202, total=202, message="embedded 202/202"),
    common_pb2.Progress(stage="write", done=202, total=202, message="stored 202 chunks"),
]
ROWS = [
    ingest_pb2.BatchIngestRow(
        id=1,
        title="The Lighthouse Keeper's Almanac",
        author="M",
        status=ingest_pb2.BATCH_STATUS_SUCCESS,
        chunks=202,
    ),
    ingest_pb2.BatchIngestRow(
        id=2, title="Zapisi s otoka", author="B", status=ingest_pb2.BATCH_STATUS_SKIPPED
    ),
    ingest_pb2.BatchIngestRow(
        id=3, title="Storm", author="A", status=ingest_pb2.BATCH_STATUS_FAILED, error="No EPUB file on disk."
    ),
]
BATCH = ingest_pb2.BatchIngestResult(
    total=3, succeeded=1, skipped=1, failed=1, results=ROWS, summary="📚 Batch ingest complete: 1/3 succeeded"
)
TEST_CHUNKING = ingest_pb2.TestChunkingResult(
    success=True,
    title="The Lighthouse Keeper's Almanac",
    author="Margaret Holloway",
    parameters=ingest_pb2.ChunkingParameters(threshold=0.55, min=200, max=1200),
    stats=ingest_pb2.ChunkStats(total_chunks=202, avg_words=450.0, min_words=200, max_words=1200),
    samples=[ingest_pb2.ChunkSample(chunk_num=1, words=450, text="Trim the wick.", locator=LOCATOR)],
    chapters=12,
    total_sentences=5000,
    total_words=80000,
    format="EPUB",
)
COMPARE = ingest_pb2.CompareChunkingResult(
    success=True,
    title="The Lighthouse Keeper's Almanac",
    author="Margaret Holloway",
    total_sentences=5000,
    total_words=80000,
    similarity_distribution=ingest_pb2.SimilarityDistribution(min=0.2, max=0.95, mean=0.65, median=0.68),
    comparisons=[
        ingest_pb2.ThresholdComparison(
            threshold=0.55,
            chunks=202,
            avg_words=396.0,
            coherence=0.75,
            semantic_breaks=180,
            forced_breaks=22,
            sample_breaks=[ingest_pb2.SampleBreak(sentence_index=9, similarity=0.3, before="a.", after="b.")],
        )
    ],
    recommendation=0.55,
    recommendation_reason="Best balance of chunk size and semantic coherence",
)
LOCAL_FILES = ingest_pb2.BrowseLocalResponse(
    path="/inbox",
    files=[ingest_pb2.LocalFile(name="book.epub", size_mb=1.5, format="EPUB", full_path="/inbox/book.epub")],
    count=1,
)
REMOVED = ingest_pb2.RemoveBookResponse(
    success=True,
    title="The Lighthouse Keeper's Almanac",
    author="Margaret Holloway",
    book_key="calibre:1",
    chunks_removed=214,
    collection="alexandria",
)


@dataclass
class FakeBackend:
    """What the fake servicers answer, what they were asked, and which methods should fail."""

    requests: dict[str, list[Message]] = field(default_factory=dict)
    failures: dict[str, BaseException] = field(default_factory=dict)
    ingest_file_result: ingest_pb2.IngestResult = field(default_factory=lambda: INGESTED)
    auto_sync: ingest_pb2.AutoSyncStatus = field(
        default_factory=lambda: ingest_pb2.AutoSyncStatus(enabled=True, collection="alexandria"))
    # When set, streams pause after their first event until it is set: a call still running.
    hold: asyncio.Event | None = None
    cancelled: list[str] = field(default_factory=list)  # streams the caller cancelled

    def last(self, method: str) -> Message:
        """The last request `method` received."""
        return self.requests[method][-1]

    def record(self, method: str, request: Message) -> None:
        self.requests.setdefault(method, []).append(request)
        if method in self.failures:
            raise self.failures[method]

    async def unary(self, method: str, request: Message, response: Message) -> Message:
        self.record(method, request)
        return response

    async def stream(self, method: str, request: Message, events: list[Message]) -> AsyncIterator[Message]:
        self.record(method, request)
        for n, event in enumerate(events):
            yield event
            if n == 0 and self.hold is not None:
                try:
                    await self.hold.wait()
                except asyncio.CancelledError:
                    self.cancelled.append(method)
                    raise


def _progress_events(event_type: type[Message]) -> list[Message]:
    return [event_type(progress=progress) for progress in PROGRESS]


class FakeCatalogServicer(catalog_pb2_grpc.CatalogServiceServicer):
    def __init__(self, backend: FakeBackend) -> None:
        self.backend = backend

    async def SearchBooks(self, request: Any, context: Any) -> Message:
        return await self.backend.unary("SearchBooks", request, BOOKS)

    async def GetBook(self, request: Any, context: Any) -> Message:
        return await self.backend.unary("GetBook", request, BOOK)

    async def GetLibraryStats(self, request: Any, context: Any) -> Message:
        return await self.backend.unary("GetLibraryStats", request, LIBRARY_STATS)

    async def PreviewIngest(self, request: Any, context: Any) -> Message:
        return await self.backend.unary("PreviewIngest", request, PREVIEW)


class FakeIngestServicer(ingest_pb2_grpc.IngestServiceServicer):
    def __init__(self, backend: FakeBackend) -> None:
        self.backend = backend

    def IngestBook(self, request: Any, context: Any) -> AsyncIterator[Message]:
        events = [*_progress_events(ingest_pb2.IngestEvent), ingest_pb2.IngestEvent(result=INGESTED)]
        return self.backend.stream("IngestBook", request, events)

    def IngestFile(self, request: Any, context: Any) -> AsyncIterator[Message]:
        result = self.backend.ingest_file_result
        return self.backend.stream("IngestFile", request, [ingest_pb2.IngestEvent(result=result)])

    def BatchIngest(self, request: Any, context: Any) -> AsyncIterator[Message]:
        events = [
            ingest_pb2.BatchIngestEvent(progress=common_pb2.Progress(stage="books", done=0, total=3)),
            *(ingest_pb2.BatchIngestEvent(row=row) for row in ROWS),
            ingest_pb2.BatchIngestEvent(result=BATCH),
        ]
        return self.backend.stream("BatchIngest", request, events)

    def TestChunking(self, request: Any, context: Any) -> AsyncIterator[Message]:
        events = [
            *_progress_events(ingest_pb2.TestChunkingEvent),
            ingest_pb2.TestChunkingEvent(result=TEST_CHUNKING),
        ]
        return self.backend.stream("TestChunking", request, events)

    def CompareChunking(self, request: Any, context: Any) -> AsyncIterator[Message]:
        return self.backend.stream(
            "CompareChunking", request, [ingest_pb2.CompareChunkingEvent(result=COMPARE)]
        )

    async def BrowseLocal(self, request: Any, context: Any) -> Message:
        return await self.backend.unary("BrowseLocal", request, LOCAL_FILES)

    async def RemoveBook(self, request: Any, context: Any) -> Message:
        return await self.backend.unary("RemoveBook", request, REMOVED)

    async def GetAutoSyncStatus(self, request: Any, context: Any) -> Message:
        return await self.backend.unary("GetAutoSyncStatus", request, self.backend.auto_sync)


class FakeQueryServicer(query_pb2_grpc.QueryServiceServicer):
    def __init__(self, backend: FakeBackend) -> None:
        self.backend = backend

    async def Search(self, request: Any, context: Any) -> Message:
        return await self.backend.unary("Search", request, SEARCH)

    async def ListGuardians(self, request: Any, context: Any) -> Message:
        return await self.backend.unary("ListGuardians", request, GUARDIANS)

    async def ListResponsePatterns(self, request: Any, context: Any) -> Message:
        return await self.backend.unary("ListResponsePatterns", request, PATTERNS)

    async def GetCollectionStats(self, request: Any, context: Any) -> Message:
        return await self.backend.unary("GetCollectionStats", request, COLLECTION_STATS)


_SERVICES = {
    "catalog": (
        FakeCatalogServicer,
        catalog_pb2_grpc.add_CatalogServiceServicer_to_server,
        "CatalogService",
        catalog_pb2,
    ),
    "ingest": (FakeIngestServicer, ingest_pb2_grpc.add_IngestServiceServicer_to_server, "IngestService", ingest_pb2),
    "query": (FakeQueryServicer, query_pb2_grpc.add_QueryServiceServicer_to_server, "QueryService", query_pb2),
}


def socket_address(directory: Path, name: str) -> str:
    return f"unix://{directory / f'{name}.sock'}"


async def start_fake(name: str, directory: Path, backend: FakeBackend) -> ServiceServer:
    """Start the fake `name` service (catalog, ingest or query) on a unix socket in `directory`, SERVING."""
    servicer_class, add_to_server, service, module = _SERVICES[name]
    servicer = servicer_class(backend)
    server = build_server(
        name,
        socket_address(directory, name),
        lambda s: add_to_server(servicer, s),
        [module.DESCRIPTOR.services_by_name[service].full_name],
    )
    await server.start()
    await server.health.set_serving(True)
    return server


def gateway_settings(socket_dir: Path, **overrides: object) -> GatewaySettings:
    """Settings pointing at the fake services, with quick retries and no tokens unless given."""
    values: dict[str, object] = {
        "catalog_addr": socket_address(socket_dir, "catalog"),
        "ingest_addr": socket_address(socket_dir, "ingest"),
        "query_addr": socket_address(socket_dir, "query"),
        "gateway_tokens": {},
        "gateway_allowed_hosts": [],
        "clients": ClientSettings(rpc_retry_attempts=2, rpc_timeout_s=10),
        **overrides,
    }
    return GatewaySettings(**values)


def assert_clean_error(result: CallToolResult, *, leaked: str = "10.9.8.7") -> dict[str, Any]:
    """An isError result in the contract's shape that does not leak the given internals."""
    assert result.is_error
    data = result.structured_content
    assert data["success"] is False and data["error"]
    for text in (json.dumps(data), result.content[0].text):
        assert leaked not in text and "debug_error_string" not in text and "Traceback" not in text
    return data
