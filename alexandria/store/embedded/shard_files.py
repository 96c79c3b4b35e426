"""What the store reads from a shard's folder: the engine's record of the shard, its segments and their sizes."""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import qdrant_edge as edge

from alexandria.store.common import disk_usage
from alexandria.store.embedded.conversions import SPARSE_VECTORS
from alexandria.store.model import DENSE, SPARSE, WINDOWS

log = logging.getLogger(__name__)

# qdrant-edge's own record of a shard's config, in the shard's folder (rewritten whenever it loads it).
ENGINE_CONFIG = "edge_config.json"
SEGMENTS = "segments"
# Where qdrant-edge builds a merged segment before it moves it among the shard's segments.
_MERGES_IN_PROGRESS = "temp_segments"
# What the engine counts against its segment size caps: the dense vectors and the windows beside them.
_SIZED_VECTORS = (DENSE, WINDOWS)


@dataclass(frozen=True)
class Segment:
    path: Path
    vector_bytes: int
    sealed: bool  # indexed by the optimizer: no write lands in it, only deletions


def segments_of(shard_path: Path) -> list[Segment]:
    """The shard's segments, with the bytes of their vectors and whether they are sealed."""
    found = []
    for path in sorted((shard_path / SEGMENTS).iterdir()):
        if not path.is_dir():
            continue
        config = json.loads((path / "segment.json").read_text(encoding="utf-8"))["config"]
        sealed = config["vector_data"][DENSE]["index"]["type"] == "hnsw"
        # Blocks, not file sizes: the engine makes the windows' files 32 MB long, and fills them as it goes.
        found.append(Segment(path, sum(disk_usage(path / f"vector_storage-{name}") for name in _SIZED_VECTORS),
                             sealed))
    return found


def shard_segments(shard_path: Path) -> int:
    """The segments in the shard at `shard_path`; ones a merge replaced may stay listed until it is closed."""
    return sum(1 for segment in (shard_path / SEGMENTS).iterdir() if segment.is_dir())


def shard_segment_bytes(shard_path: Path) -> int:
    """The bytes on disk of the segments of the shard at `shard_path` (its write-ahead log apart)."""
    return disk_usage(shard_path / SEGMENTS)


def load_config(path: Path, optimizers: edge.EdgeOptimizersConfig, search_threads: int) -> edge.EdgeConfig:
    """What the shard at `path` is loaded with: these search threads and optimizers; its vectors as it was made.

    qdrant-edge wants one vector family in a config, checks the dense ones against the shard's, but
    records the sparse ones given as the shard's own, for the segments it makes next: so they are the
    shard's own, read back from its record (collections made before the lexical index could be kept
    on disk have it in RAM).
    """
    recorded = engine_config(path)["sparse_vectors"][SPARSE]
    return edge.EdgeConfig(
        sparse_vectors=SPARSE_VECTORS[recorded.get("memory") == "cold"],
        optimizers=optimizers,
        max_search_threads=search_threads,
    )


def engine_config(shard_path: Path) -> dict[str, Any]:
    """qdrant-edge's own record of the shard at `shard_path` (its JSON form)."""
    config: dict[str, Any] = json.loads((shard_path / ENGINE_CONFIG).read_text(encoding="utf-8"))
    return config


def quantization_of(engine_config: dict[str, Any]) -> str:
    """The quantisation word of the dense vectors in the engine's record of a shard (its JSON form)."""
    dense = engine_config.get("vectors", {}).get(DENSE, {})
    quantization = dense.get("quantization_config") or engine_config.get("quantization_config")
    if not quantization:
        return "none"
    kind = next(iter(quantization))  # the engine writes {"scalar": {...}}, {"binary": {...}} or {"product": ...}
    return "int8" if kind == "scalar" else str(kind)


def remove_interrupted_merges(shard_path: Path) -> None:
    """Delete the segments a merge was still building when its process died (a stopped `alexandria compact`
    leaves gigabytes there), as a Qdrant server does when it loads a shard; qdrant-edge leaves them. Only
    once the shard is loaded: its lock then says no other process is merging into that folder."""
    builds = shard_path / _MERGES_IN_PROGRESS
    left = list(builds.iterdir()) if builds.is_dir() else []
    if not left:
        return
    size = disk_usage(builds)
    for build in left:  # the folder itself is the engine's
        if build.is_dir():
            shutil.rmtree(build)
        else:
            build.unlink()
    log.warning("removed %.1f MB of segments an interrupted merge left in %s", size / 1024**2, builds)
