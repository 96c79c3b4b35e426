"""How the embedder's threads share the CPU cores.

torch's CPU wheels run their parallel ops on GNU OpenMP (libgomp), which keeps a pool of helper
threads for every thread that has run a multi-threaded op, for as long as that thread lives. Once
a process holds more such helpers than it has cores, every pool stops spinning between parallel
regions and sleeps instead, and each of the hundreds of regions in a forward pass pays a wake-up:
measured on 2 cores, a one-query pass took 6.3 ms alone and 9.3 ms once a second, idle, pool
existed. So:
- exactly one thread runs torch on several cores: the query lane's worker, whose latency is what
  a search waits for;
- the bulk lane runs one single-threaded worker per core instead of one multi-threaded worker
  (as fast on the same cores: 51 against 46 sentences/s on 2 cores), at a lower priority;
- the model is loaded (and its passes timed) in a thread that exits, taking its pool with it.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from functools import partial

import torch

log = logging.getLogger(__name__)


def use_torch_threads(count: int) -> None:
    """Run the calling thread's torch CPU ops on `count` threads, whatever other threads use."""
    # torch gives a thread its count on the thread's first use, from the process-wide value that
    # any thread's set_num_threads overwrites: take that first use now, then set this thread's own.
    torch.get_num_threads()
    torch.set_num_threads(count)


def lower_thread_priority(nice: int) -> None:
    """Raise the calling thread's nice value by `nice`; threads it starts later inherit it (Linux only:
    elsewhere a nice value is per process, and the whole service would be slowed)."""
    if nice <= 0:
        return
    if not sys.platform.startswith("linux"):
        log.info("worker thread priority left as is: per-thread nice values need Linux")
        return
    thread_id = threading.get_native_id()
    os.setpriority(os.PRIO_PROCESS, thread_id, os.getpriority(os.PRIO_PROCESS, thread_id) + nice)


def _set_up_worker(torch_threads: int, nice: int) -> None:
    lower_thread_priority(nice)
    use_torch_threads(torch_threads)


def worker_setup(torch_threads: int, nice: int = 0) -> Callable[[], None]:
    """What a model worker thread runs when it starts: its priority, then its torch thread count."""
    return partial(_set_up_worker, torch_threads, nice)
