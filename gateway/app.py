"""The MCP server: tools, prompts, and the service clients its lifespan opens once.

`create_app(settings)` builds a `Gateway`; its `mcp` (an `MCPServer`) serves stdio
directly and Streamable HTTP through `gateway.http`, from the same tool definitions.
Guardians and response patterns become MCP prompts as soon as the query service
answers: fetched at start-up, retried in the background while it is not up yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from importlib.metadata import version
from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver.prompts.base import Prompt
from pydantic import Field

from alexandria.clients import ServiceClient
from alexandria.errors import AlexandriaError, Unavailable
from alexandria.settings import GatewaySettings
from alexandria.v1 import query_pb2
from gateway.backends import Backends
from gateway.shutdown import ToolCalls
from gateway.tools import GatewayTool, Scope, build_tools

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
Alexandria searches inside the user's own ebook library (Calibre and local files).
- Questions about what the books say: alexandria_query (then follow its response_instruction and cite book
  and chapter). Finding books by title, author or tags: alexandria_search, alexandria_book.
- What is available: alexandria_stats. Personas for answers: alexandria_guardians.
- Adding books: alexandria_ingest_preview, then alexandria_test_chunking or alexandria_compare_chunking to
  choose parameters, then alexandria_ingest or alexandria_batch_ingest. Local files: alexandria_browse_local,
  alexandria_ingest_file. alexandria_remove takes a book out again (e.g. to re-ingest it differently).
"""

# Waits between attempts to fetch the prompts while the query service is not up.
PROMPT_RETRY_FIRST_S = 0.5
PROMPT_RETRY_MAX_S = 30.0


class Gateway:
    """The MCP server, its tools, and (while it runs) the backends; what `create_app` returns."""

    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        self.calls = ToolCalls(settings.gateway_shutdown_grace_s)
        self.tools: list[GatewayTool] = build_tools(settings.gateway_max_arg_chars, self.calls)
        # Set while the lifespan runs, for the HTTP health endpoint.
        self.backends: Backends | None = None
        self.prompts_ready = asyncio.Event()
        self.mcp: MCPServer[Backends] = MCPServer(
            "alexandria",
            title="Alexandria",
            instructions=INSTRUCTIONS,
            version=version("alexandria"),
            tools=list(self.tools),
            lifespan=self._lifespan,
            # Each connection's lifespan may fetch the prompts; the first to register them wins.
            warn_on_duplicate_prompts=False,
        )

    def scope_of(self, tool_name: str) -> Scope | None:
        """The auth scope a tool needs; None for a name that is not one of the tools."""
        return next((tool.scope for tool in self.tools if tool.name == tool_name), None)

    @contextlib.asynccontextmanager
    async def _lifespan(self, _server: MCPServer[Backends]) -> AsyncIterator[Backends]:
        backends = Backends.open(self.settings)
        self.backends = backends
        loader = asyncio.create_task(self._load_prompts(backends.query))
        try:
            yield backends
        finally:
            loader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loader
            if self.backends is backends:
                self.backends = None
            await backends.close()

    async def _load_prompts(self, query: ServiceClient) -> None:
        delay = PROMPT_RETRY_FIRST_S
        while True:
            try:
                guardians = await query.call("ListGuardians", query_pb2.ListGuardiansRequest())
                patterns = await query.call("ListResponsePatterns", query_pb2.ListResponsePatternsRequest())
                break
            except AlexandriaError as exc:
                level = logging.INFO if isinstance(exc, Unavailable) else logging.WARNING
                log.log(level, "prompts not loaded yet (%s); retrying in %.1f s", type(exc).__name__, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, PROMPT_RETRY_MAX_S)
        register_prompts(self.mcp, guardians, patterns)
        self.prompts_ready.set()


Question = Annotated[str, Field(description="The question to ask the library (optional).")]


def register_prompts(
    mcp: MCPServer[Backends],
    guardians: query_pb2.ListGuardiansResponse,
    patterns: query_pb2.ListResponsePatternsResponse,
) -> None:
    """One prompt per guardian (`guardian_<id>`) and per response pattern (`pattern_<id>`)."""
    for guardian in guardians.guardians:
        mcp.add_prompt(
            Prompt.from_function(
                _guardian_prompt(guardian),
                name=f"guardian_{guardian.id}",
                title=f"{guardian.emoji} {guardian.name}".strip(),
                description=f"Answer as {guardian.name}, {guardian.role}. {guardian.greeting}".strip(),
            )
        )
    for pattern in patterns.patterns:
        mcp.add_prompt(
            Prompt.from_function(
                _pattern_prompt(pattern),
                name=f"pattern_{pattern.id}",
                title=pattern.name,
                description=f"{pattern.category}: {pattern.description}"
                if pattern.category
                else pattern.description,
            )
        )
    log.info(
        "registered %d guardian and %d response pattern prompts",
        len(guardians.guardians),
        len(patterns.patterns),
    )


def _with_question(text: str, question: str) -> str:
    return f"{text}\n\nQuestion: {question}" if question else text


def _guardian_prompt(guardian: query_pb2.Guardian) -> Callable[..., str]:
    text = (
        f"You are {guardian.name} {guardian.emoji}, {guardian.role}.\n\n{guardian.personality_prompt}\n\n"
        f'Answer from the Alexandria library: call alexandria_query with guardian="{guardian.id}", follow the '
        "response_instruction it returns, and cite book and chapter."
    )

    def render(question: Question = "") -> str:
        return _with_question(text, question)

    return render


def _pattern_prompt(pattern: query_pb2.ResponsePattern) -> Callable[..., str]:
    text = (
        f"{pattern.instruction}\n\n"
        f'Find the passages with alexandria_query(response_pattern="{pattern.id}") and shape the answer as above.'
    )

    def render(question: Question = "") -> str:
        return _with_question(text, question)

    return render


def create_app(settings: GatewaySettings) -> Gateway:
    """The gateway for these settings; serve `gateway.mcp` over stdio or `gateway.http.create_http_app`."""
    return Gateway(settings)
