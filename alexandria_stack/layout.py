"""Where the pieces of a local stack live, and how to tell whether they are up.

The launcher and the CLI both use this, so a terminal command finds the services
the launcher started without any configuration.
"""

from __future__ import annotations

import asyncio
import getpass
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from alexandria.clients import ServiceClient, wait_until_serving
from alexandria.errors import FailedPrecondition, Unavailable
from alexandria.settings import REPO_ROOT, ClientSettings, StackSettings
from alexandria.v1 import catalog_pb2, catalog_pb2_grpc
from services.host import SERVICES

# The project's own small Calibre library (samples/make_library.py builds it): what `alexandria up` serves
# unless CALIBRE_LIBRARY_PATH names another.
SAMPLE_LIBRARY = REPO_ROOT / "samples" / "library"


def served_library(env: Mapping[str, str]) -> str:
    """The Calibre library a stack started with environment `env` serves."""
    return env.get("CALIBRE_LIBRARY_PATH", str(SAMPLE_LIBRARY))


@dataclass(frozen=True)
class StackLayout:
    """Addresses of the four services: unix sockets under the data directory unless *_ADDR says otherwise."""

    data_dir: Path
    overrides: dict[str, str] = field(default_factory=dict)  # service -> address given by *_ADDR

    @classmethod
    def from_settings(cls, settings: StackSettings) -> StackLayout:
        return cls(settings.alexandria_data_dir.resolve(), settings.given_addresses())

    @property
    def run_dir(self) -> Path:
        return self.data_dir / "run"

    def socket(self, service: str) -> str:
        return f"unix://{self.run_dir / f'{service}.sock'}"

    def address(self, service: str) -> str:
        return self.overrides.get(service) or self.socket(service)

    def addresses(self) -> dict[str, str]:
        return {name: self.address(name) for name in SERVICES}

    @property
    def gateway_url_file(self) -> Path:
        return self.run_dir / "gateway.url"


def require_usable_data_dir(data_dir: Path) -> None:
    """Make the stack's data folder, or refuse, naming why, one this user cannot make or write: checked before
    any process starts, since each would fail on it in its own way."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=data_dir).close()
    except OSError as exc:
        raise FailedPrecondition(
            f"ALEXANDRIA_DATA_DIR={data_dir} cannot hold the stack's store and sockets: {exc.strerror} "
            f"({exc.filename or data_dir}). Point ALEXANDRIA_DATA_DIR at a folder that user {getpass.getuser()} "
            "can create and write."
        ) from None


async def library_problem(address: str, settings: ClientSettings, timeout: float | None = None) -> str | None:
    """Why the catalog at `address` cannot serve its Calibre library (what it answers every call with, and
    NOT_SERVING its health), or None when it can. Waits up to `timeout` for a catalog that is starting."""
    catalog = ServiceClient("catalog", address, catalog_pb2_grpc.CatalogServiceStub, settings)
    try:
        await catalog.call("GetLibraryStats", catalog_pb2.GetLibraryStatsRequest(), timeout=timeout,
                           wait_for_ready=True)
    except (FailedPrecondition, Unavailable) as exc:  # Unavailable: Calibre holds its lock on a first read
        return f"The catalog cannot serve the Calibre library: {exc.message}"
    finally:
        await catalog.close()
    return None


async def wait_all_up(addresses: dict[str, str], timeout: float, settings: ClientSettings) -> str | None:
    """Wait until every service serves, except a catalog whose library cannot be read: that one is up too,
    answering every call with the reason, which is returned (None when all serve)."""

    async def catalog_up(address: str) -> str | None:
        problem = await library_problem(address, settings, timeout)
        if problem is None:
            await wait_until_serving(address, timeout)  # it has just read the library: at once
        return problem

    others = [wait_until_serving(address, timeout) for name, address in addresses.items() if name != "catalog"]
    problem, *_ = await asyncio.gather(catalog_up(addresses["catalog"]), *others)
    return problem
