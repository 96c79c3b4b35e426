"""A hypothetical passage from the client's own model, for a caller that did not write one (QUERY_SAMPLING).

alexandria_query finds far more answers when it is given what the answering passage might say
(hypothetical_passage; the README's Retrieval quality). A client that declares MCP sampling can be asked to
write one: a short fixed prompt with the question (and the book's title when the call names one), a deadline,
a bounded length. Whatever goes wrong (no sampling, a refusal, an error, the deadline) the search goes on
without a passage: sampling can only help a query, never fail it.
"""

from __future__ import annotations

import asyncio
import logging
import warnings

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types import SamplingMessage, TextContent

from alexandria.contract import HYPOTHETICAL_PASSAGE_MAX_CHARS
from alexandria.errors import AlexandriaError
from alexandria.v1 import catalog_pb2
from gateway.backends import Backends

log = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You help a search engine find a passage inside a book. Write one to three sentences as the passage that "
    "answers the question would read in the book itself: in the book's language, style, names and vocabulary, "
    "stating the answer as you expect the book to state it (what you remember of it, or what it plausibly says). "
    "Write only the passage: no preamble, no quotation marks, no comment."
)
# Three sentences, with room to spare; the text is cut to the tool's own bound besides.
MAX_TOKENS = 160


def passage_prompt(query: str, book_title: str | None) -> str:
    book = f"The book: {book_title}\n" if book_title else ""
    return f"{book}The question: {query}"


async def sampled_passage(ctx: Context, backends: Backends, query: str, book_id: int | None) -> str | None:
    """The client's model's passage for `query`, or None when sampling is off, or the client cannot or does not
    give one in time."""
    capabilities = ctx.client_capabilities
    timeout_s = backends.sampling_timeout_s
    if timeout_s is None or capabilities is None or capabilities.sampling is None:
        return None
    book_title = await _title(backends, book_id)
    message = SamplingMessage(role="user", content=TextContent(type="text", text=passage_prompt(query, book_title)))
    try:
        # Deprecated in the 2026-07-28 protocol (SEP-2577), and still what the clients that declare it answer.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            result = await asyncio.wait_for(
                ctx.session.create_message(
                    [message], max_tokens=MAX_TOKENS, system_prompt=SYSTEM_PROMPT, temperature=0.0,
                    related_request_id=ctx.request_id,
                ),
                timeout_s,
            )
    except TimeoutError:
        log.info("the client's model wrote no hypothetical passage within %.1f s; searching without one", timeout_s)
        return None
    except (MCPError, ValueError) as exc:  # a refusal, an error, no way back to the client (NoBackChannelError)
        log.info("the client's model gave no hypothetical passage (%s); searching without one", exc)
        return None
    text = result.content.text if isinstance(result.content, TextContent) else ""
    return " ".join(text.split())[:HYPOTHETICAL_PASSAGE_MAX_CHARS] or None


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
