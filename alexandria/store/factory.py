"""Pick the store backend from the settings: the one place that decides."""

from __future__ import annotations

import getpass
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from alexandria.errors import FailedPrecondition, InvalidArgument, PermissionDenied
from alexandria.settings import MERGED_SEGMENT_MB, MIN_SEGMENT_MB, StoreSettings
from alexandria.store.common import disk_usage
from alexandria.store.model import CollectionLayout, Store


def open_store(settings: StoreSettings) -> Store:
    """A Qdrant server (or qdrant-client's local mode) when one is configured, else the embedded engine."""
    # Imported here: qdrant_client alone takes about a second to import, and the embedded
    # default never needs it.
    if settings.backend == "server":
        from alexandria.store.server import ServerStore

        return ServerStore.connect(settings)
    if server_only := settings.server_only_settings:
        raise FailedPrecondition(
            f"{', '.join(server_only)} shape a Qdrant server's collections, but no server is configured: the "
            "embedded store keeps each collection in one shard of this process, with a write-ahead log of its "
            "own. Set QDRANT_URL to use a server or cluster, or unset them."
        )
    from alexandria.store.embedded import EmbeddedStore

    return EmbeddedStore.open(settings.embedded_path, settings.search_threads, CollectionLayout.of(settings),
                              settings.embedded_max_segment_kb, settings.embedded_merged_segment_kb)


# How often a compaction says how far it got: at 10,000 books it runs for most of an hour.
PROGRESS_S = 60.0
_GB = 1024**3


def check_compactable(settings: StoreSettings, max_segment_mb: int) -> None:
    """Refuse, naming why, a compaction that `compact` could not do."""
    if max_segment_mb < MIN_SEGMENT_MB:
        raise InvalidArgument(f"A segment of {max_segment_mb} MB is too small to compact into: give at least "
                              f"{MIN_SEGMENT_MB} MB (default {MERGED_SEGMENT_MB}).")
    if settings.backend == "server":
        raise FailedPrecondition(
            "A Qdrant server merges its collections' segments itself, in the background, beside its searches; "
            "compacting is for the embedded store (unset QDRANT_URL)."
        )
    store = settings.embedded_path
    try:
        if not store.is_dir():
            raise FailedPrecondition(
                f"There is no embedded store at {store}: ALEXANDRIA_DATA_DIR={settings.alexandria_data_dir} holds "
                "none. Point ALEXANDRIA_DATA_DIR at the data folder the stack runs on."
            )
        unwritable = [path for path in (store, *store.rglob("*")) if not os.access(path, os.W_OK)]
    except PermissionError as denied:
        unwritable = [Path(denied.filename)]
    if unwritable:
        raise PermissionDenied(
            f"Compacting rewrites the store under {store}, and this user ({getpass.getuser()}) cannot write "
            f"{unwritable[0]}{f' and {len(unwritable) - 1} more' if len(unwritable) > 1 else ''}: run it as the "
            "user the stack runs as."
        )


@dataclass(frozen=True)
class Compaction:
    collection: str  # its own name, behind any alias
    segments_before: int
    segments_after: int
    seconds: float
    hnsw_ef: int  # what its dense searches visit from now on


def compact(settings: StoreSettings, max_segment_mb: int, report: Callable[[str], None] = lambda _: None) -> Compaction:
    """Merge the embedded collection QDRANT_COLLECTION into segments of up to `max_segment_mb` of vectors each.

    In this process, which the merge holds until it is done: the stack, which owns the store while it runs, must
    be stopped, or opening the store fails naming it. The merged segments stay as they are when the stack opens
    the store again with its own, smaller cap. `report` gets a line once every check has passed, then one every
    PROGRESS_S while the merges run. Its payload indexes are first made as a new collection's (on disk under
    QDRANT_ON_DISK). Its dense searches visit more candidates in its larger segments (EmbeddedStore.dense_search).
    """
    check_compactable(settings, max_segment_mb)
    from alexandria.store.embedded import EmbeddedStore, shard_segment_bytes, shard_segments

    store = open_store(settings.model_copy(update={"embedded_max_segment_mb": max_segment_mb,
                                                   "embedded_merged_segment_mb": 0}))
    assert isinstance(store, EmbeddedStore)  # the backend, checked above
    try:
        collection = settings.qdrant_collection
        target = store.collection_target(collection)
        shard = settings.embedded_path / target
        before = store.segment_count(collection)
        segment_bytes = shard_segment_bytes(shard)
        check_free_disk(target, shard, segment_bytes)
        report(f"compacting {target} under {settings.embedded_path} ({before} segments, {segment_bytes / _GB:.1f} GB) "
               f"into segments of up to {max_segment_mb} MB: on a large library, best left to run overnight")
        started = time.perf_counter()
        with reporting_progress(shard, segment_bytes, report):
            # Before the merges, so that the segments they write carry the indexes a new collection gets.
            store.lay_out_payload_indexes(collection)
            store.optimize(collection)
        seconds = time.perf_counter() - started
        hnsw_ef = store.dense_search(collection).hnsw_ef
    finally:
        store.close()
    # Counted closed: the segments a merge replaced are deleted when the shard closes.
    return Compaction(target, before, shard_segments(shard), seconds, hnsw_ef)


def check_free_disk(collection: str, shard: Path, segment_bytes: int) -> None:
    """Refuse a compaction the disk has no room for: it writes the whole collection again before the segments
    it replaced are deleted (when the shard closes)."""
    free = shutil.disk_usage(shard).free
    if free < segment_bytes:
        raise FailedPrecondition(
            f"Compacting '{collection}' writes its {segment_bytes / _GB:.1f} GB of segments again before it deletes "
            f"the old ones, and {shard.parent} has {free / _GB:.1f} GB free: free "
            f"{(segment_bytes - free) / _GB:.1f} GB more there (or move ALEXANDRIA_DATA_DIR to a larger disk), "
            "then compact again."
        )


@contextmanager
def reporting_progress(shard: Path, segment_bytes: int, report: Callable[[str], None]) -> Iterator[None]:
    """Every PROGRESS_S while the block runs, report how much of the collection the merges have written again."""
    start_bytes = disk_usage(shard)
    started = time.monotonic()
    finished = threading.Event()

    def watch() -> None:
        while not finished.wait(PROGRESS_S):
            written = max(0, disk_usage(shard) - start_bytes)
            report(f"{(time.monotonic() - started) / 60:.0f} min: {written / _GB:.1f} of about "
                   f"{segment_bytes / _GB:.1f} GB written again")

    watcher = threading.Thread(target=watch, name="compact-progress", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        finished.set()
        watcher.join()
