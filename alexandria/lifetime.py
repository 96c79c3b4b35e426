"""Processes that end with the process that started them, however it ends (Linux: the kernel's parent-death
signal, asked for by the child itself first thing: never between fork and exec, where a parent's other threads
make any work unsafe); elsewhere nothing is arranged."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def end_with_parent(signal_number: int, parent_pid: int) -> None:
    """Have `signal_number` sent to this process when its parent (`parent_pid`) dies; exit at once if it has died
    already (the process is then an orphan)."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal_number) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent_pid:
        sys.exit(1)


def end_with_launcher(launcher_pid: int | None) -> None:
    """Under `alexandria up` (its `--launcher-pid`), end as it stops a child, with SIGTERM, when
    it dies however it dies: a launcher killed, or whose terminal closed, leaves no process holding the gateway's
    port or the store."""
    if launcher_pid is not None:
        end_with_parent(signal.SIGTERM, launcher_pid)
