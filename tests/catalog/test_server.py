"""The catalog over gRPC: a real server on a unix socket, real libraries, the real embedded store."""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.message import Message
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from ingest.helpers import scanned_pdf
from waiting import wait_until

from alexandria.clients import ServiceClient
from alexandria.errors import FailedPrecondition, NotFound, Unavailable
from alexandria.settings import CatalogSettings, ClientSettings, StoreSettings
from alexandria.store import SparseVector, Store, StoredPoint, open_store, schema
from alexandria.v1 import catalog_pb2, catalog_pb2_grpc, common_pb2
from catalog import expected
from catalog.scratch import copy_library, open_for_writing
from services.catalog.server import SERVICE_NAME, create_server

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(60)]

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
FILTERS = {
    "epub": common_pb2.FORMAT_PREFERENCE_EPUB,
    "pdf": common_pb2.FORMAT_PREFERENCE_PDF,
    "any": common_pb2.FORMAT_PREFERENCE_ANY,
}


@dataclass
class Catalog:
    client: ServiceClient
    address: str

    async def call(self, method: str, request: Message) -> Any:
        return await self.client.call(method, request)

    async def health(self) -> int:
        async with aio.insecure_channel(self.address) as channel:
            request = health_pb2.HealthCheckRequest(service=SERVICE_NAME)
            return (await health_pb2_grpc.HealthStub(channel).Check(request, timeout=5)).status


@asynccontextmanager
async def running_catalog(
    library: Path | None, sockets: Path, store: Store | None = None, recheck_interval_s: float = 1.0
) -> AsyncIterator[Catalog]:
    """A started catalog server on a unix socket and a client without retries."""
    settings = CatalogSettings(catalog_listen=f"unix://{sockets}/catalog.sock", calibre_library_path=library,
                               catalog_recheck_interval_s=recheck_interval_s)
    server = create_server(settings, store=store)
    await server.start()
    client = ServiceClient(
        "catalog", server.address, catalog_pb2_grpc.CatalogServiceStub, ClientSettings(rpc_retry_attempts=1)
    )
    try:
        yield Catalog(client, server.address)
    finally:
        await client.close()
        await server.stop(0)


@pytest.fixture
def sockets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Short: a unix socket path must stay under ~100 characters.
    return tmp_path_factory.mktemp("s")


def as_dict(message: Message) -> dict[str, Any]:
    return MessageToDict(message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def assert_same(actual: Message, want: dict[str, Any]) -> None:
    """`actual` holds exactly the contract fields `want` (None: unset)."""
    parsed = ParseDict({k: v for k, v in want.items() if v is not None}, type(actual)())
    assert as_dict(actual) == as_dict(parsed)


async def test_every_book_and_field_as_calibre_reports_it(
    library_name: str, library_root: Path, sockets: Path
) -> None:
    rows = expected.load_rows(library_name)
    async with running_catalog(library_root, sockets) as catalog:
        assert await catalog.health() == SERVING
        for row in rows:
            response = await catalog.call("GetBook", catalog_pb2.GetBookRequest(book_id=row["id"]))
            assert_same(response.book, expected.book_fields(row))
            found = await catalog.call(
                "SearchBooks", catalog_pb2.SearchBooksRequest(title=row["title"].upper())
            )
            assert_same(next(b for b in found.books if b.id == row["id"]), expected.summary_fields(row))
        everything = await catalog.call("SearchBooks", catalog_pb2.SearchBooksRequest(limit=100))
        assert everything.count == len(rows)
        for book, row in zip(everything.books, rows, strict=True):
            assert_same(book, expected.summary_fields(row))
        stats = await catalog.call("GetLibraryStats", catalog_pb2.GetLibraryStatsRequest())
        assert_same(stats, expected.stats_fields(rows))


@pytest.mark.parametrize("format_filter", ["epub", "pdf", "any", "default"])
async def test_preview_selects_the_filters_file(
    library_name: str, library_root: Path, sockets: Path, format_filter: str
) -> None:
    rows = expected.load_rows(library_name)
    wanted = "epub" if format_filter == "default" else format_filter
    request = catalog_pb2.PreviewIngestRequest(format_filter=FILTERS.get(format_filter, 0), limit=50)
    async with running_catalog(library_root, sockets) as catalog:
        preview = await catalog.call("PreviewIngest", request)
    assert (preview.count, preview.format_filter) == (len(rows), wanted)
    for book, row in zip(preview.books, rows, strict=True):
        assert_same(book, expected.preview_fields(row, library_root, wanted))


@pytest.mark.parametrize("format_filter", ["epub", "pdf", "any"])
async def test_a_preview_shows_the_file_that_ingest_reads(
    library_name: str, library_root: Path, sockets: Path, format_filter: str
) -> None:
    preference = common_pb2.FORMAT_PREFERENCE_UNSPECIFIED if format_filter == "any" else FILTERS[format_filter]
    request = catalog_pb2.PreviewIngestRequest(format_filter=FILTERS[format_filter], limit=50)
    async with running_catalog(library_root, sockets) as catalog:
        preview = await catalog.call("PreviewIngest", request)
        assert preview.count == len(expected.load_rows(library_name))
        for book in preview.books:
            resolve = catalog_pb2.ResolveBookFileRequest(book_id=book.id, format_preference=preference)
            resolved = await catalog.call("ResolveBookFile", resolve)
            assert (book.selected_format, book.file_path) == (resolved.format, resolved.file_path), book.title


async def test_a_preview_marks_a_book_whose_pdf_is_a_scan(tmp_path: Path, sockets: Path) -> None:
    library = copy_library(expected.LIBRARIES["fixture"], tmp_path / "library")
    pdf = next(library.rglob("Notes on the Keeping of Bees*.pdf"))  # book 4, PDF only
    pdf.write_bytes(scanned_pdf(["The hive is opened on a warm still day, when most of the bees are out."]))
    request = catalog_pb2.PreviewIngestRequest(format_filter=FILTERS["any"], limit=50)
    async with running_catalog(library, sockets) as catalog:
        preview = await catalog.call("PreviewIngest", request)
    assert {book.id: book.scanned for book in preview.books} == {1: False, 2: False, 3: False, 4: True}


async def test_resolve_book_file_for_ingest(library_name: str, library_root: Path, sockets: Path) -> None:
    async with running_catalog(library_root, sockets) as catalog:
        for row in expected.load_rows(library_name):
            for preference in ("", "pdf"):
                request = catalog_pb2.ResolveBookFileRequest(
                    book_id=row["id"], format_preference=FILTERS.get(preference, common_pb2.FORMAT_PREFERENCE_UNSPECIFIED)
                )
                resolved = await catalog.call("ResolveBookFile", request)
                fmt = expected.selected_format(row, preference or "epub")
                assert (resolved.format, resolved.file_path) == (
                    fmt,
                    expected.file_path(row, library_root, fmt),
                )
                assert resolved.file_size_bytes == Path(resolved.file_path).stat().st_size
                assert_same(resolved.book, expected.book_fields(row))


async def test_search_filters_and_limits(sockets: Path) -> None:
    async with running_catalog(expected.LIBRARIES["fixture"], sockets) as catalog:

        async def search(**fields: Any) -> list[int]:
            response = await catalog.call("SearchBooks", catalog_pb2.SearchBooksRequest(**fields))
            assert response.count == len(response.books)
            return [b.id for b in response.books]

        assert await search(author="čulić") == [3]
        assert await search(author="HOLLOWAY", tags=["sea stories", "Lifeboats"]) == [2]
        assert await search(language="eng") == [1, 2, 4]
        assert await search(limit=-3) == [1]
        assert await search(limit=2**31 - 1) == [1, 2, 3, 4]
        preview = await catalog.call("PreviewIngest", catalog_pb2.PreviewIngestRequest(limit=-1))
        assert [b.id for b in preview.books] == [1]


async def test_unknown_book_is_not_found(sockets: Path) -> None:
    async with running_catalog(expected.LIBRARIES["fixture"], sockets) as catalog:
        with pytest.raises(NotFound, match="424242"):
            await catalog.call("GetBook", catalog_pb2.GetBookRequest(book_id=424242))
        with pytest.raises(NotFound, match="-7"):
            await catalog.call("ResolveBookFile", catalog_pb2.ResolveBookFileRequest(book_id=-7))


async def test_already_ingested_is_asked_of_the_store(
    fixture_copy: Path, sockets: Path, tmp_path: Path
) -> None:
    uuids = {row["id"]: row["uuid"] for row in expected.load_rows("fixture")}

    def point(book_id: int, complete: bool) -> StoredPoint:
        payload = {schema.CALIBRE_ID: book_id, schema.BOOK_KEY: uuids[book_id], schema.COMPLETE: complete}
        return StoredPoint(str(uuid.uuid4()), np.ones(4, np.float32), SparseVector([1], [1.0]), payload)

    async def ingested(catalog: Catalog, collection: str = "") -> list[int]:
        request = catalog_pb2.PreviewIngestRequest(
            collection=collection, format_filter=common_pb2.FORMAT_PREFERENCE_ANY
        )
        preview = await catalog.call("PreviewIngest", request)
        return [b.id for b in preview.books if b.already_ingested]

    store = open_store(StoreSettings(alexandria_data_dir=tmp_path / "data"))
    try:
        async with running_catalog(fixture_copy, sockets, store) as catalog:
            assert await ingested(catalog, "books") == []  # no such collection yet: nothing is in
            store.ensure_collection("books", 4, {"model": "test"})
            store.upsert("books", [point(1, True), point(2, False), point(3, True), point(3, True)])
            assert await ingested(catalog, "books") == [1, 3]  # book 2 is half-written
            assert await ingested(catalog) == []  # the default collection is another one
    finally:
        store.close()


async def test_a_path_that_is_no_library_is_not_serving_until_it_is(tmp_path: Path, sockets: Path) -> None:
    library = tmp_path / "not yet"
    requests = {
        "SearchBooks": catalog_pb2.SearchBooksRequest(),
        "GetBook": catalog_pb2.GetBookRequest(book_id=1),
        "GetLibraryStats": catalog_pb2.GetLibraryStatsRequest(),
        "PreviewIngest": catalog_pb2.PreviewIngestRequest(),
        "ResolveBookFile": catalog_pb2.ResolveBookFileRequest(book_id=1),
    }
    async with running_catalog(library, sockets) as catalog:
        assert await catalog.health() == NOT_SERVING
        for method, request in requests.items():
            with pytest.raises(FailedPrecondition, match="does not exist") as caught:
                await catalog.call(method, request)
            assert str(library) in caught.value.message
        shutil.copytree(expected.LIBRARIES["fixture"], library)
        assert (await catalog.call("GetLibraryStats", requests["GetLibraryStats"])).total_books == 4
        assert await catalog.health() == SERVING


@pytest.mark.slow
async def test_a_locked_library_answers_unavailable(fixture_copy: Path, sockets: Path) -> None:
    with open_for_writing(fixture_copy) as blocker:
        blocker.execute("BEGIN EXCLUSIVE")
        async with running_catalog(fixture_copy, sockets) as catalog:
            assert await catalog.health() == NOT_SERVING
            with pytest.raises(Unavailable, match="busy"):
                await catalog.call("SearchBooks", catalog_pb2.SearchBooksRequest())
            blocker.execute("ROLLBACK")
            assert (await catalog.call("SearchBooks", catalog_pb2.SearchBooksRequest())).count == 4
            assert await catalog.health() == SERVING


async def listed_once(catalog: Catalog, wanted: Callable[[Any], bool], timeout: float = 30) -> Any:
    """ListLibraryFiles, asked again until its answer is `wanted` (the catalog looks at metadata.db once
    every recheck interval)."""
    return await wait_until(lambda: catalog.call("ListLibraryFiles", catalog_pb2.ListLibraryFilesRequest()), wanted,
                            what="the catalog's list of library files to change", timeout_s=timeout)


@pytest.mark.slow
async def test_a_list_served_from_the_previous_read_while_calibre_holds_its_lock_says_so(
        fixture_copy: Path, sockets: Path) -> None:
    async with running_catalog(fixture_copy, sockets, recheck_interval_s=0.05) as catalog:
        assert (await listed_once(catalog, lambda _: True)).stale_reason == ""
        with open_for_writing(fixture_copy) as blocker:
            blocker.execute("UPDATE books SET title = 'Renamed' WHERE id = 1")
            blocker.execute("BEGIN EXCLUSIVE")
            listed = await listed_once(catalog, lambda answer: bool(answer.stale_reason))
            assert re.fullmatch(r"Calibre holds its lock on metadata\.db; this is the library as read at "
                                r"\d\d:\d\d:\d\d", listed.stale_reason), listed.stale_reason
            assert "Renamed" not in [book.title for book in listed.books]
            assert await catalog.health() == SERVING, "a previous read is still served"
            blocker.execute("ROLLBACK")
        listed = await listed_once(catalog, lambda answer: not answer.stale_reason)
        assert listed.stale_reason == "" and "Renamed" in [book.title for book in listed.books]
