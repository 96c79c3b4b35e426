"""Calling tools the way an MCP client does, and reading the contract's result back."""

from __future__ import annotations

from typing import Any

from mcp import Client


async def call(client: Client, tool: str, arguments: dict[str, Any] | None = None, progress: list | None = None):
    """(structured result, is_error) of one tool call; progress notifications appended to `progress`."""

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    result = await client.call_tool(tool, arguments or {}, progress_callback=on_progress if progress is not None else None)
    return result.structured_content, result.is_error
