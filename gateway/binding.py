"""Where the HTTP gateway may listen: loopback is open; beyond it, only with API tokens.

Apart from the HTTP app so that `alexandria up` checks the rule before it starts anything.
"""

from __future__ import annotations

import ipaddress

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
