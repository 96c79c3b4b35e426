"""Worker thread set-up: torch thread counts and scheduling class are the calling thread's own."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from services.embedder.threads import run_only_on_idle_cores, use_torch_threads, worker_setup


def _in_a_new_thread(setup: Callable[[], None]) -> tuple[int, int]:
    """Run `setup` in a fresh thread; return that thread's torch thread count and scheduling class after it."""

    def set_up_and_look() -> tuple[int, int]:
        setup()
        return torch.get_num_threads(), os.sched_getscheduler(0)

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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SCHED_IDLE is Linux's")
def test_a_bulk_worker_runs_on_idle_cores_only_and_leaves_the_calling_thread_as_it_was() -> None:
    here = os.sched_getscheduler(0)
    assert _in_a_new_thread(run_only_on_idle_cores)[1] == os.SCHED_IDLE
    assert _in_a_new_thread(worker_setup(1, idle_cores_only=True)) == (1, os.SCHED_IDLE)
    assert _in_a_new_thread(worker_setup(2)) == (2, here)
    assert os.sched_getscheduler(0) == here


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SCHED_IDLE is Linux's")
def test_a_sandbox_that_refuses_sched_idle_leaves_the_worker_running_at_normal_priority(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refused(*args: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refused)
    assert _in_a_new_thread(worker_setup(1, idle_cores_only=True)) == (1, os.sched_getscheduler(0))
    assert "normal priority" in caplog.text
