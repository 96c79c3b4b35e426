"""Worker thread set-up: torch thread counts and CPU priority are the calling thread's own."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from services.embedder.threads import lower_thread_priority, use_torch_threads, worker_setup


def _in_a_new_thread(setup: Callable[[], None]) -> tuple[int, int]:
    """Run `setup` in a fresh thread; return that thread's torch thread count and nice value after it."""

    def set_up_and_look() -> tuple[int, int]:
        setup()
        return torch.get_num_threads(), os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    with ThreadPoolExecutor(max_workers=1) as executor:
        return executor.submit(set_up_and_look).result()


def test_each_thread_keeps_the_torch_thread_count_it_asked_for() -> None:
    ready, done = threading.Barrier(2), threading.Event()
    seen: dict[str, int] = {}

    def worker(name: str, count: int) -> None:
        use_torch_threads(count)
        ready.wait()  # both have set their counts: the last one also set the process-wide value
        seen[name] = torch.get_num_threads()
        done.wait()

    threads = [threading.Thread(target=worker, args=(name, count)) for name, count in (("one", 1), ("two", 2))]
    for thread in threads:
        thread.start()
    done.set()
    for thread in threads:
        thread.join()
    assert seen == {"one": 1, "two": 2}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
def test_a_niced_worker_leaves_the_calling_thread_as_it_was() -> None:
    here = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert _in_a_new_thread(lambda: lower_thread_priority(5))[1] == min(here + 5, 19)
    assert _in_a_new_thread(worker_setup(1, nice=3)) == (1, min(here + 3, 19))
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == here
