"""The fourteen MCP tools (see base.py). Importing the tool modules registers the tools, and the order of
the imports is the order in which clients list them."""

# isort: off
from gateway.tools import query, catalog, ingest  # noqa: F401  (registers the tools)
# isort: on
from gateway.tools.base import GatewayTool, Scope, build_tools

__all__ = ["GatewayTool", "Scope", "build_tools"]
