"""Processes that end with the process that started them, however it ends (Linux: the kernel's parent-death
signal); elsewhere nothing is arranged."""

from __future__ import annotations

import ctypes
import os
import sys

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
# Looked up before any fork: a child between fork and exec must not take the dynamic loader's lock, which another
# thread of the parent may have held at the fork.
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def end_with_parent(signal_number: int, parent_pid: int) -> None:
    """Have `signal_number` sent to this process when its parent (`parent_pid`) dies; exit at once if it has died
    already (the process is then an orphan). Run in the child: first thing in its main, or between fork and exec."""
    if _PRCTL is None:
        return
    if _PRCTL(_PR_SET_PDEATHSIG, signal_number) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent_pid:
        os._exit(1)
