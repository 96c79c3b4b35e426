"""Long gRPC calls between real processes' edges: a stream that goes quiet for a while is kept (every channel and
server agree on keepalive), and a stream that broke after its first message is never sent again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from alexandria import grpc_server
from alexandria.clients import WINDOWED_PASSAGES_PER_REQUEST, EmbedderClient, ServiceClient
from alexandria.errors import DeadlineExceeded, InvalidArgument, Unavailable
from alexandria.grpc_server import ServiceServer, build_server
from alexandria.settings import ClientSettings
from alexandria.v1 import embedder_pb2

# gRPC sends a keepalive ping at most once a second, whatever is asked.
KEEPALIVE_S = 1.0
# Longer than the three pings without data gRPC's default server policy tolerates before its GOAWAY.
QUIET_S = 6.0
WATCHED = "alexandria.test.Watched"


@pytest.fixture
def short_keepalive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grpc_server, "KEEPALIVE_S", KEEPALIVE_S)


@pytest.fixture
async def watched_server(short_keepalive: None) -> AsyncIterator[ServiceServer]:
    server = build_server("watched", "127.0.0.1:0", lambda _server: None, [WATCHED])
    await server.start()
    yield server
    await server.stop(grace=0)


async def test_a_stream_quiet_for_longer_than_the_ping_policy_allows_is_kept(watched_server: ServiceServer) -> None:
    client = ServiceClient("watched", watched_server.address, health_pb2_grpc.HealthStub, ClientSettings())
    statuses = []
    try:
        async for answer in client.stream("Watch", health_pb2.HealthCheckRequest(service=WATCHED)):
            statuses.append(answer.status)
            if len(statuses) == 1:  # the first status; nothing more is sent until it changes
                await asyncio.sleep(QUIET_S)
                await watched_server.health.set_serving(True)
            else:
                break
    finally:
        await client.close()
    assert statuses == [health_pb2.HealthCheckResponse.NOT_SERVING, health_pb2.HealthCheckResponse.SERVING]


class _Cut:
    """A streaming method that sends one message, then breaks off as a dropped connection does (UNAVAILABLE)."""

    def __init__(self) -> None:
        self.calls = 0

    async def run(self, request: health_pb2.HealthCheckRequest, context: aio.ServicerContext) -> AsyncIterator[
        health_pb2.HealthCheckResponse
    ]:
        self.calls += 1
        yield health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)
        await context.abort(grpc.StatusCode.UNAVAILABLE, "the connection was cut")

    def register(self, server: aio.Server) -> None:
        handler = grpc.unary_stream_rpc_method_handler(
            self.run,
            request_deserializer=health_pb2.HealthCheckRequest.FromString,
            response_serializer=health_pb2.HealthCheckResponse.SerializeToString,
        )
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("alexandria.test.Cut", {"Run": handler}),))


class _CutStub:
    def __init__(self, channel: aio.Channel) -> None:
        self.Run = channel.unary_stream(
            "/alexandria.test.Cut/Run",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )


async def test_a_stream_broken_after_its_first_message_is_not_sent_again() -> None:
    cut = _Cut()
    server = build_server("cut", "127.0.0.1:0", cut.register, [])
    await server.start()
    client = ServiceClient("ingest", server.address, _CutStub, ClientSettings(rpc_retry_attempts=4))
    received = []
    try:
        with pytest.raises(Unavailable) as refused:
            async for message in client.stream("Run", health_pb2.HealthCheckRequest()):
                received.append(message.status)
    finally:
        await client.close()
        await server.stop(grace=0)
    assert cut.calls == 1, "the broken stream was sent again"
    assert received == [health_pb2.HealthCheckResponse.SERVING]
    assert "broke off while it ran" in str(refused.value) and "Run it again to resume" in str(refused.value)


class _Refused(_Cut):
    """A stream that sends one message, then refuses the request with a domain error, as ingest refuses a file it
    finds bad once it reads it."""

    async def run(self, request: health_pb2.HealthCheckRequest, context: aio.ServicerContext) -> AsyncIterator[
        health_pb2.HealthCheckResponse
    ]:
        self.calls += 1
        yield health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)
        raise InvalidArgument("bomb.epub unpacks to 1.2 GB, more than any book needs")


async def test_a_stream_refused_by_the_service_after_its_first_message_says_why_not_that_it_broke_off() -> None:
    refusing = _Refused()
    server = build_server("ingest", "127.0.0.1:0", refusing.register, [])
    await server.start()
    client = ServiceClient("ingest", server.address, _CutStub, ClientSettings(rpc_retry_attempts=4))
    try:
        with pytest.raises(InvalidArgument, match="^bomb.epub unpacks to 1.2 GB, more than any book needs$"):
            async for _ in client.stream("Run", health_pb2.HealthCheckRequest()):
                pass
    finally:
        await client.close()
        await server.stop(grace=0)
    assert refusing.calls == 1


class _Paced(_Cut):
    """A stream that sends a message every `gap_s`, `count` of them, as a long ingest reports its progress."""

    def __init__(self, gap_s: float, count: int) -> None:
        super().__init__()
        self.gap_s, self.count = gap_s, count

    async def run(self, request: health_pb2.HealthCheckRequest, context: aio.ServicerContext) -> AsyncIterator[
        health_pb2.HealthCheckResponse
    ]:
        self.calls += 1
        for _ in range(self.count):
            yield health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)
            await asyncio.sleep(self.gap_s)


@pytest.mark.parametrize(("gap_s", "count", "fails"), [(0.2, 15, False), (3.0, 2, True)])
async def test_a_stream_runs_as_long_as_its_service_keeps_talking_and_fails_once_it_goes_quiet(
    gap_s: float, count: int, fails: bool
) -> None:
    paced = _Paced(gap_s, count)
    server = build_server("ingest", "127.0.0.1:0", paced.register, [])
    await server.start()
    # Its whole run (3 s) outlasts what a deadline of 1 s would allow: only a quiet of 1 s ends it.
    client = ServiceClient("ingest", server.address, _CutStub, ClientSettings(stream_idle_s=1.0, long_rpc_timeout_s=1.0))
    received = []
    try:
        if fails:
            with pytest.raises(DeadlineExceeded, match="sent nothing for 1 s on Run .STREAM_IDLE_S."):
                async for message in client.stream("Run", health_pb2.HealthCheckRequest()):
                    received.append(message.status)
        else:
            async for message in client.stream("Run", health_pb2.HealthCheckRequest()):
                received.append(message.status)
    finally:
        await client.close()
        await server.stop(grace=0)
    assert len(received) == (1 if fails else count) and paced.calls == 1


async def test_window_slices_still_running_are_cancelled_once_one_fails() -> None:
    """A book whose windows fail stops there: the other slices neither run on nor report progress after it."""
    client = EmbedderClient("127.0.0.1:1", ClientSettings())
    cancelled: list[int] = []

    async def call(method: str, request: embedder_pb2.EmbedWindowsRequest, timeout: float | None = None) -> None:
        if request.passages[0].header == "refused":
            raise InvalidArgument("the first slice is refused")
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(len(request.passages))
            raise

    client.call = call
    passages = [("refused", "text")] + [("header", "text")] * (2 * WINDOWED_PASSAGES_PER_REQUEST)
    answered: list[int] = []
    try:
        with pytest.raises(InvalidArgument, match="first slice is refused"):
            await asyncio.wait_for(client.embed_windows(passages, on_embedded=answered.append), timeout=10)
    finally:
        await client.close()
    assert sorted(cancelled) == [1, WINDOWED_PASSAGES_PER_REQUEST] and answered == []
