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
from alexandria.lifetime import end_with_launcher
from alexandria.logs import configure_logging
from alexandria.store import Store, open_store

log = logging.getLogger(__name__)

ServiceSettings = config.EmbedderSettings | config.CatalogSettings | config.IngestSettings | config.QuerySettings
_SETTINGS: dict[str, type[ServiceSettings]] = {
    "embedder": config.EmbedderSettings,
    "catalog": config.CatalogSettings,
    "ingest": config.IngestSettings,
    "query": config.QuerySettings,
}
# The four services, in the order a stack starts them.
SERVICES = tuple(_SETTINGS)


def uses_store(settings: ServiceSettings) -> bool:
    """Whether the service reads or writes the store: its settings say which store."""
    return "store" in type(settings).model_fields


def build(name: str, settings: ServiceSettings, store: Store | None) -> ServiceServer:
    """Create one service's server from its settings, handing the services that use the store the one this
    process opened."""
    module = importlib.import_module(f"services.{name}.server")
    shared = {"store": store} if uses_store(settings) else {}
    server: ServiceServer = module.create_server(settings, **shared)
    return server


async def run(services: dict[str, ServiceSettings], store_settings: config.StoreSettings) -> None:
    store = open_store(store_settings) if any(uses_store(s) for s in services.values()) else None
    try:
        servers = [build(name, settings, store) for name, settings in services.items()]
        await serve_until_signal(servers)
    finally:
        if store is not None:
            store.close()


def main(argv: list[str] | None = None) -> None:
    """Read the arguments and every setting of this process (once, here), then serve until stopped."""
    parser = argparse.ArgumentParser(prog="python -m services", description=__doc__)
    parser.add_argument("names", nargs="+", choices=SERVICES, help="services to run in this process")
    names = list(dict.fromkeys(parser.parse_args(argv).names))
    common = config.CommonSettings()
    end_with_launcher(common.alexandria_launcher_pid)
    configure_logging("+".join(names), common.alexandria_log_level)
    services = {name: _SETTINGS[name]() for name in names}
    try:
        asyncio.run(run(services, config.StoreSettings()))
    except AlexandriaError as exc:
        log.error("cannot start: %s", exc.message)
        raise SystemExit(2) from None
