"""Waiting in a test for what another task, thread or process does, where it offers no event to wait on.

The one poll of the suite: `probe` is asked again every `interval_s` until `done` holds for its answer, and
past `timeout_s` the test fails naming what it waited for and the last answer it saw. Await `wait_until` on an
event loop (`probe` may be a coroutine function); call `wait_until_blocking` from a plain test or thread.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class _Deadline:
    def __init__(self, what: str, timeout_s: float) -> None:
        self.what = what
        self.timeout_s = timeout_s
        self.at = time.monotonic() + timeout_s

    def check(self, last: object) -> None:
        if time.monotonic() > self.at:
            seen = repr(last)
            raise AssertionError(
                f"waited {self.timeout_s:g} s for {self.what}; last seen: {seen[:500]}{'...' if len(seen) > 500 else ''}"
            )


async def wait_until(
    probe: Callable[[], T | Awaitable[T]],
    done: Callable[[T], Any] = bool,
    *,
    what: str,
    timeout_s: float = 10,
    interval_s: float = 0.02,
) -> T:
    """`probe()`'s first answer for which `done` holds (by default: the first true one)."""
    deadline = _Deadline(what, timeout_s)
    while True:
        answer = probe()
        value: T = await answer if inspect.isawaitable(answer) else answer  # type: ignore[assignment]
        if done(value):
            return value
        deadline.check(value)
        await asyncio.sleep(interval_s)


def wait_until_blocking(
    probe: Callable[[], T],
    done: Callable[[T], Any] = bool,
    *,
    what: str,
    timeout_s: float = 10,
    interval_s: float = 0.02,
) -> T:
    """`wait_until` for code off an event loop: sleeps between the tries."""
    deadline = _Deadline(what, timeout_s)
    while True:
        value = probe()
        if done(value):
            return value
        deadline.check(value)
        time.sleep(interval_s)
