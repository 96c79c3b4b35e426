"""The query service over real gRPC: a real embedder server with the real small model, the real
embedded store written by the ingest writer, and a query server on port 0."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np
import pytest
import pytest_asyncio
import torch
from google.protobuf.json_format import MessageToDict
from sentence_transformers import CrossEncoder

from alexandria.clients import EmbedderClient, wait_until_serving
from alexandria.settings import ClientSettings, EmbedderSettings, QuerySettings, StoreSettings
from alexandria.store import Filter, Store, open_store
from alexandria.store import schema as f
from alexandria.store.common import disk_usage
from alexandria.v1 import query_pb2, query_pb2_grpc
from query.books import EMMA, PRIDE, UNFINISHED, SampleBook, book_points
from services.embedder import server as embedder_server
from services.embedder.loading import load_model, resolve_model_source
from services.embedder.model import EmbeddingModel
from services.ingest.writer import BookWriter
from services.query.server import create_server

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytestmark = pytest.mark.asyncio(loop_scope="module")
COLLECTION = "alexandria"
START_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def model() -> EmbeddingModel:
    return load_model(resolve_model_source(None), "cpu", 0)


@dataclass
class Stack:
    query: query_pb2_grpc.QueryServiceStub
    store: Store
    embedder: EmbedderClient
    model_name: str
    address: str
    data_dir: Path

    async def search(self, text: str, **fields) -> query_pb2.SearchResponse:
        return await self.query.Search(query_pb2.SearchRequest(query=text, **fields), timeout=30)

    async def write(self, book, complete: bool = True, collection: str = COLLECTION) -> None:
        BookWriter(self.store, collection).ensure_collection(384, self.model_name)
        points = await book_points(book, self.embedder, self.model_name, complete)
        if complete:
            await asyncio.to_thread(BookWriter(self.store, collection).write, book.book_key, 0, points)
        else:
            await asyncio.to_thread(self.store.upsert, collection, points)


def _store_settings(data_dir: Path) -> StoreSettings:
    return StoreSettings(alexandria_data_dir=data_dir, qdrant_url=None, qdrant_local_path=None)


def _query_settings(data_dir: Path, budget: int = 80_000) -> QuerySettings:
    return QuerySettings(query_listen="127.0.0.1:0", store=_store_settings(data_dir), query_response_budget_chars=budget)


@asynccontextmanager
async def _query_server(settings: QuerySettings, store: Store, embedder: EmbedderClient) -> AsyncIterator[str]:
    query = create_server(settings, store=store, embedder=embedder)
    await query.start()
    try:
        yield query.address
    finally:
        await query.stop(grace=1)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory, model: EmbeddingModel) -> AsyncIterator[Stack]:
    """One embedder, store and query server for the module; tests that write use their own collections."""
    data_dir = tmp_path_factory.mktemp("query-stack")
    embedder = embedder_server.create_server(EmbedderSettings(embedder_listen="127.0.0.1:0"), model=model)
    await embedder.start()
    client = EmbedderClient(embedder.address, ClientSettings())
    store = open_store(_store_settings(data_dir))
    try:
        async with (
            _query_server(_query_settings(data_dir), store, client) as address,
            grpc.aio.insecure_channel(address) as channel,
        ):
            running = Stack(query_pb2_grpc.QueryServiceStub(channel), store, client, model.name, address, data_dir)
            await running.write(PRIDE)
            await running.write(EMMA)
            yield running
    finally:
        await client.close()
        await embedder.stop(grace=1)
        store.close()


async def _error(call) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await call
    return error.value


async def test_a_question_finds_its_passage_with_a_citation(stack: Stack) -> None:
    response = await stack.search("Who has taken Netherfield Park?")
    assert response.result_count == len(response.results) >= 1
    answer = next(r for r in response.results if "Netherfield Park is let" in r.text)
    assert (answer.book_title, answer.author, answer.book_id, answer.section_name) == (
        "Pride and Prejudice", "Jane Austen", 1, "Chapter 1"
    )
    assert answer.locator.chapter_title == "Chapter 1" and not answer.locator.HasField("page_start")
    assert answer.chunk_id and answer.parent_id and answer.book_key == "uuid-pride"
    assert 0.5 <= answer.score <= 1.0 and not answer.matched_lexically
    assert answer.score == max(r.score for r in response.results)
    assert (response.context_mode, response.search_mode) == ("precise", "hybrid")
    assert (response.guardian, response.guardian_name, response.response_pattern) == ("zec", "Zec", "free_answer")
    assert "Zec" in response.response_instruction and "Citations:" in response.response_instruction
    assert not response.parent_chunks and not response.HasField("hierarchy_stats")


async def test_a_passage_kept_below_the_threshold_for_holding_every_query_word_says_so(stack: Stack) -> None:
    response = await stack.search("Netherfield", threshold=0.95)
    assert response.results
    for hit in response.results:
        assert hit.matched_lexically and hit.score < 0.95 and "Netherfield" in hit.text


async def test_precise_never_returns_chapters(stack: Stack) -> None:
    response = await stack.search("Elizabeth at Pemberley", threshold=0.0, limit=20)
    chapters = {p.id for p in stack.store.scroll(COLLECTION, Filter(must={f.LEVEL: "parent"}), limit=100)}
    assert chapters and not chapters & {r.chunk_id for r in response.results}
    assert len(response.results) == 10  # every child and flat chunk, no chapter


@pytest.mark.parametrize(
    "mode", [query_pb2.SEARCH_MODE_HYBRID, query_pb2.SEARCH_MODE_LEXICAL, query_pb2.SEARCH_MODE_SEMANTIC]
)
async def test_an_exact_name_is_found_in_every_mode(stack: Stack, mode: int) -> None:
    response = await stack.search("Pemberley", search_mode=mode)
    assert response.results and all("Pemberley" in r.text for r in response.results)


async def test_contextual_returns_each_chapter_once_around_its_hits(stack: Stack) -> None:
    response = await stack.search(
        "Netherfield is let to a young man of large fortune", context_mode=query_pb2.CONTEXT_MODE_CONTEXTUAL,
        threshold=0.3, book_id=1,
    )
    chapter_one = [i for i, r in enumerate(response.results) if r.section_name == "Chapter 1"]
    assert len(chapter_one) >= 2
    parents = {p.parent_id: p for p in response.parent_chunks}
    assert len(parents) == len(response.parent_chunks)  # de-duplicated
    chapter = parents[response.results[chapter_one[0]].parent_id]
    assert set(chapter_one) <= set(chapter.result_indices)
    assert "Netherfield" in chapter.text and chapter.chapter_words > 100
    stats = response.hierarchy_stats
    assert stats.results == len(response.results) and stats.parents_fetched == len(response.parent_chunks)
    assert stats.results_sharing_a_parent >= 2 and stats.siblings_fetched == 0


async def test_comprehensive_adds_the_neighbouring_chunks(stack: Stack) -> None:
    response = await stack.search(
        "the first appearance of Pemberley Woods", context_mode=query_pb2.CONTEXT_MODE_COMPREHENSIVE,
        limit=1, threshold=0.3,
    )
    (hit,) = response.results
    assert hit.section_name == "Chapter 43" and hit.sequence_index == 0
    (neighbour,) = response.sibling_chunks  # the first chunk of its chapter has no previous one
    assert (neighbour.result_index, neighbour.relation, neighbour.sequence_index) == (0, "next", 1)
    assert neighbour.text.startswith("The park was very large")
    assert len(response.parent_chunks) == 1 and response.hierarchy_stats.siblings_fetched == 1


async def test_a_book_being_ingested_is_invisible_until_complete(stack: Stack) -> None:
    await stack.write(EMMA, collection="ingesting")
    await stack.write(UNFINISHED, complete=False, collection="ingesting")
    question = "Netherfield and Pemberley were both let"
    hidden = await stack.search(question, threshold=0.0, limit=20, collection="ingesting")
    assert {r.book_title for r in hidden.results} == {"Emma"}
    contextual = await stack.search(
        question, threshold=0.0, collection="ingesting", context_mode=query_pb2.CONTEXT_MODE_COMPREHENSIVE
    )
    assert not contextual.parent_chunks and not contextual.sibling_chunks
    await asyncio.to_thread(
        stack.store.set_payload, "ingesting", Filter(must={f.BOOK_KEY: UNFINISHED.book_key}), {f.COMPLETE: True}
    )
    shown = await stack.search(question, threshold=0.0, collection="ingesting")
    assert shown.results[0].book_title == "Netherfield Revisited"


async def test_filters_by_author_and_language(stack: Stack) -> None:
    by_author = await stack.search("a sensible old friend of the family", author="austen", threshold=0.0, limit=20)
    assert len(by_author.results) == 10
    nobody = await stack.search("a sensible old friend of the family", author="Tolstoy")
    assert not nobody.results and "Tolstoy" in nobody.notice
    german = await stack.search("a sensible old friend of the family", language="deu")
    assert not german.results


async def test_nothing_above_the_threshold_is_explained(stack: Stack) -> None:
    response = await stack.search("quantum chromodynamics lattice simulation", threshold=0.9)
    assert not response.results and "threshold 0.90" in response.notice


@pytest.mark.parametrize(
    ("fields", "code", "words"),
    [
        ({"query": "  "}, grpc.StatusCode.INVALID_ARGUMENT, "empty"),
        ({"query": "x", "limit": 21}, grpc.StatusCode.INVALID_ARGUMENT, "limit must be from 1 to 20"),
        ({"query": "x", "threshold": 1.2}, grpc.StatusCode.INVALID_ARGUMENT, "threshold must be from 0.0 to 1.0"),
        ({"query": "x", "guardian": "gandalf"}, grpc.StatusCode.INVALID_ARGUMENT, "alan_kay"),
        ({"query": "x", "response_pattern": "haiku"}, grpc.StatusCode.INVALID_ARGUMENT, "steel_man"),
        ({"query": "x", "collection": "nowhere"}, grpc.StatusCode.NOT_FOUND, "'nowhere' does not exist"),
    ],
)
async def test_bad_requests_get_clear_errors(stack: Stack, fields: dict, code: grpc.StatusCode, words: str) -> None:
    error = await _error(stack.query.Search(query_pb2.SearchRequest(**fields), timeout=30))
    assert error.code() == code and words in error.details()


async def test_an_empty_collection_is_a_clear_error(stack: Stack) -> None:
    await asyncio.to_thread(BookWriter(stack.store, "fresh").ensure_collection, 384, stack.model_name)
    error = await _error(stack.search("anything", collection="fresh"))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION and "empty" in error.details()


async def test_a_collection_of_another_model_is_refused_naming_both(stack: Stack) -> None:
    stack.store.ensure_collection("other", 384, {"model": "bge-small-en", "dimension": 384})
    points = await book_points(EMMA, stack.embedder, "bge-small-en")
    await asyncio.to_thread(stack.store.upsert, "other", points)
    error = await _error(stack.search("Emma Woodhouse", collection="other"))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "bge-small-en" in error.details() and stack.model_name in error.details()


async def test_a_search_answers_while_a_book_is_being_written(stack: Stack) -> None:
    points = await book_points(UNFINISHED, stack.embedder, stack.model_name, complete=False)
    writing = asyncio.Event()
    done = asyncio.Event()
    loop = asyncio.get_running_loop()

    def write_many() -> None:
        loop.call_soon_threadsafe(writing.set)
        for round_number in range(200):
            stack.store.upsert(COLLECTION, [
                type(p)(f"{p.id[:-4]}{round_number:04d}", p.dense, p.sparse, p.payload) for p in points
            ])
        loop.call_soon_threadsafe(done.set)

    writer = asyncio.create_task(asyncio.to_thread(write_many))
    await writing.wait()
    answers = []
    while not done.is_set() or not answers:
        answers.append(await stack.search("Who has taken Netherfield Park?"))
    await writer
    assert all(a.results and a.results[0].book_title == "Pride and Prejudice" for a in answers)


async def test_the_budget_bounds_the_whole_response_and_says_so(stack: Stack) -> None:
    budget = 4_000
    settings = _query_settings(stack.data_dir, budget=budget)
    async with (
        _query_server(settings, stack.store, stack.embedder) as address,
        grpc.aio.insecure_channel(address) as channel,
    ):
        response = await query_pb2_grpc.QueryServiceStub(channel).Search(
            query_pb2.SearchRequest(
                query="Elizabeth and Mr. Bennet", context_mode=query_pb2.CONTEXT_MODE_COMPREHENSIVE,
                threshold=0.0, limit=20,
            ),
            timeout=30,
        )
    rendered = MessageToDict(response, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    assert len(json.dumps(rendered, ensure_ascii=False)) <= budget
    assert response.trimmed and f"{budget:,}-character response budget" in response.notice
    assert response.results


async def test_guardians_and_patterns_are_listed(stack: Stack) -> None:
    guardians = await stack.query.ListGuardians(query_pb2.ListGuardiansRequest(), timeout=10)
    ids = [g.id for g in guardians.guardians]
    assert {"zec", "vault_e", "ariadne", "hipatija", "klepac", "lupita", "alan_kay", "none"} <= set(ids)
    assert guardians.default == "zec" and guardians.count == len(ids)
    zec = next(g for g in guardians.guardians if g.id == "zec")
    assert zec.role == "Meta-postman of Alexandria" and zec.greeting and zec.emoji
    patterns = await stack.query.ListResponsePatterns(query_pb2.ListResponsePatternsRequest(), timeout=10)
    assert patterns.category_defaults["critical"] == "contradictions"
    assert {"tldr", "steel_man", "retrieval_gaps"} <= {p.id for p in patterns.patterns}
    voiced = await stack.search("Pemberley", guardian="lupita", response_pattern="critical")
    assert (voiced.guardian, voiced.guardian_emoji, voiced.response_pattern) == ("lupita", "🐷", "contradictions")
    assert "mljac" in voiced.response_instruction


async def test_health_turns_serving_once_the_embedder_answers(stack: Stack) -> None:
    await wait_until_serving(stack.address, START_TIMEOUT_S)


async def test_collection_stats(stack: Stack) -> None:
    for book in (PRIDE, EMMA):
        await stack.write(book, collection="stats")
    await stack.write(UNFINISHED, complete=False, collection="stats")
    request = query_pb2.GetCollectionStatsRequest(collection="stats")
    stats = await stack.query.GetCollectionStats(request, timeout=10)
    assert (stats.connected, stats.collection_name, stats.backend, stats.status) == (True, "stats", "embedded", "green")
    assert stats.books == 2  # the unfinished book is not counted
    # Pride and Prejudice: 2 chapters + 8 children; Emma: 2 flat chunks. Not the unfinished book's 1 + 1, which
    # no search returns (an ingest killed half-way leaves such points until the book is ingested again).
    assert stats.points_count == 12 and stats.vector_size == 384 and stats.model == stack.model_name
    assert stats.quantization == "int8" and 0 < stats.wal_bytes < stats.disk_bytes <= disk_usage(stack.data_dir)
    assert stats.search_note == ""  # two books in a segment or two: searched as the settings say
    default = await stack.query.GetCollectionStats(query_pb2.GetCollectionStatsRequest(), timeout=10)
    assert default.collection_name == COLLECTION and default.books == 2
    missing = await stack.query.GetCollectionStats(query_pb2.GetCollectionStatsRequest(collection="nothing"), timeout=10)
    assert (missing.connected, missing.status, missing.points_count) == (True, "missing", 0)
    assert not missing.HasField("disk_bytes") and missing.quantization == ""
    assert stats.language_note == ""  # English books, an English model


async def test_collection_stats_say_when_many_books_are_in_languages_the_model_was_not_trained_on(
    stack: Stack,
) -> None:
    croatian = SampleBook(book_key="uuid-hr", title="Svjetionik", authors=("Anonim",), calibre_id=7, language="hrv",
                          chapters=(("Prvo poglavlje", ("Stari svjetioničar penjao se svake večeri stubama.",)),))
    for book in (PRIDE, croatian):
        await stack.write(book, collection="languages")
    request = query_pb2.GetCollectionStatsRequest(collection="languages")
    stats = await stack.query.GetCollectionStats(request, timeout=10)
    assert stats.language_note.startswith(f"1 of 2 books are in languages {stack.model_name} was not trained on "
                                          "(English only): Croatian 1;")
    assert "EMBEDDER_PROFILE=multilingual" in stats.language_note


async def test_with_a_cross_encoder_results_come_in_its_order_with_its_scores(
    stack: Stack, model: EmbeddingModel, tiny_cross_encoder: Path
) -> None:
    settings = EmbedderSettings(embedder_listen="127.0.0.1:0", embedder_reranker_model=str(tiny_cross_encoder))
    reranking = embedder_server.create_server(settings, model=model)
    await reranking.start()
    client = EmbedderClient(reranking.address, ClientSettings())
    question = "Who is the new tenant of Netherfield?"
    try:
        async with (
            _query_server(_query_settings(stack.data_dir), stack.store, client) as address,
            grpc.aio.insecure_channel(address) as channel,
        ):
            await wait_until_serving(address, START_TIMEOUT_S)
            request = query_pb2.SearchRequest(query=question, threshold=0.0, limit=5)
            response = await query_pb2_grpc.QueryServiceStub(channel).Search(request, timeout=30)
    finally:
        await client.close()
        await reranking.stop(grace=1)
    scores = [hit.score for hit in response.results]
    assert len(scores) == 5 and scores == sorted(scores, reverse=True)
    judged = CrossEncoder(str(tiny_cross_encoder), device="cpu", local_files_only=True).predict(
        [(question, hit.text) for hit in response.results], activation_fn=torch.nn.Sigmoid()
    )
    np.testing.assert_allclose(scores, judged, rtol=1e-4, atol=1e-5)
