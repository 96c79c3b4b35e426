"""The query service's tools: alexandria_query and alexandria_guardians."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import Resolve
from mcp_types import CallToolResult, CreateMessageResult
from pydantic import Field

from alexandria.contract import HYPOTHETICAL_PASSAGE_MAX_CHARS, QUERY_LIMIT, QUERY_THRESHOLD
from alexandria.enums import enum_number
from alexandria.errors import FailedPrecondition, NotFound
from alexandria.v1 import ingest_pb2, query_pb2
from gateway.backends import backends
from gateway.results import message_result
from gateway.sampling import ask_for_passage, sampled_text
from gateway.tools.base import READ_ONLY, register_tool
from gateway.tools.params import Collection, Language


@register_tool(
    title="Search book passages",
    scope="read",
    service="query, ingest",
    annotations=READ_ONLY,
    output=query_pb2.SearchResponse.DESCRIPTOR,
)
async def alexandria_query(
    ctx: Context,
    query: Annotated[str, Field(min_length=1, description="The question or topic, in natural language.")],
    limit: Annotated[int, QUERY_LIMIT.field("How many passages to return.")] = QUERY_LIMIT.default,
    threshold: Annotated[
        float,
        QUERY_THRESHOLD.field(
            "Minimum relevance (0-1) a passage needs to be returned. At 0.5 (default) passages that "
            "merely share the subject drop out while the answering passages stay; 0 returns the best "
            "passages whatever their score."
        ),
    ] = QUERY_THRESHOLD.default,
    context_mode: Annotated[
        Literal["precise", "contextual", "comprehensive"],
        Field(
            description="precise: only the matching passages; contextual: plus the surrounding chapter text; "
            "comprehensive: plus the chapter and the neighbouring passages."
        ),
    ] = "precise",
    response_pattern: Annotated[
        str,
        Field(
            min_length=1,
            description="How the answer should be shaped: free, direct (cite sources), synthesis, extraction, "
            "critical, or a pattern id such as tldr or cross_perspective (see the pattern_* prompts).",
        ),
    ] = "free",
    guardian: Annotated[
        str | None,
        Field(
            min_length=1,
            description="Guardian persona whose voice flavours response_instruction (see alexandria_guardians); "
            "'none' for plain Alexandria. Default: the server's default guardian (zec).",
        ),
    ] = None,
    search_mode: Annotated[
        Literal["hybrid", "semantic", "lexical"] | None,
        Field(
            description="hybrid: meaning and exact words; semantic: meaning only; lexical: exact words only. "
            "Default: the mode measured best on this library."
        ),
    ] = None,
    collection: Collection = None,
    book_id: Annotated[int | None, Field(ge=1, description="Search only this Calibre book.")] = None,
    author: Annotated[
        str | None, Field(min_length=1, description="Search only books whose author contains this text.")
    ] = None,
    language: Language = None,
    search_in: Annotated[
        Literal["passages", "highlights", "both"],
        Field(
            description="passages: the books' text; highlights: what the reader highlighted in Calibre's viewer, "
            "each with the reader's note (the reader's own picks: ask for them when the user asks what they "
            "marked or noted); both: ranked together. Each result's `kind` says which it is."
        ),
    ] = "passages",
    hypothetical_passage: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=HYPOTHETICAL_PASSAGE_MAX_CHARS,
            description="Optional; give it for any question about what a book says. `query` holds the question; "
            "this holds your guess at the answer, written as one to three sentences of the book itself: its "
            "language, style, names and vocabulary (narrative or dialogue for a novel, verse for a play, steps for a "
            "manual), from what you remember of the book or what it plausibly says. It finds the passage by how it "
            "is written and orders the results. It never decides whether the question is answered: that is the "
            "question's own score against `threshold`, so a wrong guess cannot answer a question the books do not "
            "cover. Once one passage reaches `threshold`, the guess may bring in others scoring at least half of it. "
            "It is never returned: quote only the passages in `results`. Leave it out when `query` is a name, a few "
            "key words, or a line quoted word for word.",
        ),
    ] = None,
    # Not a parameter the caller sees: the client's model's passage, when QUERY_SAMPLING asks for one.
    sampled: Annotated[CreateMessageResult | str | None, Resolve(ask_for_passage)] = None,
) -> CallToolResult:
    """Search the content of the ingested books by meaning and return the passages that answer a question.

    Use this for any question about what the books say. Results come best first, each with the passage text, its
    score, the book, author and chapter (section_name), a locator to cite, and `link`, a URL that opens the book
    at the passage (Calibre's viewer for a Calibre book, the file, at its page for a PDF) to offer the reader.
    With `search_in` it also searches the reader's highlights: a result of `kind` highlight is the text the
    reader highlighted, with their `note`. `score` is the passage's relevance to the question in [0, 1] (meaning
    and exact words together, or a reranker's judgement when one is configured), on one scale whatever the
    model: a passage that answers the question scores 0.5 or more, and most passages on other subjects score
    under it. `threshold` drops passages scoring under it, and `matched_lexically` marks a passage kept below it
    because it contains every word of the query (a name, a rare word). To find where a book says a line you
    remember word for word, put the line itself (four words or more) in `query`, with no hypothetical_passage: a
    passage that holds it word for word comes first. When nothing reaches the threshold, `notice` says how close
    the best passage came; while a sync is still filling the collection, it says how many of the library's books
    are searchable yet. Compose the answer following `response_instruction` in the result (the guardian persona
    and the response pattern), citing book and chapter. To find books by title or author instead of by content,
    use alexandria_search.
    """
    hypothetical_passage = hypothetical_passage or sampled_text(sampled)
    request = query_pb2.SearchRequest(
        query=query,
        limit=limit,
        threshold=threshold,
        context_mode=enum_number(query_pb2.ContextMode.DESCRIPTOR, context_mode),
        response_pattern=response_pattern,
        guardian=guardian or "",
        search_mode=enum_number(query_pb2.SearchMode.DESCRIPTOR, search_mode or "unspecified"),
        collection=collection or "",
        book_id=book_id,
        author=author or "",
        language=language or "",
        hypothetical_passage=hypothetical_passage or "",
        search_in=enum_number(query_pb2.SearchIn.DESCRIPTOR, search_in),
    )
    clients = backends(ctx)
    searched, syncing = await asyncio.gather(
        clients.query.call("Search", request),
        clients.ingest.call("GetAutoSyncStatus", ingest_pb2.GetAutoSyncStatusRequest()),
        return_exceptions=True,
    )
    status = syncing if isinstance(syncing, ingest_pb2.AutoSyncStatus) else ingest_pb2.AutoSyncStatus()
    filling = filling_notice(status, collection)
    if isinstance(searched, BaseException):
        # No book written yet by the sync that fills the collection: it is empty, or not made yet.
        if not (filling and isinstance(searched, NotFound | FailedPrecondition) and status.books_indexed == 0):
            raise searched
        searched = query_pb2.SearchResponse(query=query, context_mode=context_mode, search_mode=search_mode or "")
    assert isinstance(searched, query_pb2.SearchResponse)
    if filling:
        searched.notice = " ".join(n for n in (filling, searched.notice) if n)
    return message_result(searched)


def filling_notice(status: ingest_pb2.AutoSyncStatus, collection: str | None) -> str:
    """What a search says while the automatic sync fills the collection searched: how many of the library's books
    it holds yet, and about how long the rest will take ("" when no sync fills it)."""
    if not status.running or (collection and collection != status.collection):
        return ""
    if not status.books_total:
        return "A sync of the Calibre library has begun and is listing it; results come only from the books " \
               "already in the collection."
    if status.books_indexed >= status.books_total:
        return ""
    left = (f", the rest in about {max(1, round(status.seconds_left / 60))} min" if status.HasField("seconds_left")
            else "")
    return (f"A sync is filling the collection: {status.books_indexed} of {status.books_total} books are searchable "
            f"so far{left}; results come from those.")


@register_tool(
    title="List guardian personas",
    scope="read",
    service="query",
    annotations=READ_ONLY,
    output=query_pb2.ListGuardiansResponse.DESCRIPTOR,
)
async def alexandria_guardians(ctx: Context) -> CallToolResult:
    """List the guardian personas that can flavour Alexandria's answers: id, name, emoji, role and greeting.

    Pass a guardian's id as alexandria_query(guardian="...") to answer in that persona's voice.
    """
    return message_result(await backends(ctx).query.call("ListGuardians", query_pb2.ListGuardiansRequest()))
