"""The query service: alexandria_query, alexandria_guardians and the store half of alexandria_stats.

The servicer only maps protos to the domain (search.py, guardians.py, stats.py) and back.
Health stays NOT_SERVING until the embedder is SERVING and has told us its model.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import numpy as np
from grpc import aio

from alexandria.clients import EmbedderClient, decode_vectors
from alexandria.contract import QUERY_LIMIT, QUERY_THRESHOLD
from alexandria.errors import AlexandriaError, FailedPrecondition
from alexandria.grpc_server import ServiceServer, build_server
from alexandria.relevance import RELEVANCE_AT_HALF
from alexandria.settings import QuerySettings
from alexandria.store import Store, open_store
from alexandria.store.records import CollectionModel
from alexandria.v1 import embedder_pb2, query_pb2, query_pb2_grpc
from services.query.budget import json_size
from services.query.guardians import Guardian, PromptLibrary, ResponseInstruction
from services.query.outcome import ContextMode, SearchIn, SearchMode, SearchOutcome
from services.query.ranking import ScoreScale
from services.query.search import (
    DEFAULT_SEARCH_MODE,
    QueryVector,
    Searcher,
    SearchQuery,
)
from services.query.stats import LanguageNotes, collection_stats

log = logging.getLogger(__name__)

SERVICE_NAME = query_pb2.DESCRIPTOR.services_by_name["QueryService"].full_name

_CONTEXT_MODES = {
    query_pb2.CONTEXT_MODE_UNSPECIFIED: ContextMode.PRECISE,
    query_pb2.CONTEXT_MODE_PRECISE: ContextMode.PRECISE,
    query_pb2.CONTEXT_MODE_CONTEXTUAL: ContextMode.CONTEXTUAL,
    query_pb2.CONTEXT_MODE_COMPREHENSIVE: ContextMode.COMPREHENSIVE,
}
_SEARCH_IN = {
    query_pb2.SEARCH_IN_UNSPECIFIED: SearchIn.PASSAGES,
    query_pb2.SEARCH_IN_PASSAGES: SearchIn.PASSAGES,
    query_pb2.SEARCH_IN_HIGHLIGHTS: SearchIn.HIGHLIGHTS,
    query_pb2.SEARCH_IN_BOTH: SearchIn.BOTH,
}
_SEARCH_MODES = {
    query_pb2.SEARCH_MODE_UNSPECIFIED: DEFAULT_SEARCH_MODE,
    query_pb2.SEARCH_MODE_HYBRID: SearchMode.HYBRID,
    query_pb2.SEARCH_MODE_SEMANTIC: SearchMode.SEMANTIC,
    query_pb2.SEARCH_MODE_LEXICAL: SearchMode.LEXICAL,
}


class EmbedderQueryEncoder:
    """The search's QueryEncoder over the embedder service: query vectors, the model's similarity
    floor, and the cross-encoder's scores when the embedder has one.

    What the embedder says of its model (ModelInfo) is asked once, and again whenever an Embed
    answer names another model (the embedder was restarted with another one).
    """

    def __init__(self, client: EmbedderClient) -> None:
        self.client = client
        self._model: embedder_pb2.ModelInfo | None = None

    async def _model_info(self, name: str | None = None) -> embedder_pb2.ModelInfo:
        if self._model is None or (name is not None and self._model.name != name):
            self._model = await self.client.model_info()
        return self._model

    async def encode(self, text: str, passage: str | None = None) -> QueryVector:
        response = await self.client.embed([text] if passage is None else [text, passage],
                                           kind=embedder_pb2.EMBED_KIND_QUERY)
        model = await self._model_info(response.model)
        vectors = decode_vectors(response)
        return QueryVector(vectors[0], response.model, score_scale(model),
                           passage_vector=vectors[1] if passage is not None else None)

    async def reranks(self) -> bool:
        return bool((await self._model_info()).reranker)

    async def rerank(self, query: str, passages: Sequence[str]) -> np.ndarray:
        return await self.client.rerank(query, passages)


def score_scale(model: embedder_pb2.ModelInfo) -> ScoreScale:
    """The model's score scale as its embedder reports it (MiniLM's relevance at half from an embedder older than
    the field)."""
    return ScoreScale(model.similarity_floor, model.relevance_at_half or RELEVANCE_AT_HALF)


def search_query(request: query_pb2.SearchRequest, default_collection: str) -> SearchQuery:
    """The domain query for a request, with the contract's defaults for unset fields."""
    return SearchQuery(
        text=request.query,
        collection=request.collection or default_collection,
        limit=request.limit or int(QUERY_LIMIT.default),
        threshold=request.threshold if request.HasField("threshold") else QUERY_THRESHOLD.default,
        context_mode=_CONTEXT_MODES.get(request.context_mode, ContextMode.PRECISE),
        search_mode=_SEARCH_MODES.get(request.search_mode, DEFAULT_SEARCH_MODE),
        book_id=request.book_id if request.HasField("book_id") else None,
        author=request.author or None,
        language=request.language or None,
        passage=request.hypothetical_passage or None,
        search_in=_SEARCH_IN.get(request.search_in, SearchIn.PASSAGES),
    )


def instruction_size(instruction: ResponseInstruction) -> int:
    """JSON characters the guardian and pattern fields add to a search response."""
    guardian = instruction.guardian
    return sum(json_size(s) for s in (instruction.text, guardian.id, guardian.name, guardian.emoji, instruction.pattern.id))


def search_response(outcome: SearchOutcome, instruction: ResponseInstruction) -> query_pb2.SearchResponse:
    response = query_pb2.SearchResponse(
        query=outcome.query,
        result_count=len(outcome.results),
        context_mode=outcome.context_mode.value,
        search_mode=outcome.search_mode.value,
        response_instruction=instruction.text,
        guardian=instruction.guardian.id,
        guardian_name=instruction.guardian.name,
        guardian_emoji=instruction.guardian.emoji,
        response_pattern=instruction.pattern.id,
        trimmed=outcome.trimmed,
        notice=outcome.notice,
    )
    for p in outcome.results:
        hit = response.results.add(
            score=p.score,
            book_title=p.book_title,
            author=p.author,
            section_name=p.section_name,
            text=p.text,
            chunk_id=p.chunk_id,
            locator=p.locator.to_proto(),
            file_path=p.file_path,
            book_key=p.book_key,
            language=p.language,
            parent_id=p.parent_id,
            sequence_index=p.sequence_index,
            matched_lexically=p.matched_lexically,
            link=p.link,
            kind=p.kind,
            note=p.note,
        )
        if p.calibre_id is not None:
            hit.book_id = p.calibre_id
    for c in outcome.parents:
        response.parent_chunks.add(
            parent_id=c.parent_id,
            book_title=c.book_title,
            author=c.author,
            section_name=c.section_name,
            text=c.text,
            trimmed=c.trimmed,
            chapter_words=c.chapter_words,
            result_indices=c.result_indices,
        )
    for n in outcome.siblings:
        response.sibling_chunks.add(
            chunk_id=n.chunk_id,
            result_index=n.result_index,
            relation=n.relation,
            sequence_index=n.sequence_index,
            section_name=n.section_name,
            text=n.text,
        )
    if outcome.hierarchy_stats is not None:
        s = outcome.hierarchy_stats
        response.hierarchy_stats.CopyFrom(
            query_pb2.HierarchyStats(
                results=s.results,
                parents_fetched=s.parents_fetched,
                results_sharing_a_parent=s.results_sharing_a_parent,
                siblings_fetched=s.siblings_fetched,
            )
        )
    return response


def guardian_message(g: Guardian) -> query_pb2.Guardian:
    return query_pb2.Guardian(
        id=g.id,
        name=g.name,
        emoji=g.emoji,
        role=g.role,
        greeting=g.greeting,
        personality_prompt=g.personality_prompt,
        specialties=g.specialties,
        quirks=g.quirks,
    )


class QueryServicer(query_pb2_grpc.QueryServiceServicer):
    def __init__(self, searcher: Searcher, embedder: EmbedderClient, prompts: PromptLibrary,
                 settings: QuerySettings) -> None:
        self.searcher = searcher
        self.embedder = embedder
        self.prompts = prompts
        self.settings = settings
        self.language_notes = LanguageNotes()

    async def Search(
        self,
        request: query_pb2.SearchRequest,
        context: aio.ServicerContext[query_pb2.SearchRequest, query_pb2.SearchResponse],
    ) -> query_pb2.SearchResponse:
        # Resolved first: an unknown guardian or pattern fails before any search work.
        instruction = self.prompts.compose(request.guardian, request.response_pattern)
        query = search_query(request, self.settings.store.qdrant_collection)
        outcome = await self.searcher.search(
            query, self.settings.query_response_budget_chars, reserved_chars=instruction_size(instruction)
        )
        return search_response(outcome, instruction)

    async def ListGuardians(
        self,
        request: query_pb2.ListGuardiansRequest,
        context: aio.ServicerContext[query_pb2.ListGuardiansRequest, query_pb2.ListGuardiansResponse],
    ) -> query_pb2.ListGuardiansResponse:
        guardians = [guardian_message(g) for g in sorted(self.prompts.guardians.values(), key=lambda g: g.id)]
        return query_pb2.ListGuardiansResponse(
            guardians=guardians, default=self.prompts.default_guardian, count=len(guardians)
        )

    async def ListResponsePatterns(
        self,
        request: query_pb2.ListResponsePatternsRequest,
        context: aio.ServicerContext[
            query_pb2.ListResponsePatternsRequest, query_pb2.ListResponsePatternsResponse
        ],
    ) -> query_pb2.ListResponsePatternsResponse:
        patterns = [
            query_pb2.ResponsePattern(
                id=p.id, category=p.category, name=p.name, description=p.description, instruction=p.instruction
            )
            for p in self.prompts.patterns.patterns
        ]
        return query_pb2.ListResponsePatternsResponse(patterns=patterns, category_defaults=self.prompts.category_defaults)

    async def GetCollectionStats(
        self,
        request: query_pb2.GetCollectionStatsRequest,
        context: aio.ServicerContext[query_pb2.GetCollectionStatsRequest, query_pb2.CollectionStats],
    ) -> query_pb2.CollectionStats:
        collection = request.collection or self.settings.store.qdrant_collection
        stats = await asyncio.to_thread(collection_stats, self.searcher.store, collection, self.language_notes)
        return query_pb2.CollectionStats(
            connected=stats.connected,
            collection_name=stats.collection_name,
            points_count=stats.points_count,
            vector_size=stats.vector_size,
            status=stats.status,
            books=stats.books,
            model=stats.model,
            backend=stats.backend,
            disk_bytes=stats.disk_bytes,
            wal_bytes=stats.wal_bytes,
            quantization=stats.quantization,
            language_note=stats.language_note,
            search_note=stats.search_note,
            model_note=await self._model_note(collection, stats.model, stats.vector_size),
        )

    async def _model_note(self, collection: str, model: str, dimension: int) -> str:
        """Why semantic searches of the collection are refused, when the running embedder did not make it ("" when
        it did, or the embedder does not answer)."""
        if not model:
            return ""
        try:
            running = await self.embedder.model_info()
            CollectionModel(model, dimension).check(collection, running.name, running.dimension)
        except FailedPrecondition as refused:
            return refused.message
        except AlexandriaError:
            pass
        return ""


async def _embedder_answers(embedder: EmbedderClient, store: Store, collection: str) -> None:
    """Wait for the embedder's model; warn early if the default collection was made by another."""
    model = await embedder.wait_until_ready()
    info = await asyncio.to_thread(store.collection_info, collection)
    recorded = CollectionModel.of(info).name if info else None
    if recorded is not None and recorded != model.name:
        log.warning(
            "collection '%s' was embedded with %s but the embedder runs %s: searches will fail until they match",
            collection, recorded, model.name,
        )
    log.info("embedder ready: %s (%d dims, %s)", model.name, model.dimension, model.device)


def create_server(
    settings: QuerySettings, *, store: Store | None = None, embedder: EmbedderClient | None = None
) -> ServiceServer:
    """The query server; it opens (and then owns) the store and embedder client it is not given."""
    prompts = PromptLibrary.load(settings.guardians_dir, settings.response_patterns_file, settings.default_guardian)
    server_store = store or open_store(settings.store)
    client = embedder or EmbedderClient(settings.embedder_addr, settings.clients)
    searcher = Searcher(server_store, EmbedderQueryEncoder(client), settings.link_paths)
    servicer = QueryServicer(searcher, client, prompts, settings)
    server = build_server(
        "query",
        settings.query_listen,
        lambda s: query_pb2_grpc.add_QueryServiceServicer_to_server(servicer, s),
        [SERVICE_NAME],
    )
    server.serve_when_ready(lambda: _embedder_answers(client, server_store, settings.store.qdrant_collection))
    if store is None:
        server.close_on_stop(server_store)
    if embedder is None:
        server.close_on_stop(client)
    return server
