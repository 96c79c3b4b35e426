"""The embedded store merges a collection past eight segments in a child process, while it answers (merge_steps.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from waiting import wait_until_blocking

from alexandria.errors import FailedPrecondition
from alexandria.store import Filter, StoredPoint, lexical
from alexandria.store import schema as f
from alexandria.store.embedded import EmbeddedStore, merge_steps, tuning
from alexandria.store.embedded.shard_files import segments_of
from alexandria.store.model import CollectionLayout
from store.synthetic import COLLECTION, DIMENSION, METADATA, axis, settings_for

POINTS_A_BOOK = 60


@pytest.fixture(autouse=True)
def each_book_its_own_segment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Segments indexed from 1 KB of vectors and merged in process up to 2 KB: each book of 60 points ends in a
    segment of its own, a large library's many segments in miniature."""
    monkeypatch.setattr(tuning, "INDEXING_THRESHOLD_KB", 1)


def _open(tmp_path: Path, merged_segment_kb: int) -> EmbeddedStore:
    return EmbeddedStore.open(settings_for("embedded", tmp_path).embedded_path, 2, CollectionLayout(),
                              max_segment_kb=2, merged_segment_kb=merged_segment_kb)


def _point_id(book: int, n: int) -> str:
    return f"00000000-0000-0000-{book:04d}-{n:012d}"


def _write_book(store: EmbeddedStore, book: int, version: int = 1) -> None:
    store.upsert(COLLECTION, [
        StoredPoint(_point_id(book, n), axis(n % DIMENSION), lexical.encode_document(f"word{n}"),
                    {f.BOOK_KEY: f"book-{book}", "n": n, "version": version})
        for n in range(POINTS_A_BOOK)
    ])
    store.optimize(COLLECTION)


def _answers_each_book(store: EmbeddedStore, books: int) -> None:
    for book in range(books):
        where = Filter(must={f.BOOK_KEY: f"book-{book}"})
        nearest = store.query_dense(COLLECTION, axis(7), where, 1)
        assert [(h.payload[f.BOOK_KEY], h.payload["n"] % DIMENSION) for h in nearest] == [(f"book-{book}", 7)]
        hits = store.query_sparse(COLLECTION, lexical.encode_query("word9"), where, 1)
        assert [(h.payload[f.BOOK_KEY], h.payload["n"]) for h in hits] == [(f"book-{book}", 9)]


def _merge_child(store: EmbeddedStore) -> subprocess.Popen[bytes]:
    """The child of the background merge under way, once it is started."""
    merge = store._merges._under_way[COLLECTION]
    wait_until_blocking(lambda: merge.process is not None or not merge.thread.is_alive(),
                        what="the background merge to start its child", timeout_s=60)
    assert merge.process is not None, "the background merge ended without starting a child"
    assert merge.process.poll() is None
    return merge.process


def _grown_without_merges(tmp_path: Path, books: int) -> Path:
    store = _open(tmp_path, merged_segment_kb=0)
    try:
        store.ensure_collection(COLLECTION, DIMENSION, METADATA)
        for book in range(books):
            _write_book(store, book)
        assert store.segment_count(COLLECTION) > 8
    finally:
        store.close()
    return settings_for("embedded", tmp_path).embedded_path


def test_a_collection_grown_past_eight_segments_is_merged_in_a_child_while_it_answers(tmp_path: Path) -> None:
    books = 14
    answered: list[list[tuple[str, int]]] = []
    failures: list[BaseException] = []
    writing = threading.Event()
    store = _open(tmp_path, merged_segment_kb=1000)
    store.ensure_collection(COLLECTION, DIMENSION, METADATA)
    _write_book(store, 0)

    def ask_all_along() -> None:
        while not writing.is_set() or store.merging(COLLECTION):
            try:
                hits = store.query_dense(COLLECTION, axis(7), Filter(must={f.BOOK_KEY: "book-0"}), 1)
                answered.append([(h.payload[f.BOOK_KEY], h.payload["n"] % DIMENSION) for h in hits])
            except BaseException as failure:  # noqa: BLE001 - any failure of a query beside a merge is the finding
                failures.append(failure)
            time.sleep(0.001)

    asker = threading.Thread(target=ask_all_along)
    asker.start()
    try:
        merged_while_writing = False
        for book in range(1, books):
            _write_book(store, book)
            merged_while_writing |= store.merging(COLLECTION)
        writing.set()
        store.finish_merges()
        asker.join()

        assert merged_while_writing
        assert failures == []
        assert len(answered) > 0 and all(answer == [("book-0", 7)] for answer in answered)
        assert store.segment_count(COLLECTION) <= 8
        assert store.count(COLLECTION) == books * POINTS_A_BOOK
        _answers_each_book(store, books)
        assert not (tmp_path / "store" / merge_steps.MERGES_FOLDER / COLLECTION).exists()
    finally:
        writing.set()
        asker.join()
        store.close()

    reopened = _open(tmp_path, merged_segment_kb=0)
    try:
        assert reopened.segment_count(COLLECTION) <= 8
        assert reopened.count(COLLECTION) == books * POINTS_A_BOOK
        _answers_each_book(reopened, books)
    finally:
        reopened.close()


def test_closing_the_store_stops_a_merge_and_leaves_the_collection_as_it_was(tmp_path: Path) -> None:
    root = _grown_without_merges(tmp_path, books=10)
    store = _open(tmp_path, merged_segment_kb=1000)
    _write_book(store, 10)  # its optimize starts a merge
    assert store.merging(COLLECTION)
    store.close()

    reopened = _open(tmp_path, merged_segment_kb=0)
    try:
        assert reopened.count(COLLECTION) == 11 * POINTS_A_BOOK
        _answers_each_book(reopened, 11)
        assert not (root / merge_steps.MERGES_FOLDER / COLLECTION).exists()
    finally:
        reopened.close()


def test_a_swap_a_crash_stopped_is_completed_when_the_store_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _grown_without_merges(tmp_path, books=10)
    shard = root / COLLECTION
    before = len(segments_of(shard))
    chosen = merge_steps.plan(shard, 8, merged_bytes=10**9)
    assert len(chosen) >= 2
    work = root / merge_steps.MERGES_FOLDER / COLLECTION
    merge_steps.stage(shard, chosen, work)
    subprocess.run(merge_steps.child_command(work, merged_kb=10**6, indexing_threshold_kb=1, search_threads=1), check=True)

    def crash(*args: object, **kwargs: object) -> None:
        raise OSError("the machine stopped")

    # Book 3 was removed while the child merged (from the owner's segments: not here, where no owner ran), so the
    # merged segment holds it still.
    removed = [_point_id(3, n) for n in range(POINTS_A_BOOK)]
    with monkeypatch.context() as crashing:
        crashing.setattr(merge_steps.shutil, "rmtree", crash)
        with pytest.raises(OSError, match="stopped"):
            merge_steps.swap_in(shard, work, chosen, removed)
    # The merged segment is in, beside the ones it replaces: each point twice on disk.
    assert len(segments_of(shard)) == before + 1

    store = _open(tmp_path, merged_segment_kb=0)
    try:
        assert store.segment_count(COLLECTION) == before - len(chosen) + 1
        assert store.count(COLLECTION) == 9 * POINTS_A_BOOK
        assert store.count(COLLECTION, Filter(must={f.BOOK_KEY: "book-3"})) == 0
        _answers_each_book(store, 3)
        assert not work.exists()
    finally:
        store.close()


def test_a_swap_that_fails_midway_is_completed_and_the_collection_answers_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _grown_without_merges(tmp_path, books=10)
    rmtree = merge_steps.shutil.rmtree
    failed: list[str] = []

    def fails_once_in_the_shard(path: str | Path, *args: object, **kwargs: object) -> None:
        if merge_steps.MERGES_FOLDER not in str(path) and not failed:
            failed.append(str(path))
            raise OSError("the disk said no, once")
        rmtree(path, *args, **kwargs)

    monkeypatch.setattr(merge_steps.shutil, "rmtree", fails_once_in_the_shard)
    store = _open(tmp_path, merged_segment_kb=1000)
    try:
        _write_book(store, 10)  # its optimize starts a merge
        store.finish_merges()
        assert failed, "the swap met the failure"
        assert store.count(COLLECTION) == 11 * POINTS_A_BOOK
        _answers_each_book(store, 11)
        assert store.segment_count(COLLECTION) <= 8
        _write_book(store, 11)
        assert store.count(COLLECTION) == 12 * POINTS_A_BOOK
    finally:
        store.close()


def test_a_second_process_opening_the_store_leaves_the_owners_merge_alone(tmp_path: Path) -> None:
    _grown_without_merges(tmp_path, books=10)
    store = _open(tmp_path, merged_segment_kb=1000)
    try:
        _write_book(store, 10)  # its optimize starts a merge
        child = _merge_child(store)
        work = settings_for("embedded", tmp_path).embedded_path / merge_steps.MERGES_FOLDER / COLLECTION
        staged = sorted(path.name for path in (work / "segments").iterdir())
        with pytest.raises(FailedPrecondition, match="Another process holds the store at"):
            _open(tmp_path, merged_segment_kb=1000)
        assert child.poll() is None or child.returncode == 0
        assert sorted(path.name for path in (work / "segments").iterdir())[: len(staged)] == staged
        store.finish_merges()
        assert store.count(COLLECTION) == 11 * POINTS_A_BOOK
        assert store.segment_count(COLLECTION) <= 8
    finally:
        store.close()


def test_a_plan_takes_the_smallest_sealed_segments_that_fit_and_none_below_the_count(tmp_path: Path) -> None:
    shard = _grown_without_merges(tmp_path, books=10) / COLLECTION
    segments = segments_of(shard)
    sealed = sorted((s for s in segments if s.sealed), key=lambda s: s.vector_bytes)
    assert merge_steps.plan(shard, most_segments=len(segments), merged_bytes=10**9) == []
    assert merge_steps.plan(shard, 8, merged_bytes=10**9) == sealed
    two = sealed[0].vector_bytes + sealed[1].vector_bytes
    assert merge_steps.plan(shard, 8, merged_bytes=two) == sealed[:2]
    assert merge_steps.plan(shard, 8, merged_bytes=sealed[0].vector_bytes) == []  # one alone is no merge


def test_a_book_removed_during_a_merge_is_gone_at_once_and_stays_gone_after_the_swap(tmp_path: Path) -> None:
    _grown_without_merges(tmp_path, books=10)
    store = _open(tmp_path, merged_segment_kb=1000)
    try:
        _write_book(store, 10)  # its optimize starts a merge
        assert store.merging(COLLECTION)
        assert store.collection_storage(COLLECTION).search_note.endswith(
            "its smallest segments are being merged in the background (past 8 segments): books written meanwhile are "
            "indexed once it ends")
        assert store.delete(COLLECTION, Filter(must={f.BOOK_KEY: "book-3"})) == POINTS_A_BOOK
        assert store.merging(COLLECTION)  # the removal did not wait for it
        assert store.count(COLLECTION, Filter(must={f.BOOK_KEY: "book-3"})) == 0
        store.finish_merges()
        assert store.count(COLLECTION) == 10 * POINTS_A_BOOK
        assert store.query_dense(COLLECTION, axis(7), Filter(must={f.BOOK_KEY: "book-3"}), 1) == []
        assert store.segment_count(COLLECTION) <= 8
    finally:
        store.close()


def test_a_book_removed_then_written_again_during_a_merge_keeps_its_new_copy_after_the_swap(tmp_path: Path) -> None:
    # A book removed and ingested again (same ids): the removal is not applied again to the new copy at the swap.
    # Nor is an ingest's first step, the deletion of the book's points not yet complete, to those it writes next.
    _grown_without_merges(tmp_path, books=10)
    store = _open(tmp_path, merged_segment_kb=1000)
    try:
        _write_book(store, 10)  # its optimize starts a merge of every sealed segment
        child = _merge_child(store)
        assert store.delete(COLLECTION, Filter(must={f.BOOK_KEY: "book-3"})) == POINTS_A_BOOK
        _write_book(store, 3, version=2)
        assert store.delete(COLLECTION, Filter(must={f.BOOK_KEY: "book-5"})) == POINTS_A_BOOK
        assert child.poll() is None
        store.finish_merges()
        assert store.count(COLLECTION, Filter(must={f.BOOK_KEY: "book-3", "version": 2})) == POINTS_A_BOOK
        assert store.count(COLLECTION, Filter(must={f.BOOK_KEY: "book-5"})) == 0
        assert store.count(COLLECTION) == 10 * POINTS_A_BOOK
        _answers_each_book(store, 5)
    finally:
        store.close()


def test_books_written_during_a_merge_are_found_at_once_and_once_after_the_swap(tmp_path: Path) -> None:
    _grown_without_merges(tmp_path, books=10)

    def copies(store: EmbeddedStore, book: int, version: int) -> int:
        return store.count(COLLECTION, Filter(must={f.BOOK_KEY: f"book-{book}", "version": version}))

    store = _open(tmp_path, merged_segment_kb=1000)
    try:
        _write_book(store, 10)  # its optimize starts a merge of every sealed segment
        child = _merge_child(store)
        _write_book(store, 3, version=2)  # a newer copy of points the child is merging
        store.set_payload(COLLECTION, Filter(must={f.BOOK_KEY: "book-4"}), {"version": 3})
        assert child.poll() is None  # neither waited for it
        assert (copies(store, 3, 2), copies(store, 3, 1), copies(store, 4, 3)) == (POINTS_A_BOOK, 0, POINTS_A_BOOK)
        # Past what one merge in this process makes (2 KB of vectors here, a book 1.9), a write waits for the step.
        _write_book(store, 11)
        assert child.poll() is not None
        store.finish_merges()
        assert store.count(COLLECTION) == 12 * POINTS_A_BOOK
        assert (copies(store, 3, 2), copies(store, 4, 3)) == (POINTS_A_BOOK, POINTS_A_BOOK)
        _answers_each_book(store, 12)
        assert store.segment_count(COLLECTION) <= 8
    finally:
        store.close()

    reopened = _open(tmp_path, merged_segment_kb=0)
    try:
        assert reopened.count(COLLECTION) == 12 * POINTS_A_BOOK
        assert (copies(reopened, 3, 2), copies(reopened, 4, 3)) == (POINTS_A_BOOK, POINTS_A_BOOK)
    finally:
        reopened.close()


def test_a_merge_child_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    _grown_without_merges(tmp_path, books=10)
    owner = subprocess.Popen([sys.executable, "-c", f"""
import sys, time
sys.path[:0] = {sys.path!r}
from alexandria.store.embedded import tuning
from test_merging import _open, _write_book
from pathlib import Path
tuning.INDEXING_THRESHOLD_KB = 1
store = _open(Path({str(tmp_path)!r}), merged_segment_kb=1000)
_write_book(store, 10)
merge = next(iter(store._merges._under_way.values()))
while merge.process is None:
    time.sleep(0.01)
pid = merge.process.pid
# Past its start: the child asks to die with its parent before it maps the staged segments' files.
while {merge_steps.MERGES_FOLDER!r} not in Path(f"/proc/{{pid}}/maps").read_text():
    time.sleep(0.01)
print(pid, flush=True)
time.sleep(60)
"""], stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parent)
    assert owner.stdout is not None
    child = int(owner.stdout.readline())
    os.kill(child, signal.SIGSTOP)  # held mid-merge: left alone, it would stay
    owner.kill()  # no close, no cleanup: as a crash or the OOM killer would
    owner.wait()

    try:
        wait_until_blocking(lambda: not _running(child), what=f"the orphaned merge child {child} to exit",
                            interval_s=0.05)
    finally:
        if _running(child):
            os.kill(child, signal.SIGKILL)
    reopened = _open(tmp_path, merged_segment_kb=0)  # and the store is as it was
    try:
        assert reopened.count(COLLECTION) == 11 * POINTS_A_BOOK
    finally:
        reopened.close()


def _running(pid: int) -> bool:
    """Whether `pid` is a process that has not exited (a zombie has)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
