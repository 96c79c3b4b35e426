"""Where the HTTP gateway may listen: loopback is open; beyond it, only with API tokens; and its listening socket.

Apart from the HTTP app so that `alexandria up` checks the rule, and binds the port it hands the gateway, before it
starts anything.
"""

from __future__ import annotations

import errno
import ipaddress
import socket

from alexandria.errors import FailedPrecondition
from alexandria.settings import GatewaySettings

ANY_ADDRESS = ("0.0.0.0", "::", "")


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


def url_host(host: str) -> str:
    """`host` as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket; port 0 picks a free one. Bound before serving so the real port can be logged, and by
    `alexandria up` before anything starts, so that a port in use is refused before the model loads.

    Made with proto IPPROTO_TCP, not 0 as socket.create_server does: asyncio turns Nagle's algorithm
    off (TCP_NODELAY) only on connections whose socket says it is TCP. With Nagle on, the last chunk
    of every streamed response waited for the client's delayed ACK: 40 ms added to each tool call
    on a kept-alive connection.

    Raises FailedPrecondition, naming GATEWAY_HOST / --host or GATEWAY_PORT / --port, when it cannot listen there.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen()
    except (OSError, OverflowError) as exc:  # OverflowError: a port past 65535
        sock.close()
        where = f"{url_host(host)}:{port}"
        if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
            raise FailedPrecondition(
                f"Port {port} ({where}) is in use by another process: stop it, or give the gateway another port "
                "with --port N or GATEWAY_PORT=N (0: any free port)."
            ) from None
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise FailedPrecondition(
            f"The gateway cannot listen on {where} ({reason}): choose an address of this machine with --host or "
            "GATEWAY_HOST, and a port from 1 to 65535 (0: any free one) with --port or GATEWAY_PORT."
        ) from None
    return sock
