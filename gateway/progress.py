"""Long tools consume a service's server stream: Progress events become MCP progress
notifications, and the one result event becomes the tool's result.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from google.protobuf.message import Message
from mcp.server.mcpserver import Context

from alexandria.enums import enum_word
from alexandria.progress import follow
from alexandria.v1 import common_pb2, ingest_pb2

# MCP requires each notification's progress to exceed the last; a repeated value is nudged by this much.
_NUDGE = 1e-3


class ProgressRelay:
    """Forwards progress to the MCP client (a no-op when the client sent no progress token).

    A service reports each stage (extract, embed, write...) from 0 to its own total;
    MCP wants one value that only grows. So each new stage continues from where the
    last one ended, and the total is that offset plus the current stage's total.
    """

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._stage: str | None = None
        self._offset = 0.0
        self._last: float | None = None
        self._total: float | None = None

    async def progress(self, event: common_pb2.Progress) -> None:
        """Forward one Progress event."""
        if event.stage != self._stage:
            self._stage = event.stage
            self._offset = self._last or 0.0
        self._total = self._offset + event.total if event.total else None
        message = event.message or f"{event.stage} {event.done}/{event.total}"
        await self._send(self._offset + event.done, self._total, message)

    async def note(self, message: str) -> None:
        """Forward a line (a finished book of a batch) at the progress reached: the stage's own events count the
        work, so a note begins no stage (a batch's next event would then count its books done a second time)."""
        await self._send(self._last or 0.0, self._total, message)

    async def _send(self, value: float, total: float | None, message: str) -> None:
        if self._last is not None and value <= self._last:
            value = self._last + _NUDGE
        self._last = value
        await self._ctx.report_progress(value, total, message)


def describe_row(row: ingest_pb2.BatchIngestRow) -> str:
    """One human line for a finished book of a batch."""
    line = f"{row.title} (id {row.id}): {enum_word(ingest_pb2.BatchStatus.DESCRIPTOR, row.status)}"
    if row.chunks:
        line += f", {row.chunks} chunks"
    if row.HasField("error"):
        line += f": {row.error}"
    return line


async def stream_result(ctx: Context, stream: AsyncIterator[Any]) -> Message:
    """Relay a stream's progress (and batch rows) to the MCP client and return its result message."""
    relay = ProgressRelay(ctx)

    async def note_row(row: ingest_pb2.BatchIngestRow) -> None:
        await relay.note(describe_row(row))

    return await follow(stream, relay.progress, note_row)
