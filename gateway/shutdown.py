"""Stopping without losing answers.

Once the gateway is asked to stop (SIGINT/SIGTERM), it takes no new tool calls and gives the ones
running a grace period (GATEWAY_SHUTDOWN_GRACE_S) to finish and answer. A call still running after it
is cancelled, down to the service, and answers with an error that says so: the client gets a result
or a clear error either way, never a dropped connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from alexandria.errors import Unavailable

T = TypeVar("T")


class ToolCalls:
    """The gateway's running tool calls and how they end when it stops."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.stopping = False
        self._grace_over = asyncio.Event()

    def stop(self) -> None:
        """Refuse new calls from now on, and cancel those still running once the grace period is over."""
        if not self.stopping:
            self.stopping = True
            asyncio.get_running_loop().call_later(self.grace_s, self._grace_over.set)

    async def run(self, tool: str, call: Callable[[], Awaitable[T]]) -> T:
        """What `call()` returns, unless the gateway stops and the grace period ends first."""
        if self.stopping:
            raise Unavailable("Alexandria is shutting down and takes no new calls; call again once it is back.")
        task = asyncio.ensure_future(call())
        grace_over = asyncio.ensure_future(self._grace_over.wait())
        try:
            done, _ = await asyncio.wait({task, grace_over}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()  # the client went away: so does the call
            raise
        finally:
            grace_over.cancel()
        if task in done:
            return task.result()
        task.cancel()
        await asyncio.wait({task})  # the cancellation reaches the service before the answer leaves
        raise Unavailable(
            f"Alexandria was stopped while {tool} ran, and the call did not finish within the "
            f"{self.grace_s:g} s grace period (GATEWAY_SHUTDOWN_GRACE_S), so it was cancelled. An ingest is "
            "never left half-written: the book is in the library whole or not at all "
            "(alexandria_ingest_preview shows which once Alexandria is back)."
        )
