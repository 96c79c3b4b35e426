"""Streamable HTTP: the MCP endpoint (/mcp, stateless), GET /health, and the guards in front of them.

Safety, outermost first:
1. Body limit: a request body over GATEWAY_MAX_BODY_BYTES gets 413 before anything reads it.
2. Bearer tokens, when GATEWAY_TOKENS is set (fail closed): no or unknown token gets 401; a tools/call
   for a tool whose scope the token lacks gets 403. "read" covers the query, search, book, stats,
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
import ipaddress
import json
import logging
import socket
from collections.abc import Awaitable, Callable

import uvicorn
from mcp.server.transport_security import RequestBodyLimitMiddleware, TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from alexandria.clients import check_health
from alexandria.errors import FailedPrecondition
from alexandria.grpc_server import SHUTDOWN_GRACE_S
from alexandria.settings import GatewaySettings
from gateway.app import Backends, Gateway

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
HEALTH_PATH = "/health"
HEALTH_TIMEOUT_S = 2.0
LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
_ANY_ADDRESS = ("0.0.0.0", "::", "")


def is_loopback(host: str) -> bool:
    """Whether a bind address or client address is loopback-only (names other than localhost are not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def require_safe_binding(settings: GatewaySettings) -> None:
    """Refuse to serve beyond loopback unless API tokens are configured."""
    if not is_loopback(settings.gateway_host) and not settings.gateway_tokens:
        raise FailedPrecondition(
            f"Refusing to serve HTTP on {settings.gateway_host!r}, beyond loopback, without API tokens. "
            """Set GATEWAY_TOKENS (e.g. '{"<secret>": ["read", "ingest"]}') or bind GATEWAY_HOST=127.0.0.1."""
        )


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def transport_security(settings: GatewaySettings) -> TransportSecuritySettings:
    """DNS-rebinding protection: the Host (and Origin, when sent) must name this gateway."""
    hosts = [*LOOPBACK_HOSTS, *settings.gateway_allowed_hosts]
    if settings.gateway_host not in _ANY_ADDRESS and not is_loopback(settings.gateway_host):
        hosts.append(f"{_url_host(settings.gateway_host)}:*")
    origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


async def backend_health(backends: Backends) -> dict[str, str]:
    """Each service's gRPC health status over the gateway's own channel: SERVING, NOT_SERVING or UNREACHABLE
    (the words `alexandria status` uses)."""

    clients = backends.all()
    statuses = await asyncio.gather(*(check_health(client.channel, HEALTH_TIMEOUT_S) for client in clients))
    return {client.name: status for client, status in zip(clients, statuses, strict=True)}


def _health_endpoint(gateway: Gateway) -> Callable[[Request], Awaitable[JSONResponse]]:
    async def health(_request: Request) -> JSONResponse:
        """200 when every backing service is SERVING, else 503; the body has each one's status."""
        if gateway.backends is None:
            return JSONResponse({"status": "starting", "services": {}}, status_code=503)
        services = await backend_health(gateway.backends)
        healthy = all(status == "SERVING" for status in services.values())
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
            await _deny(
                401, "A valid 'Authorization: Bearer <token>' header is required.", scope, receive, send
            )
            return
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        for tool, needed in self._needed_scopes(body).items():
            if needed not in granted:
                message = f"This token lacks the '{needed}' scope that {tool} needs."
                await _deny(403, message, scope, receive, send)
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

    def _needed_scopes(self, body: bytes) -> dict[str, str]:
        """Tool name -> the scope it needs, for each tools/call in a JSON-RPC body."""
        try:
            payload = json.loads(body)
        except ValueError:
            return {}  # not JSON: the MCP endpoint answers with a parse error
        needed: dict[str, str] = {}
        for message in payload if isinstance(payload, list) else [payload]:
            if not isinstance(message, dict) or message.get("method") != "tools/call":
                continue
            params = message.get("params")
            name = params.get("name") if isinstance(params, dict) else None
            # Fail closed: a name that is no tool needs the stronger scope.
            needed[str(name)] = (self._scope_of(name) if isinstance(name, str) else None) or "ingest"
        return needed


async def _deny(status: int, message: str, scope: Scope, receive: Receive, send: Send) -> None:
    headers = {"WWW-Authenticate": 'Bearer realm="alexandria"'} if status == 401 else None
    await JSONResponse({"error": message}, status_code=status, headers=headers)(scope, receive, send)


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


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket; port 0 picks a free one. Bound before serving so the real port can be logged.

    Made with proto IPPROTO_TCP, not 0 as socket.create_server does: asyncio turns Nagle's algorithm
    off (TCP_NODELAY) only on connections whose socket says it is TCP. With Nagle on, the last chunk
    of every streamed response waited for the client's delayed ACK: 40 ms added to each tool call
    on a kept-alive connection.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen()
    except OSError:
        sock.close()
        raise
    return sock


def http_server(app: ASGIApp) -> uvicorn.Server:
    """A uvicorn server for the app, logging through our stderr handler (uvicorn's own config uses stdout)."""
    return uvicorn.Server(
        uvicorn.Config(app, log_config=None, lifespan="on", timeout_graceful_shutdown=int(SHUTDOWN_GRACE_S))
    )


async def serve_http(gateway: Gateway) -> None:
    """Serve the gateway over HTTP until SIGINT/SIGTERM; logs the bound URL on stderr."""
    app = create_http_app(gateway)
    sock = bind_socket(gateway.settings.gateway_host, gateway.settings.gateway_port)
    host, port = sock.getsockname()[:2]
    log.info("listening on http://%s:%d%s (health: %s)", _url_host(host), port, MCP_PATH, HEALTH_PATH)
    await http_server(app).serve(sockets=[sock])
