"""Progress as the services stream it, and as people see it.

Long calls (ingest, batch, chunking tests) are server streams of events: progress, batch rows,
then one result. `follow` is the one consumer of such a stream (the gateway relays what it sees to
the MCP client, the CLI draws it); `progress_bar` is the text bar the contract shows
(`[██████░░░░] 60%`) in tool results and the CLI.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import Any

from google.protobuf.message import Message

from alexandria.errors import InternalError
from alexandria.v1 import common_pb2, ingest_pb2


def progress_bar(fraction: float, width: int = 20) -> str:
    fraction = max(0.0, min(1.0, fraction))
    filled = round(width * fraction)
    return f"[{'█' * filled}{'░' * (width - filled)}] {fraction:.0%}"


async def _ignore(_message: Message) -> None:
    return None


async def follow(
    stream: AsyncGenerator[Any, None],
    on_progress: Callable[[common_pb2.Progress], Awaitable[None]],
    on_row: Callable[[ingest_pb2.BatchIngestRow], Awaitable[None]] = _ignore,
) -> Message:
    """The result message of a service's event stream, passing each progress event and batch row on."""
    # Closing the generator ends the call at once if the result was not the last event.
    async with aclosing(stream):
        async for event in stream:
            kind = event.WhichOneof("event")
            if kind == "progress":
                await on_progress(event.progress)
            elif kind == "row":
                await on_row(event.row)
            elif kind == "result":
                result: Message = event.result
                return result
    raise InternalError("The service ended its stream without a result; the details are in its log. Try again.")
