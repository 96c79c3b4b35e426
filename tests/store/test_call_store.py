"""call_store: a thread hop only where the store lets the loop run meanwhile."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

import pytest

from alexandria.store import call_store, finish_before_cancel, open_store
from store.synthetic import settings_for


@dataclass
class ThreadRecordingStore:
    holds_gil: bool

    def whose_thread(self, suffix: str) -> str:
        return f"{threading.current_thread().name}{suffix}"


@pytest.mark.parametrize(("holds_gil", "inline"), [(True, True), (False, False)])
def test_a_store_that_holds_the_gil_is_called_inline_else_in_a_thread(holds_gil: bool, inline: bool) -> None:
    store = ThreadRecordingStore(holds_gil)

    async def call() -> str:
        return await call_store(store, store.whose_thread, suffix="!")

    answer = asyncio.run(call())
    assert answer.endswith("!")
    assert (answer == f"{threading.current_thread().name}!") is inline


@pytest.mark.parametrize(("backend", "holds_gil"), [("embedded", True), ("server", False)])
def test_the_embedded_engine_holds_the_gil_and_a_server_client_does_not(backend, holds_gil, tmp_path) -> None:
    store = open_store(settings_for(backend, tmp_path))
    try:
        assert store.holds_gil is holds_gil
    finally:
        store.close()


def test_a_write_whose_caller_is_cancelled_is_waited_for_before_the_cancellation_goes_on() -> None:
    started, release = threading.Event(), threading.Event()

    def write() -> int:
        started.set()
        assert release.wait(10)
        return 3

    async def cancelled_twice_then_released() -> list[str]:
        seen = []
        writer = asyncio.ensure_future(finish_before_cancel(asyncio.to_thread(write)))
        assert await asyncio.to_thread(started.wait, 10)
        for _ in range(2):  # a client that goes away, then a shutdown
            writer.cancel()
            await asyncio.sleep(0.05)
            seen.append("waiting" if not writer.done() else "gone")
        release.set()
        try:
            await writer
        except asyncio.CancelledError:
            seen.append("cancelled once written")
        return seen

    assert asyncio.run(cancelled_twice_then_released()) == ["waiting", "waiting", "cancelled once written"]
    assert asyncio.run(finish_before_cancel(asyncio.to_thread(lambda: 5))) == 5
