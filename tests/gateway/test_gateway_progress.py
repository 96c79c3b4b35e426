"""A tool's progress through the MCP SDK's own client: the services' progress events and batch rows become
progress notifications."""

from __future__ import annotations

import gateway_fakes as canned
import pytest
from mcp import Client

from gateway.app import Gateway


@pytest.mark.asyncio
async def test_progress_events_become_progress_notifications(served_gateway: Gateway) -> None:
    async with Client(served_gateway.mcp) as client:
        received: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            received.append((progress, total, message))

        result = await client.call_tool("alexandria_ingest", {"book_id": 1}, progress_callback=on_progress)
        assert not result.is_error and result.structured_content["chunks"] == 202
        assert [message for _, _, message in received] == [p.message for p in canned.PROGRESS]
        values = [progress for progress, _, _ in received]
        assert values == sorted(values) and len(set(values)) == len(values)


@pytest.mark.asyncio
async def test_batch_rows_are_forwarded_as_progress_messages(served_gateway: Gateway) -> None:
    async with Client(served_gateway.mcp) as client:
        messages: list[str | None] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            messages.append(message)

        await client.call_tool(
            "alexandria_batch_ingest", {"book_ids": [1, 2, 3]}, progress_callback=on_progress
        )
        assert "Zapisi s otoka (id 2): skipped" in messages
        assert "Storm (id 3): failed: No EPUB file on disk." in messages
