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
from alexandria.store import Store, open_store

log = logging.getLogger(__name__)

_SETTINGS = {
    "embedder": config.EmbedderSettings,
    "catalog": config.CatalogSettings,
    "ingest": config.IngestSettings,
    "query": config.QuerySettings,
}
# The four services, in the order a stack starts them.
SERVICES = tuple(_SETTINGS)


def uses_store(name: str) -> bool:
    """Whether the service reads or writes the store: its settings say which store."""
    return "store" in _SETTINGS[name].model_fields


def build(name: str, store: Store | None) -> ServiceServer:
    """Create one service's server from its settings (read from the environment here, once), handing the
    services that use the store the one this process opened."""
    module = importlib.import_module(f"services.{name}.server")
    shared = {"store": store} if uses_store(name) else {}
    return module.create_server(_SETTINGS[name](), **shared)


async def run(names: list[str]) -> None:
    store = open_store(config.StoreSettings()) if any(uses_store(name) for name in names) else None
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
