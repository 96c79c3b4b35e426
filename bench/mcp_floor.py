"""An MCP server over stdio with one tool that does no work: what any tool call costs in the MCP SDK
(client, server and the stdio transport) before the tool does anything. bench.query times it.

    python -m bench.mcp_floor    (speaks MCP on stdin/stdout; an MCP client starts it)
"""

from __future__ import annotations

from mcp.server import MCPServer

server = MCPServer("alexandria-bench-floor")


@server.tool()
def echo(query: str) -> dict[str, str]:
    """Return the query, as structured content (as every Alexandria tool does)."""
    return {"query": query}


if __name__ == "__main__":
    server.run("stdio")
