"""The reindex's plan and its resumption: which books are rebuilt, which are gone, what a stopped run leaves."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from alexandria.book_identity import file_sha256, local_book_key
from alexandria.errors import FailedPrecondition, NotFound
from alexandria.store.records import BookRecord
from alexandria.v1 import catalog_pb2
from services.ingest.batch import BatchStatus
from services.ingest.documents import ChunkingParams
from services.ingest.extract.ocr import OcrOptions
from services.ingest.reindex import (
    DELETED,
    CollectionReindex,
    ReindexOutcome,
    ReindexState,
    ReindexStateFile,
    calibre_gone,
    local_gone,
    plan_reindex,
    resume_or_start,
)
from services.ingest.sync import NO_FILE, SyncState

OLD, NEW = "all-MiniLM-L6-v2", "all-MiniLM-L6-v2+int8"


def book(key: str, **more: object) -> BookRecord:
    return BookRecord(book_key=key, title=key.title(), author="A", **more)  # type: ignore[arg-type]


def test_the_plan_rebuilds_every_book_held_but_those_rebuilt_already_and_those_gone() -> None:
    held = [book("a"), book("b"), book("c"), book("d")]

    plan = plan_reindex(held, rebuilt={"b"}, gone={"d": DELETED})

    assert [b.book_key for b in plan.rebuild] == ["a", "c"]
    assert [b.book_key for b in plan.done] == ["b"]
    assert [(g.book.book_key, g.reason) for g in plan.gone] == [("d", DELETED)]
    assert plan.counts() == "2 to rebuild, 1 rebuilt before (resumed), 1 whose source is gone"


def test_a_first_reindex_builds_into_a_new_collection_name() -> None:
    started = resume_or_start(None, "library", "library", NEW)

    assert not started.resumed and started.drop == () and not started.swapped
    assert started.state.source == "library" and started.state.model == NEW
    assert started.state.target.startswith("library-r") and started.state.target != "library"
    long_name = "x" * 64
    assert len(resume_or_start(None, long_name, long_name, NEW).state.target) <= 64


def test_a_stopped_reindex_of_the_same_collection_and_model_resumes_into_its_collection() -> None:
    saved = ReindexState("library", "library", "library-r0123456789", NEW)

    resumed = resume_or_start(saved, "library", "library", NEW)

    assert resumed.resumed and resumed.state == saved and resumed.drop == ()


def test_a_stopped_reindex_under_another_model_is_dropped_and_started_anew() -> None:
    saved = ReindexState("library", "library", "library-r0123456789", OLD)

    started = resume_or_start(saved, "library", "library", NEW)

    assert not started.resumed and started.drop == ("library-r0123456789",)
    assert started.state.target != saved.target and started.state.model == NEW


def test_a_reindex_killed_after_its_swap_only_drops_the_old_collection() -> None:
    saved = ReindexState("library", "library", "library-r0123456789", NEW)

    finished = resume_or_start(saved, "library", "library-r0123456789", NEW)

    assert finished.swapped and finished.drop == ("library",)


def test_a_reindex_killed_amid_a_server_stores_first_swap_only_swaps() -> None:
    # The collection of the user's name was dropped, and the alias that takes its name not made yet.
    saved = ReindexState("library", "library", "library-r0123456789", NEW)

    finished = resume_or_start(saved, "library", "library", NEW, source_exists=False)

    assert finished.swap_left and finished.state == saved and finished.drop == ()
    assert not resume_or_start(saved, "library", "library", NEW).swap_left


def test_the_state_file_is_kept_whole_and_read_back(tmp_path: Path) -> None:
    file = ReindexStateFile(tmp_path, "library")
    assert file.load() is None
    state = ReindexState("library", "library", "library-r0123456789", NEW)

    file.save(state)

    assert ReindexStateFile(tmp_path, "library").load() == state and not list(tmp_path.glob("*.tmp"))
    file.path.write_text("{not json")
    assert file.load() is None
    file.clear()
    assert not file.path.exists()


def test_a_calibre_book_is_gone_when_deleted_or_with_no_file_on_disk() -> None:
    library = {"u1": catalog_pb2.LibraryFile(uuid="u1", format="EPUB"), "u2": catalog_pb2.LibraryFile(uuid="u2")}

    assert calibre_gone(book("u1"), library) is None
    assert calibre_gone(book("u2"), library) == NO_FILE
    assert calibre_gone(book("u3"), library) == DELETED


def test_a_local_file_is_gone_when_missing_or_changed(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("the same text")
    kept = book(local_book_key(file_sha256(path)), file_path=str(path))
    assert local_gone(kept) is None

    path.write_text("another text")
    assert "changed since it was ingested" in (local_gone(kept) or "")
    path.unlink()
    assert "is no longer on disk" in (local_gone(kept) or "")


def test_chunking_parameters_read_back_as_recorded() -> None:
    params = ChunkingParams(0.4, 100, 900)

    assert ChunkingParams.from_stored(params.to_stored(False)) == (params, False)
    assert ChunkingParams.from_stored({}) == (ChunkingParams(), True)


def test_a_reindex_holds_the_sync_lock_and_a_sync_is_told_so(tmp_path: Path) -> None:
    refused = pytest.raises(FailedPrecondition, match="A reindex of collection 'library' is already running")
    with SyncState(tmp_path, "library").locked("reindex"), refused, SyncState(tmp_path, "library").locked():
        pass
    with SyncState(tmp_path, "library").locked():
        pass


class _Sources:
    """Calibre as it is mid-reindex: book 2 was deleted after the plan was made. Local files are read as asked."""

    def __init__(self) -> None:
        self.local_ocr: list[OcrOptions] = []

    async def calibre(self, book_id: int, preference: object) -> str:
        if book_id == 2:
            raise NotFound("No book with id 2 in the Calibre library at /library; use alexandria_search to find a book's id.")
        return f"book {book_id}"

    async def local(self, file_path: str, title: str, author: str, language: str, ocr: OcrOptions) -> str:
        self.local_ocr.append(ocr)
        await asyncio.to_thread(ocr.progress, 1, 2)  # a page read, as extraction reports it from its thread
        return file_path


class _Ingestor:
    ocr = OcrOptions(max_pages=40, tessdata=Path("/srv/tessdata"))

    async def ingest(self, source: str, collection: str, params: object, hierarchical: bool, report: object) -> object:
        return SimpleNamespace(chunks=7)


async def test_a_book_deleted_from_calibre_during_the_reindex_is_gone_not_failed() -> None:
    plan = plan_reindex([book("a", calibre_id=1), book("b", calibre_id=2), book("c", calibre_id=3)], set(), {})
    reindex = CollectionReindex(None, _Sources(), _Ingestor(), Path("unused"))  # type: ignore[arg-type]

    rows = await reindex._rebuild(plan, "target", lambda *progress: None)

    assert [(row.book.title, row.status) for row in rows] == [("A", BatchStatus.SUCCESS), ("C", BatchStatus.SUCCESS)]
    assert [(g.book.book_key, g.reason) for g in plan.gone] == [("b", "deleted from Calibre during the reindex")]
    outcome = ReindexOutcome("library", NEW, OLD, plan, rows, swapped=True)
    assert outcome.failed == [] and "1 whose source is gone, 0 failed; 1 left out" in outcome.summary()


async def test_a_local_scan_is_read_again_with_the_services_ocr_settings_in_its_language() -> None:
    plan = plan_reindex([book("local:abc", file_path="/inbox/scan.pdf", language="deu")], set(), {})
    sources = _Sources()
    reindex = CollectionReindex(None, sources, _Ingestor(), Path("unused"))  # type: ignore[arg-type]
    heard: list[tuple[object, ...]] = []
    await reindex._rebuild(plan, "target", lambda *progress: heard.append(progress))
    assert [(o.max_pages, o.tessdata, o.language) for o in sources.local_ocr] == [(40, Path("/srv/tessdata"), "deu")]
    assert ("ocr", 1, 2, "ocr 1/2 pages") in heard, "each page read is progress: the stream is not given up on"
