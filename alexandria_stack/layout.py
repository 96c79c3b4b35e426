"""Where the pieces of a local stack live, and how to tell whether they are up.

The launcher and the CLI both use this, so a terminal command finds the services
the launcher started without any configuration.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from alexandria.clients import wait_until_serving
from alexandria.settings import REPO_ROOT, StackSettings
from services.host import SERVICES

# The project's own small Calibre library (samples/make_library.py builds it): what `alexandria up` serves
# unless CALIBRE_LIBRARY_PATH names another.
SAMPLE_LIBRARY = REPO_ROOT / "samples" / "library"


@dataclass(frozen=True)
class StackLayout:
    """Addresses of the four services: unix sockets under the data directory unless *_ADDR says otherwise."""

    data_dir: Path
    overrides: dict[str, str] = field(default_factory=dict)  # service -> address given by *_ADDR

    @classmethod
    def from_settings(cls, settings: StackSettings) -> StackLayout:
        overrides = {name: address for name in SERVICES if (address := getattr(settings, f"{name}_addr"))}
        return cls(settings.alexandria_data_dir.resolve(), overrides)

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


async def wait_all_serving(addresses: dict[str, str], timeout: float) -> None:
    await asyncio.gather(*(wait_until_serving(a, timeout) for a in addresses.values()))
