"""`python -m gateway --transport stdio|http [--host H] [--port P]`: the MCP gateway.

stdio is for MCP clients that start the gateway themselves (Claude Code's .mcp.json); nothing but
the protocol goes to stdout. http serves Streamable HTTP and logs its URL on stderr (`--port 0`
picks a free port). Everything else comes from GatewaySettings (environment variables).
"""

from __future__ import annotations

import argparse
import asyncio
import logging

from alexandria.errors import AlexandriaError
from alexandria.lifetime import end_with_launcher
from alexandria.logs import configure_logging
from alexandria.settings import CommonSettings, GatewaySettings, settings_refusal
from gateway.app import create_app
from gateway.http import serve_http

log = logging.getLogger("gateway")


def main(argv: list[str] | None = None) -> None:
    """Read settings and arguments, then serve over the chosen transport until stopped."""
    parser = argparse.ArgumentParser(prog="python -m gateway", description="Alexandria's MCP gateway.")
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--host", help="HTTP bind address (default: GATEWAY_HOST, 127.0.0.1).")
    parser.add_argument(
        "--port", type=int, help="HTTP port, 0 for any free one (default: GATEWAY_PORT, 8765)."
    )
    parser.add_argument("--launcher-pid", type=int, help="end when this process (`alexandria up`) ends")
    args = parser.parse_args(argv)

    end_with_launcher(args.launcher_pid)
    refusal = settings_refusal()
    if refusal is not None:
        raise SystemExit(refusal)
    common = CommonSettings()
    configure_logging("gateway", common.alexandria_log_level)
    settings = GatewaySettings()
    overrides = {"gateway_host": args.host, "gateway_port": args.port}
    settings = settings.model_copy(
        update={key: value for key, value in overrides.items() if value is not None}
    )
    gateway = create_app(settings)
    try:
        if args.transport == "stdio":
            asyncio.run(gateway.mcp.run_stdio_async())
        else:
            asyncio.run(serve_http(gateway))
    except AlexandriaError as exc:
        log.error("%s", exc.message)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
