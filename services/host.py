"""Run one or more services in one process.

The embedded store can be opened by one process only, so on the embedded default
the services that use it (catalog, ingest, query) run together here and share one
`Store`; with a Qdrant server each can run alone (docker-compose does that).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging

from alexandria import settings as config
from alexandria.errors import AlexandriaError
from alexandria.grpc_server import ServiceServer, serve_until_signal
from alexandria.logs import configure_logging
from alexandria.stack import SERVICES
from alexandria.store import Store, open_store

log = logging.getLogger(__name__)

_USES_STORE = {"catalog", "ingest", "query"}
_SETTINGS = {
    "embedder": config.EmbedderSettings,
    "catalog": config.CatalogSettings,
    "ingest": config.IngestSettings,
    "query": config.QuerySettings,
}


def build(name: str, store: Store | None) -> ServiceServer:
    """Create one service's server from its settings (read from the environment here, once)."""
    module = importlib.import_module(f"services.{name}.server")
    settings = _SETTINGS[name]()
    if name in _USES_STORE:
        return module.create_server(settings, store=store)
    return module.create_server(settings)


async def run(names: list[str]) -> None:
    store = open_store(config.StoreSettings()) if _USES_STORE.intersection(names) else None
    try:
        servers = [build(name, store) for name in names]
        await serve_until_signal(servers)
    finally:
        if store is not None:
            store.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m services", description=__doc__)
    parser.add_argument("names", nargs="+", choices=SERVICES, help="services to run in this process")
    names = list(dict.fromkeys(parser.parse_args(argv).names))
    common = config.CommonSettings()
    configure_logging("+".join(names), common.alexandria_log_level)
    try:
        asyncio.run(run(names))
    except AlexandriaError as exc:
        log.error("cannot start: %s", exc.message)
        raise SystemExit(2) from None
