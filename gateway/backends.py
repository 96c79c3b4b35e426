"""The gateway's service clients: one long-lived channel per service, opened once by the MCP server's lifespan."""

from __future__ import annotations

from dataclasses import dataclass

from mcp.server.mcpserver import Context

from alexandria.clients import ServiceClient
from alexandria.settings import GatewaySettings
from alexandria.v1 import catalog_pb2_grpc, ingest_pb2_grpc, query_pb2_grpc


@dataclass
class Backends:
    """The gateway's service clients: one long-lived channel per service, opened once by the lifespan."""

    catalog: ServiceClient
    ingest: ServiceClient
    query: ServiceClient
    # How long the client's model may take to write a hypothetical passage; None: QUERY_SAMPLING is off.
    sampling_timeout_s: float | None = None

    @classmethod
    def open(cls, settings: GatewaySettings) -> Backends:
        """Open the three channels (connections are made lazily, on the first call)."""
        return cls(
            catalog=ServiceClient(
                "catalog", settings.catalog_addr, catalog_pb2_grpc.CatalogServiceStub, settings.clients
            ),
            ingest=ServiceClient(
                "ingest", settings.ingest_addr, ingest_pb2_grpc.IngestServiceStub, settings.clients
            ),
            query=ServiceClient(
                "query", settings.query_addr, query_pb2_grpc.QueryServiceStub, settings.clients
            ),
            sampling_timeout_s=settings.query_sampling_timeout_s if settings.query_sampling else None,
        )

    def all(self) -> list[ServiceClient]:
        """The three clients, in a fixed order."""
        return [self.catalog, self.ingest, self.query]

    async def close(self) -> None:
        """Close the three channels."""
        for client in self.all():
            await client.close()


def backends(ctx: Context) -> Backends:
    """The service clients the server's lifespan opened."""
    return ctx.request_context.lifespan_context  # type: ignore[no-any-return]
