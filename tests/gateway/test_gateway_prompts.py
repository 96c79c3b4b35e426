"""The guardians and response patterns, published as MCP prompts, also when the query service answers late."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from gateway_fakes import FakeBackend, gateway_settings, start_fake
from mcp import Client

from gateway.app import Gateway, create_app


@pytest.mark.asyncio
async def test_guardians_and_patterns_become_prompts(served_gateway: Gateway) -> None:
    async with Client(served_gateway.mcp) as client:
        await asyncio.wait_for(served_gateway.prompts_ready.wait(), timeout=10)
        names = {prompt.name for prompt in (await client.list_prompts(cache_mode="bypass")).prompts}
        assert {"guardian_zec", "guardian_ariadne", "pattern_tldr"} <= names
        prompt = await client.get_prompt("guardian_zec", {"question": "Who trims the lamp?"})
        text = prompt.messages[0].content.text
        assert (
            "Sharp and ironic" in text
            and 'guardian="zec"' in text
            and text.endswith("Question: Who trims the lamp?")
        )


@pytest.mark.asyncio
async def test_prompts_are_registered_once_a_late_query_service_answers(
    socket_dir: Path, backend: FakeBackend
) -> None:
    gateway = create_app(gateway_settings(socket_dir))
    async with Client(gateway.mcp) as client:
        assert (await client.list_prompts(cache_mode="bypass")).prompts == []
        query = await start_fake("query", socket_dir, backend)
        try:
            await asyncio.wait_for(gateway.prompts_ready.wait(), timeout=30)
            names = {prompt.name for prompt in (await client.list_prompts(cache_mode="bypass")).prompts}
            assert "pattern_tldr" in names
        finally:
            await query.stop(0)
