"""A hypothetical passage from the client's own model, for a caller that did not write one (QUERY_SAMPLING).

alexandria_query finds far more answers when it is given what the answering passage might say
(hypothetical_passage; docs/retrieval.md). A client that declares MCP sampling can be asked to
write one: a short fixed prompt with the question (and the book's title when the call names one), a bounded
length. `ask_for_passage` is the tool's resolver (the SDK's `Resolve`), so the question reaches the client the way
its protocol version asks for input:

- before 2026-07-28, as a request the gateway sends mid-call: it is sent here, under GatewaySettings.query_sampling_timeout_s,
  and whatever goes wrong (a refusal, an error, the deadline) the search goes on without a passage;
- from 2026-07-28 on, as an input request in the call's result, which the client answers by calling again
  (the SDK's `Sample`): the client runs its model in its own time, and a client that declines ends its call.
"""

from __future__ import annotations

import asyncio
import logging
import warnings

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import Sample
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types import CreateMessageResult, SamplingMessage, TextContent
from mcp_types.version import is_version_at_least

from alexandria.contract import HYPOTHETICAL_PASSAGE_MAX_CHARS
from alexandria.errors import AlexandriaError
from alexandria.v1 import catalog_pb2
from gateway.backends import Backends, backends

log = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You help a search engine find a passage inside a book. Write one to three sentences as the passage that "
    "answers the question would read in the book itself: in the book's language, style, names and vocabulary, "
    "stating the answer as you expect the book to state it (what you remember of it, or what it plausibly says). "
    "Write only the passage: no preamble, no quotation marks, no comment."
)
# Three sentences, with room to spare; the text is cut to the tool's own bound besides.
MAX_TOKENS = 160
# The first protocol version that carries a server's questions in the call's result instead of a request.
INPUT_REQUIRED_VERSION = "2026-07-28"


def passage_prompt(query: str, book_title: str | None) -> str:
    book = f"The book: {book_title}\n" if book_title else ""
    return f"{book}The question: {query}"


async def ask_for_passage(
    ctx: Context, query: str, hypothetical_passage: str | None, book_id: int | None
) -> Sample | str | None:
    """What alexandria_query searches beside `query` when the caller gave no passage: the client's model's, or
    None when sampling is off (QUERY_SAMPLING), the caller gave one, or the client declares no sampling."""
    capabilities = ctx.client_capabilities
    services = backends(ctx)
    timeout_s = services.sampling_timeout_s
    if hypothetical_passage is not None or timeout_s is None or capabilities is None or capabilities.sampling is None:
        return None
    request = Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=passage_prompt(query, await _title(services, book_id))))],
        max_tokens=MAX_TOKENS, system_prompt=SYSTEM_PROMPT, temperature=0.0,
    )
    version = ctx.protocol_version
    if version is not None and is_version_at_least(version, INPUT_REQUIRED_VERSION):
        return request
    return await _sent_mid_call(ctx, request, timeout_s)


def sampled_text(sampled: CreateMessageResult | str | None) -> str | None:
    """The passage the client's model wrote, one line, within the tool's bound; None when it wrote none."""
    if isinstance(sampled, CreateMessageResult):
        sampled = sampled.content.text if isinstance(sampled.content, TextContent) else None
    return " ".join(sampled.split())[:HYPOTHETICAL_PASSAGE_MAX_CHARS] or None if sampled else None


async def _sent_mid_call(ctx: Context, request: Sample, timeout_s: float) -> str | None:
    """The client's answer to `request` sent as a request of its own, or None on any failure or after `timeout_s`."""
    try:
        # The request form of sampling is deprecated from 2026-07-28 on (SEP-2577): this is only for older clients.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            params = request.params
            result = await asyncio.wait_for(
                ctx.session.create_message(
                    params.messages, max_tokens=params.max_tokens, system_prompt=params.system_prompt,
                    temperature=params.temperature, related_request_id=ctx.request_id,
                ),
                timeout_s,
            )
    except TimeoutError:
        log.info("the client's model wrote no hypothetical passage within %.1f s; searching without one", timeout_s)
        return None
    except (MCPError, ValueError) as exc:  # a refusal, an error, no way back to the client (NoBackChannelError)
        log.info("the client's model gave no hypothetical passage (%s); searching without one", exc)
        return None
    return sampled_text(result)


async def _title(backends: Backends, book_id: int | None) -> str | None:
    """The title of the book a query is narrowed to, for the prompt (None when none is named, or it is unknown:
    the search will say so)."""
    if book_id is None:
        return None
    try:
        found = await backends.catalog.call("GetBook", catalog_pb2.GetBookRequest(book_id=book_id))
    except AlexandriaError:
        return None
    return f"{found.book.title} by {', '.join(found.book.authors)}" if found.book.authors else found.book.title
