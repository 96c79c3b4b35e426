"""Background merges: past tuning.SEGMENTS segments, a collection's smallest are merged in a child process
(merge_steps.py), one step after another on a thread of the store's, while the store answers and takes writes.

While a step's child runs, the collection takes writes as before. A point written again (a book ingested again,
a payload changed) gets a newer version than its copy in the merged segment, and a shard keeps the newest copy of
a point when it loads, so such writes need nothing more. The ids of the points deleted are kept, less those
written again since (a deletion by filter applied again after the swap would also delete those), and deleted
again from the merged segment. What is written meanwhile stays unindexed until the step ends (the engine's
optimizer could otherwise merge or vacuum the very segments the child reads), so writes wait for the step only
once they hold more vectors than one merge in the store's process makes (EMBEDDED_MAX_SEGMENT_MB).
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Protocol

from alexandria.store.embedded import merge_steps, tuning
from alexandria.store.embedded.shard_files import Segment
from alexandria.store.model import StoredPoint

log = logging.getLogger(__name__)


class MergedStore(Protocol):
    """What background merges need of the store whose collections they merge (by their own names)."""

    def write_lock(self, target: str) -> threading.Lock:
        """What each write of the collection `target` holds, and a merge while it stages or swaps its segments."""
        ...

    def flush(self, target: str) -> None:
        """Write what the collection's write-ahead log holds into its segments."""
        ...

    def segments(self, target: str) -> int:
        """The collection's segments, as last measured."""
        ...

    def swap_segments(self, target: str, move: Callable[[], None]) -> None:
        """Close the collection's shard once no thread uses it, `move` its segments, load it again, and index what
        was written meanwhile; the caller holds its write lock."""
        ...


@dataclass
class _Merge:
    """A collection's background merges: the thread that runs them one after another, and its child."""

    thread: threading.Thread
    cancelled: threading.Event = field(default_factory=threading.Event)
    process: subprocess.Popen[bytes] | None = None
    child_running: bool = False
    bytes_written: int = 0  # vectors upserted since the child started
    deleted_ids: set[str] = field(default_factory=set)
    # Held while the child is started or stopped, and while the fields above change; notified when a step ends.
    changed: threading.Condition = field(default_factory=threading.Condition)


class BackgroundMerges:
    """The background merges of the collections of one store, under `root`."""

    def __init__(self, store: MergedStore, root: Path, search_threads: int, max_segment_kb: int,
                 merged_segment_kb: int) -> None:
        self._store = store
        self._root = root
        self._search_threads = search_threads
        self._max_segment_bytes = max_segment_kb * 1000
        self._merged_bytes = merged_segment_kb * 1000
        self._under_way: dict[str, _Merge] = {}  # by the collection's own name

    @property
    def enabled(self) -> bool:
        """Whether collections are merged in the background at all (EMBEDDED_MERGED_SEGMENT_MB 0: never)."""
        return bool(self._merged_bytes)

    def start(self, target: str) -> None:
        """Start merging the smallest segments of `target`, one step after another while it has more than
        tuning.SEGMENTS, unless that is under way already. The store holds its shards' lock, and is open."""
        if (running := self._under_way.get(target)) and running.thread.is_alive():
            return
        thread = threading.Thread(target=self._merge_while_due, args=(target,), name=f"merge-{target}")
        self._under_way[target] = _Merge(thread)
        thread.start()

    def running(self, target: str) -> bool:
        """Whether segments of `target` are being merged."""
        merge = self._under_way.get(target)
        return merge is not None and merge.thread.is_alive()

    def child_running(self, target: str) -> bool:
        """Whether a step's child is merging copies of `target`'s segments now."""
        merge = self._under_way.get(target)
        return merge is not None and merge.child_running

    def make_room(self, target: str, points: list[StoredPoint]) -> None:
        """While a step's child runs, wait for it to end if the vectors written meanwhile (not indexed until it
        ends) would pass what one merge in the store's process makes; then count these."""
        merge = self._under_way.get(target)
        if merge is None:
            return
        written = sum(_vector_bytes(point) for point in points)
        with merge.changed:
            merge.changed.wait_for(lambda: not merge.child_running or merge.cancelled.is_set()
                                   or merge.bytes_written + written <= self._max_segment_bytes)
            if merge.child_running:
                merge.bytes_written += written

    def written_again(self, target: str, ids: Iterable[str]) -> None:
        """Points of these ids were written: a step's swap must not delete them again."""
        merge = self._under_way.get(target)
        if merge is not None:
            with merge.changed:
                merge.deleted_ids.difference_update(ids)

    def deleting(self, target: str, matching_ids: Callable[[], list[str]]) -> None:
        """Points are about to be deleted: while a step's child runs (it merges copies of them from before the
        deletion), keep their ids (`matching_ids`, called then only) for its swap to delete again."""
        merge = self._under_way.get(target)
        if merge is not None:
            with merge.changed:
                if merge.child_running:
                    merge.deleted_ids.update(matching_ids())

    def stop(self, target: str) -> None:
        """Stop the background merges of `target` and wait for their thread: a child stopped leaves the shard as
        it was."""
        merge = self._under_way.pop(target, None)
        if merge is None:
            return
        with merge.changed:
            merge.cancelled.set()
            if merge.process is not None and merge.process.poll() is None:
                merge.process.terminate()
            merge.changed.notify_all()
        merge.thread.join()

    def stop_all(self) -> None:
        for target in list(self._under_way):
            self.stop(target)

    def finish(self) -> None:
        """Wait until the merges under way, and those they lead to, are done."""
        for merge in list(self._under_way.values()):
            merge.thread.join()

    def _merge_while_due(self, target: str) -> None:
        merge = self._under_way[target]
        path = self._root / target
        work = self._root / merge_steps.MERGES_FOLDER / target
        try:
            self._merge_steps(target, merge, path, work)
        except Exception:
            if not merge.cancelled.is_set():  # a store closed or a collection dropped under it ends it by design
                log.exception("the background merge of %s stopped", target)
        finally:
            merge_steps.forget_unless_swapped(work)

    def _merge_steps(self, target: str, merge: _Merge, path: Path, work: Path) -> None:
        """Merge the smallest segments of `target`, one step after another while some are due."""
        while not merge.cancelled.is_set():
            with self._store.write_lock(target):
                self._store.flush(target)
                chosen = merge_steps.plan(path, tuning.SEGMENTS, self._merged_bytes)
                if not chosen:
                    return
                merge_steps.stage(path, chosen, work)
                started = time.perf_counter()
                megabytes = sum(s.vector_bytes for s in chosen) / 1e6
                log.info("merging %d of the %d segments of %s (%.0f MB of vectors) in the background", len(chosen),
                         self._store.segments(target), target, megabytes)
                with merge.changed:
                    if merge.cancelled.is_set():
                        return
                    # Its log goes where this process's does; stdout may be a protocol's (MCP over stdio).
                    merge.process = subprocess.Popen(
                        merge_steps.child_command(work, self._merged_bytes // 1000, tuning.INDEXING_THRESHOLD_KB,
                                                  self._search_threads),
                        stdout=subprocess.DEVNULL)
                    merge.child_running = True
            try:
                if merge.process.wait() != 0 or merge.cancelled.is_set():
                    if not merge.cancelled.is_set():
                        log.error("the merge of %s failed (exit status %d): its segments stay as they were", target,
                                  merge.process.returncode)
                    return
                with self._store.write_lock(target):
                    self._store.swap_segments(target, partial(self._swap_in, merge, path, work, chosen))
            finally:
                with merge.changed:
                    merge.child_running = False
                    merge.bytes_written = 0
                    merge.deleted_ids.clear()  # deleted already from the shard it merged from, which stays
                    merge.changed.notify_all()
            log.info("merged %d segments of %s (%.0f MB of vectors) in %.0f s: %d segments now", len(chosen), target,
                     megabytes, time.perf_counter() - started, self._store.segments(target))

    @staticmethod
    def _swap_in(merge: _Merge, path: Path, work: Path, chosen: list[Segment]) -> None:
        with merge.changed:
            deleted, merge.deleted_ids = merge.deleted_ids, set()
        merge_steps.swap_in(path, work, chosen, deleted)


def _vector_bytes(point: StoredPoint) -> int:
    """What the engine counts of a point against a segment's size (windows are stored in half precision)."""
    return point.dense.size * 4 + (0 if point.windows is None else point.windows.size * 2)
