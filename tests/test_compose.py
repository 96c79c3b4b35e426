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
        if name.startswith("qdrant"):
            continue
        command = spec["command"]
        assert command[:2] == ["python", "-m"], name
        importlib.import_module(command[2])
        if command[2] == "services":
            from services.host import parse_arguments

            assert set(parse_arguments(command[3:]).names) <= set(SERVICES), name
        if name == "models":  # runs once, to completion: nothing to check the health of
            continue
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
    from alexandria.settings import environment_settings

    known = {variable for variable, _, _ in environment_settings()}
    for name, spec in _compose()["services"].items():
        if name.startswith("qdrant"):
            continue
        for var in spec["environment"]:
            assert var in known, f"{name}: {var} is no setting"


def test_every_service_restarts_after_a_crash_and_the_gateway_may_finish_its_calls() -> None:
    services = _compose()["services"]
    for name, spec in services.items():
        assert spec.get("restart") in ("unless-stopped", "always", "on-failure"), name
    grace = services["gateway"]["stop_grace_period"]
    assert grace.endswith("s") and int(grace[:-1]) > GatewaySettings().gateway_shutdown_grace_s


def test_the_embedders_start_on_the_models_a_one_shot_service_fetched_into_their_volume() -> None:
    services = _compose()["services"]
    models, embedder = services["models"], services["embedder"]
    assert models["command"][-2:] == ["models", "pull"] and models["environment"]["EMBEDDER_PROFILE"] == "${EMBEDDER_PROFILE:-gpu}"
    assert embedder["depends_on"]["models"] == {"condition": "service_completed_successfully"}
    assert embedder["environment"]["EMBEDDER_MODELS_DIR"] == models["environment"]["EMBEDDER_MODELS_DIR"] == "/models"
    assert "models:/models" in embedder["volumes"] and "models:/models" in models["volumes"]


def test_the_cluster_profile_runs_three_qdrant_nodes_joining_the_first() -> None:
    services = _compose()["services"]
    nodes = {name: spec for name, spec in services.items() if "cluster" in spec.get("profiles", [])}
    assert sorted(nodes) == ["qdrant-node-1", "qdrant-node-2", "qdrant-node-3"]
    assert "profiles" not in services["qdrant"], "the single node runs without a profile, as before"
    volumes = _compose()["volumes"]
    for name, spec in nodes.items():
        assert spec["image"] == services["qdrant"]["image"] and spec["healthcheck"] == services["qdrant"]["healthcheck"]
        assert spec["environment"]["QDRANT__CLUSTER__ENABLED"] == "true"
        command = spec["command"]
        assert command[0] == "./qdrant" and command[command.index("--uri") + 1] == f"http://{name}:6335"
        (volume,) = spec["volumes"]
        assert volume == f"{name}:/qdrant/storage" and name in volumes  # a storage of its own
    assert "--bootstrap" not in nodes["qdrant-node-1"]["command"]
    for name in ("qdrant-node-2", "qdrant-node-3"):
        command = nodes[name]["command"]
        assert command[command.index("--bootstrap") + 1] == "http://qdrant-node-1:6335"
        assert nodes[name]["depends_on"] == {"qdrant-node-1": {"condition": "service_healthy"}}


def test_the_services_take_the_cluster_and_the_layout_from_the_shell() -> None:
    services = _compose()["services"]
    passed_through = {"QDRANT_SHARD_NUMBER", "QDRANT_REPLICATION_FACTOR", "QDRANT_QUANTIZATION"}
    for name in ("catalog", "ingest", "query"):
        environment = services[name]["environment"]
        assert environment["QDRANT_URL"] == "${QDRANT_URL:-http://qdrant:6333}"  # qdrant-node-1 for the cluster
        # No value: the shell's when it sets one, else unset (the settings' defaults), never an empty string.
        assert all(environment[variable] is None for variable in passed_through), name
    assert services["embedder"]["deploy"]["replicas"] == "${EMBEDDER_REPLICAS:-1}"


def test_the_ingest_keeps_its_sync_state_and_ocr_pages_on_a_volume() -> None:
    compose = _compose()
    ingest = compose["services"]["ingest"]
    data = ingest["environment"]["ALEXANDRIA_DATA_DIR"]
    assert f"ingest-data:{data}" in ingest["volumes"] and "ingest-data" in compose["volumes"]
