"""Streamable HTTP: the MCP endpoint (/mcp, stateless), GET /health, and the guards in front of them.

Safety, outermost first:
1. Body limit: a request body over GATEWAY_MAX_BODY_BYTES gets 413 before anything reads it.
2. Bearer tokens, when GATEWAY_TOKENS is set (fail closed): no or unknown token gets 401; a tools/call
   for a tool whose scope the token lacks gets 403; both say why in a JSON-RPC error body and in
   WWW-Authenticate. "read" covers the query, search, book, stats,
   guardians, preview, browse and chunking-test tools; "ingest" the tools that write or remove.
   /health answers loopback clients without a token (container health checks run inside the
   container) and needs a valid token from anywhere else.
3. Host and Origin headers (DNS rebinding): the SDK's transport security, allowing loopback,
   GATEWAY_ALLOWED_HOSTS (e.g. `gateway:8765` for a compose service name) and the bound address.
Serving beyond loopback without tokens is refused at start-up; on loopback without tokens it is open.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import uvicorn
from mcp.server.transport_security import RequestBodyLimitMiddleware, TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from alexandria.clients import ServiceHealth, check_health
from alexandria.grpc_server import SHUTDOWN_GRACE_S
from alexandria.settings import GatewaySettings
from gateway.app import Gateway
from gateway.backends import Backends
from gateway.binding import ANY_ADDRESS, bind_socket, is_loopback, require_safe_binding, url_host
from gateway.shutdown import ToolCalls

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
HEALTH_PATH = "/health"
LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
# JSON-RPC error codes of refused requests, in the range the spec leaves to servers.
UNAUTHORIZED = -32001
FORBIDDEN = -32003


def transport_security(settings: GatewaySettings) -> TransportSecuritySettings:
    """DNS-rebinding protection: the Host (and Origin, when sent) must name this gateway."""
    hosts = [*LOOPBACK_HOSTS, *settings.gateway_allowed_hosts]
    bound = f"{url_host(settings.gateway_host)}:*"
    # Any bound address is its own name, other loopback addresses (127.0.0.2) included.
    if settings.gateway_host not in ANY_ADDRESS and bound not in hosts:
        hosts.append(bound)
    origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


async def backend_health(backends: Backends) -> dict[str, ServiceHealth]:
    """Each service's health over the gateway's own channel, in the words `alexandria status` uses."""

    clients = backends.all()
    statuses = await asyncio.gather(*(check_health(client.channel) for client in clients))
    return {client.name: status for client, status in zip(clients, statuses, strict=True)}


def _health_endpoint(gateway: Gateway) -> Callable[[Request], Awaitable[JSONResponse]]:
    async def health(_request: Request) -> JSONResponse:
        """200 when every backing service is SERVING, else 503; the body has each one's status."""
        if gateway.backends is None:
            return JSONResponse({"status": "starting", "services": {}}, status_code=503)
        services = await backend_health(gateway.backends)
        healthy = all(status is ServiceHealth.SERVING for status in services.values())
        return JSONResponse(
            {"status": "ok" if healthy else "degraded", "services": services},
            status_code=200 if healthy else 503,
        )

    return health


class BearerTokenGuard:
    """ASGI middleware: every request needs a configured token; tools/call needs the tool's scope too."""

    def __init__(
        self, app: ASGIApp, tokens: dict[str, list[str]], scope_of: Callable[[str], str | None]
    ) -> None:
        self.app = app
        self._tokens = [(token.encode(), frozenset(scopes)) for token, scopes in tokens.items()]
        self._scope_of = scope_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        if scope["path"] == HEALTH_PATH and client and is_loopback(client[0]):
            await self.app(scope, receive, send)
            return
        granted = self._granted(Headers(scope=scope).get("authorization", ""))
        if granted is None:
            message = "A valid 'Authorization: Bearer <token>' header is required."
            await _deny(Denial(401, UNAUTHORIZED, "invalid_token", message), scope, receive, send)
            return
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        messages = _json_rpc_messages(body)
        for tool, needed in self._needed_scopes(messages).items():
            if needed not in granted:
                message = f"This token lacks the '{needed}' scope that {tool} needs."
                denial = Denial(403, FORBIDDEN, "insufficient_scope", message, needed, _single_id(messages))
                await _deny(denial, scope, receive, send)
                return
        await self.app(scope, _replay(body, receive), send)

    def _granted(self, authorization: str) -> frozenset[str] | None:
        scheme, _, presented = authorization.partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            return None
        candidate = presented.strip().encode()
        granted = None
        # Compare with every token, in constant time each, so timing says nothing about which matched.
        for token, scopes in self._tokens:
            if hmac.compare_digest(token, candidate):
                granted = scopes
        return granted

    def _needed_scopes(self, messages: list[Any]) -> dict[str, str]:
        """Tool name -> the scope it needs, for each tools/call among the JSON-RPC messages."""
        needed: dict[str, str] = {}
        for message in messages:
            if not isinstance(message, dict) or message.get("method") != "tools/call":
                continue
            params = message.get("params")
            name = params.get("name") if isinstance(params, dict) else None
            # Fail closed: a name that is no tool needs the stronger scope.
            needed[str(name)] = (self._scope_of(name) if isinstance(name, str) else None) or "ingest"
        return needed


def _json_rpc_messages(body: bytes) -> list[Any]:
    """The messages of a JSON-RPC body (one or a batch); none when it is not JSON."""
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser goes
        return []  # the MCP endpoint answers with a parse error
    return payload if isinstance(payload, list) else [payload]


def _single_id(messages: list[Any]) -> Any:
    """The request id when the body is one request, so the client can match the error to its call."""
    return messages[0].get("id") if len(messages) == 1 and isinstance(messages[0], dict) else None


@dataclass(frozen=True)
class Denial:
    """A refused request, said both ways a client may read it: a JSON-RPC error body (MCP clients show
    its message) and an RFC 6750 WWW-Authenticate header."""

    status: int
    code: int
    oauth_error: str
    message: str
    scope: str | None = None
    request_id: Any = None

    def challenge(self) -> str:
        description = self.message.replace('"', "'")
        parts = ['Bearer realm="alexandria"', f'error="{self.oauth_error}"', f'error_description="{description}"']
        if self.scope:
            parts.append(f'scope="{self.scope}"')
        return ", ".join(parts)


async def _deny(denial: Denial, scope: Scope, receive: Receive, send: Send) -> None:
    body = {"jsonrpc": "2.0", "id": denial.request_id, "error": {"code": denial.code, "message": denial.message}}
    headers = {"WWW-Authenticate": denial.challenge()}
    await JSONResponse(body, status_code=denial.status, headers=headers)(scope, receive, send)


async def _read_body(receive: Receive) -> bytes:
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        body.extend(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return bytes(body)


def _replay(body: bytes, receive: Receive) -> Receive:
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


def create_http_app(gateway: Gateway) -> Starlette:
    """The HTTP app: /mcp (Streamable HTTP, stateless) and /health behind the body limit and token guard."""
    settings = gateway.settings
    require_safe_binding(settings)
    mcp_app = gateway.mcp.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        max_request_body_size=settings.gateway_max_body_bytes,
        transport_security=transport_security(settings),
        host=settings.gateway_host,
    )
    middleware = [Middleware(RequestBodyLimitMiddleware, max_body_size=settings.gateway_max_body_bytes)]
    if settings.gateway_tokens:
        middleware.append(
            Middleware(BearerTokenGuard, tokens=settings.gateway_tokens, scope_of=gateway.scope_of)
        )
    return Starlette(
        routes=[Route(HEALTH_PATH, _health_endpoint(gateway), methods=["GET"]), Mount("/", app=mcp_app)],
        middleware=middleware,
        # A mounted app's lifespan does not run by itself; this one opens the backends and sessions.
        lifespan=lambda _app: gateway.mcp.session_manager.run(),
    )


class GatewayServer(uvicorn.Server):
    """uvicorn, which on SIGINT/SIGTERM stops accepting connections, waits for the requests in flight, then
    cancels them. The gateway's tool calls are told first, so that their own grace period ends before
    uvicorn's and each still running answers with an error instead of a dropped connection."""

    def __init__(self, app: ASGIApp, calls: ToolCalls) -> None:
        super().__init__(uvicorn.Config(
            app, log_config=None, lifespan="on",
            timeout_graceful_shutdown=math.ceil(calls.grace_s + SHUTDOWN_GRACE_S),
        ))
        self.calls = calls

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.calls.stop()
        await super().shutdown(sockets)


def http_server(gateway: Gateway) -> GatewayServer:
    """A uvicorn server for the gateway's HTTP app, logging through our stderr handler (uvicorn's own config
    uses stdout)."""
    return GatewayServer(create_http_app(gateway), gateway.calls)


async def serve_http(gateway: Gateway, listening: socket.socket | None = None) -> None:
    """Serve the gateway over HTTP until SIGINT/SIGTERM on `listening` (the socket `alexandria up` bound, and keeps
    for the gateway it restarts), else on a socket bound to GATEWAY_HOST and GATEWAY_PORT; logs the URL on stderr."""
    server = http_server(gateway)
    sock = listening or bind_socket(gateway.settings.gateway_host, gateway.settings.gateway_port)
    host, port = sock.getsockname()[:2]
    log.info("listening on http://%s:%d%s (health: %s)", url_host(host), port, MCP_PATH, HEALTH_PATH)
    await server.serve(sockets=[sock])
