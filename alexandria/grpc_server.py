"""The one shape every service has: settings -> create_server -> serve.

`build_server` makes a `grpc.aio` server with the error-mapping interceptor, the
stock health servicer (NOT_SERVING until the service says its dependencies are
ready) and server reflection, bound to one listen address (`host:port`, port 0
for any free port, or `unix:///path.sock`). `serve_until_signal` runs servers
until SIGINT/SIGTERM and stops them gracefully.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import signal
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from grpc import aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from alexandria.errors import ErrorMappingInterceptor

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
SHUTDOWN_GRACE_S = 5.0
SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
]


# A client pings a connection whose call has gone quiet this often: a long stream that sends nothing for a while
# (a slow book, a reindex waiting its turn) is kept, and a peer that vanished is noticed.
KEEPALIVE_S = 30.0
# gRPC's own floor for a client's keepalive: whatever keepalive a client pings at, its pings are taken.
MIN_PING_INTERVAL_S = 1.0


def client_keepalive_options() -> list[tuple[str, int]]:
    """A channel's keepalive: a ping every KEEPALIVE_S while a call is open, however long it sends nothing
    (gRPC's default stops after two pings without data)."""
    return [
        ("grpc.keepalive_time_ms", int(KEEPALIVE_S * 1000)),
        ("grpc.http2.max_pings_without_data", 0),
    ]


def server_keepalive_options() -> list[tuple[str, int]]:
    """A server's ping policy, to match the clients': gRPC's default allows one ping every five minutes while no
    data flows and answers more with GOAWAY "too_many_pings", which cuts a long stream that goes quiet. It takes
    one every MIN_PING_INTERVAL_S: a client pinging more often than this server's clients (a CLI on the host, the
    services in containers) is answered too."""
    return [
        ("grpc.http2.min_ping_interval_without_data_ms", int(MIN_PING_INTERVAL_S * 1000)),
        ("grpc.keepalive_permit_without_calls", 1),
    ]


class Closable(Protocol):
    def close(self) -> Any: ...  # None, or an awaitable for an async resource


@dataclass
class Health:
    """The stock health servicer, flipped for the overall server ("") and each named service at once."""

    servicer: health.aio.HealthServicer
    service_names: list[str] = field(default_factory=list)

    async def set_serving(self, serving: bool) -> None:
        status = (
            health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in ["", *self.service_names]:
            await self.servicer.set(name, status)


@dataclass
class ServiceServer:
    """A built (not yet started) server, the port it is bound to, and its health switch."""

    name: str
    server: aio.Server
    port: int
    address: str
    health: Health
    # Run once the server is listening, e.g. load a model, then `await health.set_serving(True)`.
    on_start: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    on_stop: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def start(self) -> None:
        # The stock servicer starts "" as SERVING and named services unknown: say NOT_SERVING until ready.
        await self.health.set_serving(False)
        await self.server.start()
        log.info("%s listening on %s", self.name, self.address)
        for callback in self.on_start:
            await callback()

    async def stop(self, grace: float = SHUTDOWN_GRACE_S) -> None:
        await self.health.set_serving(False)
        await self.server.stop(grace)
        for callback in self.on_stop:
            await callback()

    def close_on_stop(self, resource: Closable) -> None:
        """Close `resource` (a store, a client: one this server opened itself) once the server has stopped."""

        async def close() -> None:
            closing = resource.close()
            if inspect.isawaitable(closing):
                await closing

        self.on_stop.append(close)

    def serve_when_ready(self, ready: Callable[[], Awaitable[None]]) -> None:
        """Once started, flip health to SERVING as soon as `ready()` returns (e.g. the embedder answers).

        It runs in the background, so the other services of the process need not wait for it; its task
        is kept, cancelled on stop, and a failure is logged (the service then stays NOT_SERVING).
        """
        readiness: list[asyncio.Task[None]] = []

        async def become_serving() -> None:
            await ready()
            await self.health.set_serving(True)

        def log_failure(task: asyncio.Task[None]) -> None:
            if not task.cancelled() and task.exception() is not None:
                log.error("%s stays NOT_SERVING: %s", self.name, task.exception(), exc_info=task.exception())

        async def start() -> None:
            task = asyncio.create_task(become_serving(), name=f"{self.name}-readiness")
            task.add_done_callback(log_failure)
            readiness.append(task)

        async def cancel() -> None:
            for task in readiness:
                task.cancel()

        self.on_start.append(start)
        self.on_stop.insert(0, cancel)


def build_server(
    name: str,
    listen: str,
    register: Callable[[aio.Server], None],
    service_full_names: Iterable[str],
) -> ServiceServer:
    """Create a server for one service: `register` adds its servicer; health starts NOT_SERVING."""
    server = aio.server(interceptors=[ErrorMappingInterceptor(name)],
                        options=SERVER_OPTIONS + server_keepalive_options())
    register(server)
    names = list(service_full_names)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection([*names, reflection.SERVICE_NAME, health.SERVICE_NAME], server)
    if listen.startswith("unix:"):
        socket_path = Path(listen.removeprefix("unix://").removeprefix("unix:"))
        socket_path.parent.mkdir(parents=True, exist_ok=True)
        socket_path.unlink(missing_ok=True)
    port = server.add_insecure_port(listen)
    address = listen if listen.startswith("unix:") else f"{listen.rsplit(':', 1)[0]}:{port}"
    return ServiceServer(name=name, server=server, port=port, address=address, health=Health(health_servicer, names))


async def serve_until_signal(servers: list[ServiceServer]) -> None:
    """Start the servers (each runs its on_start, which flips health when ready), stop on SIGINT/SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    for s in servers:
        await s.start()
    waiter = asyncio.ensure_future(stop.wait())
    terminations = [asyncio.ensure_future(s.server.wait_for_termination()) for s in servers]
    await asyncio.wait([waiter, *terminations], return_when=asyncio.FIRST_COMPLETED)
    log.info("stopping %s", ", ".join(s.name for s in servers))
    for s in servers:
        await s.stop()
    for task in [waiter, *terminations]:
        task.cancel()
