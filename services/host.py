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
from typing import Any

from pydantic import ValidationError

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


def _listen_address(text: str) -> tuple[str, str]:
    name, _, address = text.partition("=")
    if name not in SERVICES or not address:
        raise argparse.ArgumentTypeError(f"{text!r}: give SERVICE=ADDRESS, SERVICE one of {', '.join(SERVICES)}")
    return name, address


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The services to run, where each listens, and the launcher they end with."""
    parser = argparse.ArgumentParser(prog="python -m services", description=__doc__)
    parser.add_argument("names", nargs="+", choices=SERVICES, help="services to run in this process")
    parser.add_argument("--listen", action="append", type=_listen_address, default=[], metavar="SERVICE=ADDRESS",
                        help="where a service listens (default: " + ", ".join(
                            f"{name} {address}" for name, address in config.DEFAULT_ADDRESSES.items()) + ")")
    parser.add_argument("--launcher-pid", type=int, help="end when this process (`alexandria up`) ends")
    # What a benchmark turns on the embedder it starts; the defaults are EmbedderSettings' tuned constants.
    parser.add_argument("--max-batch", type=int, help="the embedder's largest batch")
    parser.add_argument("--queue-limit", type=int, help="texts waiting at once in each of the embedder's lanes")
    return parser.parse_args(argv)


def _overrides(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """What the command line sets in a service's settings."""
    given = {f"{name}_listen": dict(args.listen).get(name)}
    if name == "embedder":
        given |= {"embedder_max_batch": args.max_batch, "embedder_queue_limit": args.queue_limit}
    return {field: value for field, value in given.items() if value is not None}


def main(argv: list[str] | None = None) -> None:
    """Read the arguments and every setting of this process (once, here), then serve until stopped."""
    args = parse_arguments(argv)
    names = list(dict.fromkeys(args.names))
    end_with_launcher(args.launcher_pid)
    refusal = config.settings_refusal()
    if refusal is not None:
        raise SystemExit(refusal)
    common = config.CommonSettings()
    configure_logging("+".join(names), common.alexandria_log_level)
    try:
        services = {name: _SETTINGS[name](**_overrides(name, args)) for name in names}
    except ValidationError as invalid:
        raise SystemExit(f"cannot start: {invalid}") from None
    try:
        asyncio.run(run(services, config.StoreSettings()))
    except AlexandriaError as exc:
        log.error("cannot start: %s", exc.message)
        raise SystemExit(2) from None
