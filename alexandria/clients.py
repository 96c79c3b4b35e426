"""Client edge of every gRPC call: one long-lived channel per target, a deadline on
every call, bounded jittered retries for UNAVAILABLE only, and typed exceptions
(`alexandria.errors`) instead of raw statuses.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import grpc
import numpy as np
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from alexandria.errors import (
    DeadlineExceeded,
    InternalError,
    Unavailable,
    from_rpc_error,
    raised_by_a_service,
)
from alexandria.grpc_server import MAX_MESSAGE_BYTES, client_keepalive_options
from alexandria.settings import ClientSettings
from alexandria.v1 import embedder_pb2, embedder_pb2_grpc

log = logging.getLogger(__name__)

_ROUND_ROBIN = '{"loadBalancingConfig": [{"round_robin": {}}]}'


def channel_target(address: str) -> str:
    """Accept `host:port`, `unix:///path`, `dns:///name:port`, or several `host:port` joined by commas."""
    if "," in address and "://" not in address:
        hosts = [a.strip() for a in address.split(",") if a.strip()]
        scheme = "ipv6" if any(h.startswith("[") for h in hosts) else "ipv4"
        return f"{scheme}:{','.join(hosts)}"
    return address


def open_channel(address: str) -> aio.Channel:
    """One channel per target, balanced round-robin over every address the target resolves to."""
    return aio.insecure_channel(
        channel_target(address),
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.service_config", _ROUND_ROBIN),
            ("grpc.enable_retries", 0),
            *client_keepalive_options(),
            # A service restarted after a crash is found again within a second or two, not gRPC's default
            # backoff of up to two minutes.
            ("grpc.initial_reconnect_backoff_ms", 200),
            ("grpc.max_reconnect_backoff_ms", 2_000),
        ],
    )


def _is_unavailable(exc: BaseException) -> bool:
    return isinstance(exc, grpc.RpcError) and exc.code() == grpc.StatusCode.UNAVAILABLE


# Tokens consecutive windows of a passage share, so that a sentence cut by one window's end is whole in
# the next: a quarter of MiniLM's 256 (the windows bench, bench/windows.py in git history: overlaps of 0, 64 and 128 within noise of each
# other on the tuning half).
WINDOW_OVERLAP_TOKENS = 64

class ServiceClient:
    """Calls one service's stub: `await client.call("Method", request)` or `async for m in client.stream(...)`."""

    def __init__(self, name: str, address: str, stub_class: type, settings: ClientSettings) -> None:
        self.name = name
        self.address = address
        self.channel = open_channel(address)
        self.stub = stub_class(self.channel)
        self.settings = settings

    def _retrying(self, retry: Callable[[BaseException], bool] = _is_unavailable) -> AsyncRetrying:
        return AsyncRetrying(
            retry=retry_if_exception(retry),
            wait=wait_random_exponential(multiplier=0.05, max=2.0),
            stop=stop_after_attempt(self.settings.rpc_retry_attempts),
            reraise=True,
        )

    async def call(self, method: str, request: Any, timeout: float | None = None, wait_for_ready: bool = False) -> Any:
        """A unary call with a deadline; UNAVAILABLE is retried, every failure comes out typed.

        `wait_for_ready` waits (within the deadline) for a service that is starting, instead of failing fast.
        """
        rpc = getattr(self.stub, method)
        try:
            async for attempt in self._retrying():
                with attempt:
                    return await rpc(request, timeout=timeout or self.settings.rpc_timeout_s,
                                     wait_for_ready=wait_for_ready)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, self.name) from None
        raise AssertionError("unreachable: tenacity reraises")

    async def stream(self, method: str, request: Any) -> AsyncGenerator[Any, None]:
        """A server-streaming call; retried on UNAVAILABLE only until its first message arrives. Once one has, the
        work has begun on the server (and may still be going on there): it is never sent again, and a break
        comes out as Unavailable saying so. It runs as long as its work takes, and fails as DeadlineExceeded
        only once the service has sent nothing for STREAM_IDLE_S."""
        rpc = getattr(self.stub, method)
        idle_s = self.settings.stream_idle_s
        received = False

        def may_send_again(exc: BaseException) -> bool:
            return not received and _is_unavailable(exc)

        try:
            async for attempt in self._retrying(may_send_again):
                with attempt:
                    call = rpc(request)
                    messages = aiter(call)
                    try:
                        while True:
                            try:
                                async with asyncio.timeout(idle_s):  # no task of its own: a caller's cancel stays one
                                    message = await anext(messages)
                            except StopAsyncIteration:
                                return
                            except TimeoutError:
                                raise DeadlineExceeded(
                                    f"The {self.name} service sent nothing for {idle_s:.0f} s on {method} "
                                    "(STREAM_IDLE_S); what it finished is kept. Run it again to resume."
                                ) from None
                            received = True
                            yield message
                    finally:
                        call.cancel()  # a caller that stopped reading, or gave up on the service: it stops too
        except grpc.RpcError as exc:
            # A service's own answer (a file refused halfway through its ingest) is no break: it says what it says.
            if received and not raised_by_a_service(exc):
                log.warning("%s.%s broke off after its first message: %s", self.name, method, exc)
                raise Unavailable(
                    f"The call to the {self.name} service ({method}) broke off while it ran ({exc.code().name}: "
                    f"{exc.details()}); what it finished is kept. Run it again to resume: books already written "
                    "are skipped."
                ) from None
            raise from_rpc_error(exc, self.name) from None

    async def close(self) -> None:
        await self.channel.close()


HEALTH_TIMEOUT_S = 2.0


class ServiceHealth(StrEnum):
    """A service's health as `alexandria status`, the gateway's /health and the health check say it: the gRPC
    health protocol's status name, or UNREACHABLE when the service does not answer."""

    SERVING = "SERVING"
    NOT_SERVING = "NOT_SERVING"
    UNKNOWN = "UNKNOWN"
    SERVICE_UNKNOWN = "SERVICE_UNKNOWN"
    UNREACHABLE = "UNREACHABLE"


async def check_health(channel: aio.Channel, timeout: float = HEALTH_TIMEOUT_S) -> ServiceHealth:
    """The health of the service behind `channel`."""
    try:
        response = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=timeout
        )
    except aio.AioRpcError:
        return ServiceHealth.UNREACHABLE
    return ServiceHealth(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))


async def health_status(address: str, timeout: float = HEALTH_TIMEOUT_S) -> ServiceHealth:
    """`check_health` over a short-lived channel to `address`."""
    async with aio.insecure_channel(channel_target(address)) as channel:
        return await check_health(channel, timeout)


async def wait_until_serving(address: str, timeout: float) -> None:
    """Follow the service's health stream until it says SERVING (no polling loop)."""
    async with aio.insecure_channel(channel_target(address)) as channel:
        stream = health_pb2_grpc.HealthStub(channel).Watch(
            health_pb2.HealthCheckRequest(service=""), timeout=timeout, wait_for_ready=True
        )
        async for response in stream:
            if response.status == health_pb2.HealthCheckResponse.SERVING:
                stream.cancel()
                return
    raise TimeoutError(f"{address} did not become SERVING")


@dataclass(frozen=True)
class EmbeddedTexts:
    """Vectors for a list of texts, in input order, and how many texts the model truncated."""

    vectors: np.ndarray  # (count, dimension) float32, L2-normalised
    truncated: int


# A passage of the contract's longest chunks (10,000 words) makes about 70 windows of 256 tokens: 32 such
# passages stay under the embedder's 4,096 texts a request.
WINDOWED_PASSAGES_PER_REQUEST = 32
WINDOW_REQUESTS_IN_FLIGHT = 4


class EmbedderClient(ServiceClient):
    """The embedder's client, decoding packed float32 vectors into numpy arrays."""

    def __init__(self, address: str, settings: ClientSettings) -> None:
        super().__init__("embedder", address, embedder_pb2_grpc.EmbedderServiceStub, settings)
        # Texts per message; the server refuses more than 4096 in one message.
        self.stream_chunk = settings.embed_stream_chunk

    async def model_info(self, wait_for_ready: bool = False) -> embedder_pb2.ModelInfo:
        info: embedder_pb2.ModelInfo = await self.call(
            "GetModelInfo", embedder_pb2.GetModelInfoRequest(), wait_for_ready=wait_for_ready
        )
        return info

    async def wait_until_ready(self) -> embedder_pb2.ModelInfo:
        """The model, once the embedder's health says SERVING (it is loading its model until then)."""
        await wait_until_serving(self.address, self.settings.embedder_start_wait_s)
        return await self.model_info(wait_for_ready=True)

    async def embed(
        self,
        texts: list[str],
        kind: embedder_pb2.EmbedKind = embedder_pb2.EMBED_KIND_PASSAGE,
        neighbour_similarities: bool = False,
    ) -> embedder_pb2.EmbedResponse:
        request = embedder_pb2.EmbedRequest(texts=texts, kind=kind, neighbour_similarities=neighbour_similarities)
        response: embedder_pb2.EmbedResponse = await self.call("Embed", request, timeout=self.settings.embed_timeout_s)
        return response

    async def rerank(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """Each passage's relevance to `query` in [0, 1], by the embedder's cross-encoder."""
        response = await self.call("Rerank", embedder_pb2.RerankRequest(query=query, passages=list(passages)))
        return np.asarray(response.scores, dtype=np.float32)

    async def embed_query(self, text: str) -> np.ndarray:
        response = await self.embed([text], kind=embedder_pb2.EMBED_KIND_QUERY)
        vector: np.ndarray = decode_vectors(response)[0]
        return vector

    async def embed_windows(
        self, passages: Sequence[tuple[str, str]], overlap_tokens: int = WINDOW_OVERLAP_TOKENS,
        on_embedded: Callable[[int], None] | None = None,
    ) -> list[np.ndarray]:
        """Each (header, text) passage's window vectors (EmbedWindows), one (windows, dimension) array a
        passage. The passages go in slices, a few at once: enough to keep the model's batches full. Bulk work
        like EmbedStream, each slice has the long deadline: a large model on a CPU takes tens of seconds for
        one (all-mpnet-base-v2 missed the short one). `on_embedded` hears how many passages each slice held as
        it is answered: progress every few seconds, not once for all."""
        in_flight = asyncio.Semaphore(WINDOW_REQUESTS_IN_FLIGHT)

        async def embed(part: Sequence[tuple[str, str]]) -> embedder_pb2.EmbedWindowsResponse:
            async with in_flight:
                response: embedder_pb2.EmbedWindowsResponse = await self.call(
                    "EmbedWindows", embedder_pb2.EmbedWindowsRequest(
                        passages=[embedder_pb2.WindowedPassage(header=header, text=text) for header, text in part],
                        overlap_tokens=overlap_tokens),
                    timeout=self.settings.long_rpc_timeout_s)
                if on_embedded is not None:
                    on_embedded(len(part))
                return response

        # A task group, not gather: once a slice fails, the others are cancelled rather than left to run on and
        # report progress after the book has failed.
        try:
            async with asyncio.TaskGroup() as slices:
                requests = [slices.create_task(embed(passages[start : start + WINDOWED_PASSAGES_PER_REQUEST]))
                            for start in range(0, len(passages), WINDOWED_PASSAGES_PER_REQUEST)]
        except BaseExceptionGroup as failed:
            raise failed.exceptions[0] from None
        responses = [request.result() for request in requests]
        vectors: list[np.ndarray] = []
        for response in responses:
            rows = np.frombuffer(response.vectors, dtype="<f4").reshape(-1, response.dimension)
            bounds = np.cumsum([0, *response.windows])
            vectors += [rows[bounds[n] : bounds[n + 1]] for n in range(len(response.windows))]
        return vectors

    async def embed_many(
        self, texts: Sequence[str], kind: embedder_pb2.EmbedKind = embedder_pb2.EMBED_KIND_PASSAGE
    ) -> EmbeddedTexts:
        """Embed any number of texts: one call when they fit a message, else EmbedStream in slices."""
        if len(texts) <= self.stream_chunk:
            response = await self.embed(list(texts), kind=kind)
            return EmbeddedTexts(decode_vectors(response), response.truncated)
        # A list, not a generator: a retry after UNAVAILABLE sends the same requests again.
        requests = [
            embedder_pb2.EmbedRequest(
                texts=texts[start : start + self.stream_chunk], kind=kind, sequence=sequence
            )
            for sequence, start in enumerate(range(0, len(texts), self.stream_chunk))
        ]
        parts: dict[int, np.ndarray] = {}
        truncated = 0
        async for response in self.stream("EmbedStream", requests):
            parts[response.sequence] = decode_vectors(response)
            truncated += response.truncated
        if len(parts) != len(requests):
            raise InternalError(
                f"The embedder answered {len(parts)} of {len(requests)} slices of a stream; retry the call."
            )
        vectors = np.concatenate([parts[sequence] for sequence in range(len(requests))])
        return EmbeddedTexts(vectors, truncated)


def decode_vectors(response: embedder_pb2.EmbedResponse) -> np.ndarray:
    """The (count, dimension) float32 matrix packed in an EmbedResponse."""
    return np.frombuffer(response.vectors, dtype="<f4").reshape(response.count, response.dimension)
