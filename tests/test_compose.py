"""docker-compose.yml parses, and everything it runs exists in this repository."""

from __future__ import annotations

import importlib
from pathlib import Path

import yaml

from alexandria.settings import GatewaySettings

ROOT = Path(__file__).resolve().parent.parent


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_every_service_command_names_a_real_module() -> None:
    from services.host import SERVICES

    services = _compose()["services"]
    for name, spec in services.items():
        if name == "qdrant":
            continue
        command = spec["command"]
        assert command[:2] == ["python", "-m"], name
        importlib.import_module(command[2])
        if command[2] == "services":
            assert set(command[3:]) <= set(SERVICES), name
        check = spec["healthcheck"]["test"]
        if "alexandria.healthcheck" in check:
            importlib.import_module("alexandria.healthcheck")


def test_embedder_reserves_a_gpu_and_clients_balance_over_its_replicas() -> None:
    services = _compose()["services"]
    devices = services["embedder"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    assert services["embedder"].get("container_name") is None, "a fixed container name prevents --scale"
    for name in ("ingest", "query"):
        assert services[name]["environment"]["EMBEDDER_ADDR"].startswith("dns:///")


def test_settings_named_in_compose_exist() -> None:
    from alexandria import settings

    known = set()
    for cls in (settings.CommonSettings, settings.StoreSettings, settings.EmbedderSettings, settings.CatalogSettings,
                settings.IngestSettings, settings.QuerySettings, settings.GatewaySettings):
        known |= {f.upper() for f in cls.model_fields}
    for name, spec in _compose()["services"].items():
        if name == "qdrant":
            continue
        for var in spec["environment"]:
            assert var in known, f"{name}: {var} is no setting"


def test_every_service_restarts_after_a_crash_and_the_gateway_may_finish_its_calls() -> None:
    services = _compose()["services"]
    for name, spec in services.items():
        assert spec.get("restart") in ("unless-stopped", "always", "on-failure"), name
    grace = services["gateway"]["stop_grace_period"]
    assert grace.endswith("s") and int(grace[:-1]) > GatewaySettings().gateway_shutdown_grace_s
