"""Progress of long work, as a stream: the work reports, the servicer yields.

`run_with_progress(work)` runs `work(report)` as a task and yields each Progress it
reports, then the work's result. If the client goes away, the task is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from alexandria.v1 import common_pb2

T = TypeVar("T")
Report = Callable[[str, int, int, str], None]


async def run_with_progress(work: Callable[[Report], Awaitable[T]]) -> AsyncIterator[common_pb2.Progress | T]:
    queue: asyncio.Queue[common_pb2.Progress | None] = asyncio.Queue()  # None: the work is done

    def report(stage: str, done: int, total: int, message: str = "") -> None:
        queue.put_nowait(common_pb2.Progress(stage=stage, done=done, total=total, message=message))

    async def run() -> T:
        try:
            return await work(report)
        finally:
            queue.put_nowait(None)

    task = asyncio.ensure_future(run())
    try:
        while (item := await queue.get()) is not None:
            yield item
        yield task.result()
    finally:
        if not task.done():
            task.cancel()

