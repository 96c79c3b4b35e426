"""A sync against a real Calibre library changed by Calibre itself: the real catalog service over a copy of the
sample library, the real embedded store, and a fake embedder that counts what it is asked to embed. A title or an
author set with `calibredb set_metadata` (the author moves the book's folder) reaches the stored passages in place,
with nothing embedded again; the viewer saving the reader's place changes nothing a sync reads."""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest_asyncio
from catalog.scratch import copy_library, edit_highlights
from query.fakes import embedded_store

from alexandria.clients import EmbeddedTexts, ServiceClient, wait_until_serving
from alexandria.progress import follow
from alexandria.settings import CatalogSettings, ClientSettings, IngestSettings, StoreSettings
from alexandria.store import Filter, Store
from alexandria.store import schema as f
from alexandria.v1 import catalog_pb2, catalog_pb2_grpc, embedder_pb2, ingest_pb2, ingest_pb2_grpc
from alexandria_stack.layout import SAMPLE_LIBRARY
from ingest.fakes import FakeEmbedderClient
from services.catalog.server import create_server as create_catalog
from services.ingest.server import create_server as create_ingest

COLLECTION = "books"
START_TIMEOUT_S = 30
ALMANAC, BEES = 1, 4  # the sample library's EPUB by Margaret Holloway, and its PDF


class CountingEmbedder(FakeEmbedderClient):
    def __init__(self) -> None:
        super().__init__()
        self.texts = 0

    async def embed_many(self, texts: Sequence[str], kind: int = embedder_pb2.EMBED_KIND_PASSAGE) -> EmbeddedTexts:
        self.texts += len(texts)
        return await super().embed_many(texts, kind)


@dataclass
class Stack:
    library: Path
    ingest: ServiceClient
    catalog: ServiceClient
    embedder: CountingEmbedder
    store: Store

    async def sync(self) -> ingest_pb2.SyncResult:
        request = ingest_pb2.SyncLibraryRequest(options=ingest_pb2.IngestOptions(collection=COLLECTION),
                                                remove_deleted=True)
        result = await follow(self.ingest.stream("SyncLibrary", request), ignore_progress)
        assert isinstance(result, ingest_pb2.SyncResult)
        return result

    async def signature(self) -> str:
        state = await self.catalog.call("GetLibraryState", catalog_pb2.GetLibraryStateRequest())
        return str(state.signature)

    def stored(self, book_id: int) -> set[tuple[str, str, str]]:
        """(title, author, file path) of every point of the book."""
        points = self.store.scroll(COLLECTION, Filter(must={f.CALIBRE_ID: book_id}), limit=10_000)
        assert points
        return {(p.payload[f.BOOK_TITLE], p.payload[f.AUTHOR], p.payload[f.FILE_PATH]) for p in points}


async def ignore_progress(progress: object) -> None:
    pass


def calibredb(library: Path, *args: str) -> None:
    subprocess.run(["calibredb", "--library-path", str(library), *args], check=True, capture_output=True, timeout=120,
                   env={**os.environ, "QTWEBENGINE_CHROMIUM_FLAGS": "--no-sandbox"})


@pytest_asyncio.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    library = copy_library(SAMPLE_LIBRARY, tmp_path / "library")
    store_settings = StoreSettings(alexandria_data_dir=tmp_path / "data", qdrant_host=None, qdrant_url=None,
                                   qdrant_local_path=None)
    store, embedder = embedded_store(tmp_path / "data"), CountingEmbedder()
    catalog_server = create_catalog(CatalogSettings(catalog_listen="127.0.0.1:0", calibre_library_path=library,
                                                    catalog_recheck_interval_s=0.1, store=store_settings), store=store)
    await catalog_server.start()
    catalog = ServiceClient("catalog", catalog_server.address, catalog_pb2_grpc.CatalogServiceStub, ClientSettings())
    ingest_settings = IngestSettings(ingest_listen="127.0.0.1:0", store=store_settings, auto_sync=False)
    ingest_server = create_ingest(ingest_settings, store=store, embedder=embedder, catalog=catalog)
    await ingest_server.start()
    ingest = ServiceClient("ingest", ingest_server.address, ingest_pb2_grpc.IngestServiceStub, ClientSettings())
    try:
        await wait_until_serving(catalog_server.address, START_TIMEOUT_S)
        await wait_until_serving(ingest_server.address, START_TIMEOUT_S)
        yield Stack(library, ingest, catalog, embedder, store)
    finally:
        await ingest.close()
        await ingest_server.stop(grace=1)
        await catalog.close()
        await catalog_server.stop(grace=1)
        store.close()


async def test_a_title_and_an_author_set_in_calibre_reach_the_passages_in_place_and_a_viewer_changes_nothing(
        stack: Stack) -> None:
    first = await stack.sync()
    assert first.added == 4 and not first.failed, first.summary
    points = stack.store.count(COLLECTION)

    calibredb(stack.library, "set_metadata", str(ALMANAC), "--field", "title:The Keeper's Almanac, Revised")
    embedded = stack.embedder.texts
    retitled = await stack.sync()
    assert retitled.updated == 1 and retitled.added == retitled.replaced == 0, retitled.summary
    ((title, author, path),) = stack.stored(ALMANAC)
    assert (title, author) == ("The Keeper's Almanac, Revised", "Margaret Holloway")
    assert Path(path).is_file() and "Revised" in path, "the path Calibre renamed the file to"

    calibredb(stack.library, "set_metadata", str(BEES), "--field", "authors:Ann Lee")
    moved = await stack.sync()
    assert moved.updated == 1 and moved.added == moved.replaced == 0, moved.summary
    ((title, author, path),) = stack.stored(BEES)
    assert (title, author) == ("Notes on the Keeping of Bees", "Ann Lee")
    assert Path(path).is_file() and Path(path).suffix == ".pdf" and "/Ann Lee/" in path, "the moved folder"
    assert stack.embedder.texts == embedded, "nothing was embedded again"
    assert stack.store.count(COLLECTION) == points, "the same points, updated in place"

    before = await stack.signature()
    edit_highlights(stack.library, "read", ALMANAC)  # the viewer saving the reader's place
    assert await stack.signature() == before, "a write that changes nothing a sync reads leaves the state as it was"
    again = await stack.sync()
    assert again.updated == again.added == 0 and again.plan.unchanged == 4, again.summary
