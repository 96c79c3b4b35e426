"""release_free_memory gives freed heap pages back to the system (glibc, as in the image and on Linux hosts)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from services.embedder.memory import release_free_memory

BLOCKS = 4000  # of 64 KB: 250 MB, each below malloc's mmap threshold, so all from the heap


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim; RSS from /proc")
def test_freed_heap_blocks_are_given_back() -> None:
    blocks = [np.ones(8192) for _ in range(BLOCKS)]
    top = np.ones(8192)  # in use above them: free() alone cannot shrink the heap past it
    del blocks
    kept = _rss_mb()
    assert release_free_memory()
    assert _rss_mb() < kept - 200
    assert top.sum() == 8192
