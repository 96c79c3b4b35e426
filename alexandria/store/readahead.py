"""Random-read advice for the engine's mappings of a collection's window vectors, in the process that serves it.

qdrant-edge maps each storage file twice, one mapping advised for sequential reads and one for random reads,
and it reads a point's windows (a multivector, in chunk files) through the sequential one (advising that one
random is what changed the figures below). So each candidate whose windows a search scores faults in the
kernel's whole readahead window around them. On a store larger than the page cache (10,008 books, 22 GB, one
process held to 4.4 GB), scoring a search's 70 candidates' windows took 65 ms p50, and the pages it read pushed
the rest of the store's hot pages out (the fused first stage 41 ms, against 17 with the memory free). Advised
random, the same reads took 4.4 ms and the first stage 16.8, the process never reaching its limit (CHANGELOG.md,
2026-11-28). The engine maps the files of each segment as it loads it, so the advice is
given again whenever the collection's segments may have changed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys
from collections.abc import Callable
from pathlib import Path

from alexandria.store.model import WINDOWS

log = logging.getLogger(__name__)

# <sys/mman.h> on Linux
_MADV_RANDOM = 1
# qdrant-edge's folder for a segment's window vectors (their chunks and offsets)
WINDOWS_STORAGE = f"vector_storage-{WINDOWS}"


def _madvise() -> Callable[[int, int, int], int] | None:
    """libc's madvise(address, length, advice), where the system lists a process's mappings in /proc."""
    if not sys.platform.startswith("linux"):
        return None
    madvise = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True).madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return madvise


_MADVISE = _madvise()


def read_windows_at_random(shard_path: Path) -> int:
    """Advise random reads on every mapping this process holds of the window vectors under `shard_path`; the
    number of mappings advised (0 where the system has no such advice)."""
    if _MADVISE is None:
        return 0
    under = f"{shard_path}/"
    advised = 0
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            if WINDOWS_STORAGE not in line:
                continue
            addresses, *_, path = line.rstrip("\n").split(maxsplit=5)
            if not path.startswith(under) or f"/{WINDOWS_STORAGE}/" not in path:
                continue
            start, end = (int(address, 16) for address in addresses.split("-"))
            if _MADVISE(start, end - start, _MADV_RANDOM) != 0:
                # A mapping unmapped since the line was read (a segment dropped meanwhile): nothing to advise.
                log.debug("madvise of %s failed: errno %d", path, ctypes.get_errno())
                continue
            advised += 1
    return advised
