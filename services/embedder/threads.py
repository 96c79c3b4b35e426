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
  (as fast on the same cores: 51 against 46 sentences/s on 2 cores), in Linux's SCHED_IDLE class:
  it uses every core nothing else wants, and a query thread that wakes takes a core from it at
  once. With nice +10 instead, a query's helper thread could wait a scheduler slice for a core at
  any of a pass's parallel regions (measured on 2 cores during a bulk embed: query p95 53 ms at
  nice +10, 20 ms in SCHED_IDLE, 13-14 ms idle). The cost: on a machine whose cores are always busy
  with other work, bulk embedding waits; give the embedder cores of its own for large ingests;
- the model is loaded (and its passes timed) in a thread that exits, taking its pool with it.
"""

from __future__ import annotations

import logging
import os
import sys
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


def run_only_on_idle_cores() -> None:
    """Put the calling thread, and the threads it starts later, in the SCHED_IDLE class (Linux only:
    elsewhere it is left as is, at its normal priority)."""
    if not sys.platform.startswith("linux"):
        log.info("bulk worker priority left as is: SCHED_IDLE is Linux's")
        return
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # 0: the calling thread
    except OSError as exc:  # a sandbox that filters the call: slower queries during ingest, nothing worse
        log.warning("bulk worker left at normal priority (%s): queries will be slower while books are embedded", exc)


def _set_up_worker(torch_threads: int, idle_cores_only: bool) -> None:
    if idle_cores_only:
        run_only_on_idle_cores()
    use_torch_threads(torch_threads)


def worker_setup(torch_threads: int, idle_cores_only: bool = False) -> Callable[[], None]:
    """What a model worker thread runs when it starts: its scheduling class, then its torch thread count."""
    return partial(_set_up_worker, torch_threads, idle_cores_only)
