"""Handing the memory a bulk embed freed back to the system.

A passage batch's tensors (64 windows of up to the model's length: hidden states of tens of MB a
layer) are freed when the batch ends, but glibc's malloc keeps freed blocks below its mmap threshold
(a threshold that rises, up to 32 MB, each time a larger block is freed) in the arena of the thread
that used them, and each bulk worker thread has an arena of its own: the process keeps every
worker's high-water mark for good. malloc_trim(0) returns the free pages of every arena.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None where the C library is not glibc (musl, macOS)."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_MALLOC_TRIM = _malloc_trim()
# How long the bulk lane stays idle before it gives memory back: longer than the gaps between the
# requests of one ingest, so that a book's batches do not fault the same pages in again and again.
IDLE_BEFORE_RELEASE_S = 1.0


def release_free_memory() -> bool:
    """Give the free pages of every malloc arena back to the system; False where malloc is not glibc's."""
    if _MALLOC_TRIM is None:
        return False
    _MALLOC_TRIM(0)
    return True
