"""Merging an embedded collection's segments in a child process, while the process that owns the store serves it.

qdrant-edge 0.9 holds the GIL through `optimize()`, so a merge in the serving process pauses every query for as
long as it runs: that process merges only up to EMBEDDED_MAX_SEGMENT_MB, and a collection that grows past that
ends up in many segments, each searched by every query (57 at 10,000 books). Merging them into fewer, larger ones
happens here instead, one step at a time, while the owner keeps answering from the segments it has:

1. the owner holds the collection's writes, flushes it, and picks the smallest sealed segments whose vectors fit
   in EMBEDDED_MERGED_SEGMENT_MB (`plan`);
2. it links their files into a work folder beside the store (`stage`: hard links, no copy of the data) and a child
   process opens that as a shard of its own and merges them into one segment (`main`). The child never changes
   the content of the files it shares with the owner (measured: every byte of them the same after a merge). The
   owner takes writes meanwhile: new points land in its unsealed segment, which the child does not read; a point
   written again gets a newer version than the child's copy, and a shard keeps a point's newest copy when it loads;
   the ids of the points deleted are recorded (less those written again since), to be deleted again from the merged
   segment, which still holds them;
3. the owner holds the writes again, closes its shard, moves the merged segment in and deletes the ones it replaces
   (`swap_in`, recorded first in a journal, with the deleted ids), loads the shard again and deletes those ids, then
   drops the journal (`forget`): queries wait for that reload alone. After a crash at any point of it, the next load
   of the shard does the same from the journal (`complete_swap`).

The disk a step takes is the merged segment's, a bounded part of the collection; its memory is the child's graph
build, for one merged segment.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Collection
from pathlib import Path

import qdrant_edge as edge

from alexandria.lifetime import end_with_parent
from alexandria.logs import configure_logging
from alexandria.store.common import write_json_atomically
from alexandria.store.embedded.conversions import to_edge_filter
from alexandria.store.embedded.deletions import delete_matching
from alexandria.store.embedded.shard_files import ENGINE_CONFIG, SEGMENTS, Segment, load_config, segments_of
from alexandria.store.model import Filter

log = logging.getLogger(__name__)

# Beside the collections in the store's root: a leading dot is never a collection name.
MERGES_FOLDER = ".merges"
_JOURNAL = "swap.json"
# The child runs beside the queries on the same cores: it yields to them.
_CHILD_NICENESS = 10


def plan(shard_path: Path, most_segments: int, merged_bytes: int) -> list[Segment]:
    """The segments to merge into one next: none while the shard has at most `most_segments`, else the smallest sealed
    ones, as many as fit together in `merged_bytes` of vectors (at least two)."""
    segments = segments_of(shard_path)
    if len(segments) <= most_segments:
        return []
    chosen: list[Segment] = []
    total = 0
    for segment in sorted((s for s in segments if s.sealed), key=lambda s: s.vector_bytes):
        if total + segment.vector_bytes > merged_bytes:
            break
        chosen.append(segment)
        total += segment.vector_bytes
    return chosen if len(chosen) >= 2 else []


def stage(shard_path: Path, segments: list[Segment], work: Path) -> None:
    """A shard in `work` made of hard links to `segments`' files and a copy of the engine's record of the shard."""
    shutil.rmtree(work, ignore_errors=True)
    (work / SEGMENTS).mkdir(parents=True)
    (work / "wal").mkdir()
    shutil.copy2(shard_path / ENGINE_CONFIG, work / ENGINE_CONFIG)
    for segment in segments:
        shutil.copytree(segment.path, work / SEGMENTS / segment.path.name, copy_function=os.link)


def swap_in(shard_path: Path, work: Path, replaced: list[Segment], deleted: Collection[str]) -> None:
    """Move the segment the child merged into the (closed) shard and delete those it replaces, journaled first with
    `deleted`, the ids deleted while the child ran (complete_swap). (The child also made an empty segment for writes,
    which no shard of the owner needs.)"""
    made = sorted(s.path.name for s in segments_of(work)
                  if s.sealed and not (shard_path / SEGMENTS / s.path.name).exists())
    journal = {"made": made, "replaced": sorted(s.path.name for s in replaced if s.path.name not in made),
               "deleted": sorted(deleted)}
    write_json_atomically(work / _JOURNAL, journal)
    complete_swap(shard_path, work)


def complete_swap(shard_path: Path, work: Path) -> list[str] | None:
    """Make the moves of the swap journaled in `work`, again where a crash stopped them midway (each can run twice),
    and return the ids to delete from the shard once it loads: deleted while the child merged, they are in the
    merged segment still. None when `work` holds no journaled swap (a merge that had not reached it: the shard is
    as it was). `work` stays until those deletions are made (`forget`)."""
    journal_path = work / _JOURNAL
    if not journal_path.is_file():
        return None
    journal = json.loads(journal_path.read_text(encoding="utf-8"))
    for name in journal["made"]:
        if (work / SEGMENTS / name).is_dir():
            os.replace(work / SEGMENTS / name, shard_path / SEGMENTS / name)
    for name in journal["replaced"]:
        shutil.rmtree(shard_path / SEGMENTS / name, ignore_errors=True)
    return list(journal.get("deleted", []))  # a journal of a release before deletions were journaled has none


def load_completing_swap(shard_path: Path, work: Path, load: Callable[[Path], edge.EdgeShard]) -> edge.EdgeShard:
    """The shard at `shard_path` as `load` loads it, once the swap journaled in `work` that a crash or a failure
    stopped midway is completed (complete_swap), and the points deleted while that merge's child ran are deleted
    again; `work` is forgotten then."""
    deleted = complete_swap(shard_path, work)
    shard = load(shard_path)
    if deleted:
        delete_matching(shard, to_edge_filter(Filter(ids=tuple(deleted))))
    forget(work)
    return shard


def forget(work: Path) -> None:
    """Remove a merge's work folder, its journal included."""
    shutil.rmtree(work, ignore_errors=True)


def forget_unless_swapped(work: Path) -> None:
    """Remove a merge's work folder unless it holds a swap's journal, which the next load of the shard completes."""
    if not (work / _JOURNAL).is_file():
        forget(work)


def child_command(work: Path, merged_kb: int, indexing_threshold_kb: int, search_threads: int) -> list[str]:
    """The command of the child process that merges the staged shard in `work` into one segment, indexed as the
    owner's segments are; the child ends with this process."""
    return [sys.executable, "-m", __name__, str(work), str(merged_kb), str(indexing_threshold_kb), str(search_threads),
            str(os.getpid())]


def main(argv: list[str]) -> None:
    """The child: open the staged shard, merge every segment in it into one, close it."""
    work, (merged_kb, indexing_threshold_kb, search_threads, parent_pid) = Path(argv[0]), map(int, argv[1:5])
    # An orphan would go on merging into the work folder that the store's next owner clears and stages again.
    end_with_parent(signal.SIGKILL, parent_pid)
    os.nice(_CHILD_NICENESS)
    # One segment wanted, and room for all the staged ones in it: the owner chose them to fit.
    optimizers = edge.EdgeOptimizersConfig(indexing_threshold=indexing_threshold_kb, default_segment_number=1,
                                           max_segment_size=2 * merged_kb)
    started = time.perf_counter()
    shard = edge.EdgeShard.load(str(work), load_config(work, optimizers, search_threads))
    shard.optimize()
    shard.close()
    log.info("merged %s in %.0f s", work, time.perf_counter() - started)


if __name__ == "__main__":
    configure_logging("merge")
    main(sys.argv[1:])
