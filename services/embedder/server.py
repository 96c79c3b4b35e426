"""The embedder service: settings -> create_server -> serve.

Two lanes, each a micro-batcher with its own model threads: queries (EMBED_KIND_QUERY, what a
search waits for) and bulk passages (ingest). A query never waits for a bulk batch to finish: the
lanes run at once, and the bulk lane's threads run only on cores nothing else wants, so a query
takes the cores while a book is being embedded. The query lane is one worker on every CPU thread;
the bulk lane is one single-threaded worker per CPU thread (threads.py says why and what it measured).

Health stays NOT_SERVING until the model is loaded and a warm-up batch has run through each lane;
until then every RPC answers UNAVAILABLE, which clients retry.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import torch
from grpc import aio

from alexandria.errors import FailedPrecondition, InvalidArgument, Unavailable
from alexandria.grpc_server import ServiceServer, build_server
from alexandria.settings import EmbedderSettings
from alexandria.v1 import embedder_pb2, embedder_pb2_grpc
from services.embedder.batcher import MicroBatcher
from services.embedder.loading import load_configured_model, resolve_device
from services.embedder.memory import IDLE_BEFORE_RELEASE_S, release_free_memory
from services.embedder.model import (
    WARM_UP_TEXTS,
    EmbeddingModel,
    EmbedKind,
    neighbour_similarities,
    probe_similarity,
)
from services.embedder.model_folder import resolve_model_source
from services.embedder.profiles import resolve_profile
from services.embedder.reranker import Reranker, load_reranker
from services.embedder.score_scale import ProbedSimilarity, relevance_at_half
from services.embedder.threads import worker_setup

log = logging.getLogger(__name__)

T = TypeVar("T")

SERVICE_NAME = embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"].full_name

# 4096 vectors of 1024 float32 dimensions are 16 MiB, well inside the 64 MiB message limit.
MAX_TEXTS_PER_REQUEST = 4096
# A search reranks tens of candidates; a cross-encoder pass over each is the cost that bounds this.
MAX_RERANK_PASSAGES = 256

_KINDS = {
    embedder_pb2.EMBED_KIND_UNSPECIFIED: EmbedKind.PASSAGE,
    embedder_pb2.EMBED_KIND_PASSAGE: EmbedKind.PASSAGE,
    embedder_pb2.EMBED_KIND_QUERY: EmbedKind.QUERY,
}


# On a GPU the bulk lane's workers take turns on the device: with two, one tokenizes while the
# other's batch runs.
GPU_BULK_WORKERS = 2
# On a CPU, one bulk worker a core, each pass on one thread: passes run side by side rather than each
# spread thin over every core.
BULK_WORKER_THREADS = 1
# Tokens in one batch at most (its rows times its longest row). On a CPU a pass costs about its
# tokens beyond a fixed ~50, so a batch past a few thousand tokens gains nothing and only holds more
# memory (32 windows of 256 tokens, or EMBEDDER_MAX_BATCH sentences); a GPU runs a large pass in about
# the time of a small one, so its batches are as large as EMBEDDER_MAX_BATCH lets them be.
CPU_TOKEN_BUDGET = 8192
GPU_TOKEN_BUDGET = 65536


@dataclass(frozen=True)
class _Ready:
    model: EmbeddingModel
    lanes: dict[EmbedKind, MicroBatcher[Any]]
    reranker: Reranker | None = None
    similarity_floor: float = 0.0
    relevance_at_half: float = 0.0


class EmbedderServicer(embedder_pb2_grpc.EmbedderServiceServicer):
    """Thin gRPC layer over the model and its lanes; answers UNAVAILABLE until `ready` is called."""

    def __init__(self) -> None:
        self._ready: _Ready | None = None

    def ready(
        self,
        model: EmbeddingModel,
        lanes: dict[EmbedKind, MicroBatcher[Any]],
        reranker: Reranker | None = None,
        floor: float = 0.0,
        relevance_at_half: float = 0.0,
    ) -> None:
        """Start answering with this (loaded, warmed-up) model, one lane per kind of text, the
        cross-encoder if one is configured, and the model's score scale (score_scale.py)."""
        self._ready = _Ready(model, lanes, reranker, floor, relevance_at_half)

    async def close(self) -> None:
        """Stop answering and fail what is still queued."""
        ready, self._ready = self._ready, None
        if ready is not None:
            await asyncio.gather(*(lane.close() for lane in ready.lanes.values()))

    def _require_ready(self) -> _Ready:
        if self._ready is None:
            raise Unavailable("The embedder is still loading its model; retry in a few seconds.")
        return self._ready

    async def GetModelInfo(
        self,
        request: embedder_pb2.GetModelInfoRequest,
        context: aio.ServicerContext[embedder_pb2.GetModelInfoRequest, embedder_pb2.ModelInfo],
    ) -> embedder_pb2.ModelInfo:
        ready = self._require_ready()
        model = ready.model
        return embedder_pb2.ModelInfo(
            name=model.name,
            dimension=model.dimension,
            max_seq_length=model.max_seq_length,
            device=model.device,
            normalized=True,
            dtype=model.dtype,
            reranker=ready.reranker.name if ready.reranker else "",
            similarity_floor=ready.similarity_floor,
            relevance_at_half=ready.relevance_at_half,
        )

    async def Rerank(
        self,
        request: embedder_pb2.RerankRequest,
        context: aio.ServicerContext[embedder_pb2.RerankRequest, embedder_pb2.RerankResponse],
    ) -> embedder_pb2.RerankResponse:
        reranker = self._require_ready().reranker
        if reranker is None:
            raise FailedPrecondition(
                "No reranker is configured on this embedder; set EMBEDDER_RERANKER_MODEL to a CrossEncoder "
                "model folder, or rank without one."
            )
        if not request.query.strip():
            raise InvalidArgument("Rerank needs a query: the question the passages are scored against.")
        if len(request.passages) > MAX_RERANK_PASSAGES:
            raise InvalidArgument(
                f"{len(request.passages)} passages in one Rerank; the limit is {MAX_RERANK_PASSAGES}."
            )
        scores = await reranker.rerank(request.query, list(request.passages))
        return embedder_pb2.RerankResponse(scores=scores.tolist(), reranker=reranker.name)

    async def Embed(
        self,
        request: embedder_pb2.EmbedRequest,
        context: aio.ServicerContext[embedder_pb2.EmbedRequest, embedder_pb2.EmbedResponse],
    ) -> embedder_pb2.EmbedResponse:
        return await self._embed(request)

    async def EmbedStream(
        self,
        request_iterator: AsyncIterator[embedder_pb2.EmbedRequest],
        context: aio.ServicerContext[embedder_pb2.EmbedRequest, embedder_pb2.EmbedResponse],
    ) -> AsyncIterator[embedder_pb2.EmbedResponse]:
        # One message ahead: the next slice is queued while the current one is being encoded,
        # so the model never waits for the network between slices.
        previous: asyncio.Task[embedder_pb2.EmbedResponse] | None = None
        current: asyncio.Task[embedder_pb2.EmbedResponse] | None = None
        try:
            async for request in request_iterator:
                current = asyncio.ensure_future(self._embed(request))
                if previous is not None:
                    yield await previous
                previous, current = current, None
            if previous is not None:
                yield await previous
        finally:
            for task in (previous, current):
                if task is not None:
                    task.cancel()

    async def EmbedWindows(
        self,
        request: embedder_pb2.EmbedWindowsRequest,
        context: aio.ServicerContext[embedder_pb2.EmbedWindowsRequest, embedder_pb2.EmbedWindowsResponse],
    ) -> embedder_pb2.EmbedWindowsResponse:
        ready = self._require_ready()
        if request.overlap_tokens < 0:
            raise InvalidArgument(f"overlap_tokens must be 0 or more, got {request.overlap_tokens}.")
        windows = await asyncio.to_thread(
            lambda: [ready.model.windows(p.header, p.text, request.overlap_tokens) for p in request.passages]
        )
        texts = [text for passage in windows for text in passage]
        if len(texts) > MAX_TEXTS_PER_REQUEST:
            raise InvalidArgument(
                f"{len(request.passages)} passages make {len(texts)} windows in one request; the limit is "
                f"{MAX_TEXTS_PER_REQUEST} windows. Send fewer passages a request (EmbedderClient.embed_windows "
                "does this)."
            )
        embeddings = await ready.lanes[EmbedKind.PASSAGE].embed(ready.model.with_prefix(texts, EmbedKind.PASSAGE))
        return embedder_pb2.EmbedWindowsResponse(
            vectors=embeddings.vectors.astype("<f4", copy=False).tobytes(),
            windows=[len(passage) for passage in windows],
            dimension=ready.model.dimension,
            model=ready.model.name,
        )

    async def _embed(self, request: embedder_pb2.EmbedRequest) -> embedder_pb2.EmbedResponse:
        ready = self._require_ready()
        count = len(request.texts)
        if count > MAX_TEXTS_PER_REQUEST:
            raise InvalidArgument(
                f"{count} texts in one request; the limit is {MAX_TEXTS_PER_REQUEST}. Send larger inputs "
                f"through EmbedStream, at most {MAX_TEXTS_PER_REQUEST} texts a message "
                "(EmbedderClient.embed_many does this)."
            )
        kind = _KINDS.get(request.kind)
        if kind is None:
            raise InvalidArgument(
                f"Unknown embed kind {request.kind}; use EMBED_KIND_QUERY or EMBED_KIND_PASSAGE."
            )
        embeddings = await ready.lanes[kind].embed(ready.model.with_prefix(request.texts, kind))
        similarities = neighbour_similarities(embeddings.vectors) if request.neighbour_similarities else ()
        return embedder_pb2.EmbedResponse(
            vectors=embeddings.vectors.astype("<f4", copy=False).tobytes(),
            count=count,
            dimension=ready.model.dimension,
            truncated=embeddings.truncated,
            model=ready.model.name,
            sequence=request.sequence,
            neighbour_similarities=similarities,
        )


def create_server(settings: EmbedderSettings, *, model: EmbeddingModel | None = None) -> ServiceServer:
    """The embedder server, bound but not started. Starting it loads `settings.embedder_model`
    (unless a loaded `model` is given), runs a warm-up batch, then flips health to SERVING.

    A model that is not on this machine, or a GPU that is not there, fails here, before listening.
    """
    cpu_threads = settings.embedder_threads or torch.get_num_threads()
    load: Callable[[], EmbeddingModel]
    reranker_spec = settings.embedder_reranker_model
    if model is None:
        device = resolve_device(settings.embedder_device)
        choice = resolve_profile(settings, device)
        reranker_spec = choice.reranker
        load = partial(load_configured_model, choice, device, cpu_threads, settings.embedder_models_dir)
    else:
        load = lambda: model  # already loaded by the caller
    servicer = EmbedderServicer()
    server = build_server(
        "embedder",
        settings.embedder_listen,
        lambda grpc_server: embedder_pb2_grpc.add_EmbedderServiceServicer_to_server(servicer, grpc_server),
        [SERVICE_NAME],
    )

    def load_everything() -> tuple[EmbeddingModel, ProbedSimilarity, Reranker | None]:
        model = load()
        reranker = None
        if reranker_spec:
            source = resolve_model_source(reranker_spec, "EMBEDDER_RERANKER_MODEL", settings.embedder_models_dir)
            reranker = load_reranker(source, model.device.split(":")[0])
        return model, probe_similarity(model), reranker

    async def load_and_warm_up() -> None:
        started = time.perf_counter()
        # Measured in the loading thread too: a pass in any other thread that lives on would leave a
        # second OpenMP pool behind, which made every query pass slower (7.5 -> 13 ms, bench/query.py).
        loaded, probed, reranker = await _in_a_passing_thread(load_everything)
        if reranker is not None:
            await reranker.rerank(WARM_UP_TEXTS[1], WARM_UP_TEXTS)
            server.on_stop.append(reranker.close)
        merge_wait_s = (
            loaded.pass_cost.fixed_s if settings.embedder_batch_wait_ms is None else settings.embedder_batch_wait_ms / 1000
        )
        bulk_workers = GPU_BULK_WORKERS if loaded.device.startswith("cuda") else cpu_threads
        lane_threads = {
            EmbedKind.QUERY: (1, worker_setup(cpu_threads)),
            EmbedKind.PASSAGE: (bulk_workers, worker_setup(BULK_WORKER_THREADS, idle_cores_only=True)),
        }

        def release_bulk_memory() -> None:
            # On a one-CPU machine the query lane runs at one thread too, and its compiled model goes as well.
            loaded.release_pass_memory(BULK_WORKER_THREADS)
            release_free_memory()

        # A query's few tensors are small; a passage batch's are what the process would keep (memory.py).
        on_idle = {EmbedKind.QUERY: None, EmbedKind.PASSAGE: release_bulk_memory}
        token_budget = GPU_TOKEN_BUDGET if loaded.device.startswith("cuda") else CPU_TOKEN_BUDGET

        def make_lane(kind: EmbedKind, workers: int, setup: Callable[[], None]) -> MicroBatcher[Any]:
            common: dict[str, Any] = {
                "dimension": loaded.dimension, "max_batch": settings.embedder_max_batch, "wait_s": merge_wait_s,
                "queue_limit": settings.embedder_queue_limit, "name": f"embedder-{kind.value}",
                "workers": workers, "worker_setup": setup, "on_idle": on_idle[kind],
                "idle_after_s": IDLE_BEFORE_RELEASE_S,
            }
            if isinstance(loaded, EmbeddingModel):  # a torch model: tokenized ahead of its passes
                return MicroBatcher(loaded.encode_tokens, prepare=loaded.tokenize, token_budget=token_budget,
                                    **common)
            return MicroBatcher(loaded.encoder_for(kind), **common)  # an engine that tokenizes its own batches

        lanes = {kind: make_lane(kind, workers, setup) for kind, (workers, setup) in lane_threads.items()}
        for kind, lane in lanes.items():
            lane.start()
            await lane.embed(loaded.with_prefix(WARM_UP_TEXTS, kind))
        at_half = relevance_at_half(loaded.name, probed)
        servicer.ready(loaded, lanes, reranker, probed.floor, at_half)
        await server.health.set_serving(True)
        log.info(
            "serving %s on %s (ready in %.1f s; bursts merge with gaps up to %.1f ms; similarity floor %.3f, "
            "relevance at half %.3f)",
            loaded.name,
            loaded.device,
            time.perf_counter() - started,
            merge_wait_s * 1000,
            probed.floor,
            at_half,
        )

    server.on_start.append(load_and_warm_up)
    server.on_stop.append(servicer.close)
    return server


async def _in_a_passing_thread(load: Callable[[], T]) -> T:
    """Run `load` in a thread of its own that then ends, taking its torch thread pool with it."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedder-load")
    try:
        return await asyncio.get_running_loop().run_in_executor(executor, load)
    finally:
        executor.shutdown(wait=True)
