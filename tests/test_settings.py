"""Every setting is refused up front when it cannot work, in a few lines naming it, before anything starts."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from alexandria.settings import (
    EmbedderSettings,
    GatewaySettings,
    IngestSettings,
    StackSettings,
    environment_settings,
    settings_problems,
)

ALEXANDRIA = str(Path(sys.executable).with_name("alexandria"))

# A value each setting cannot take: of the wrong type, out of range, blank, or malformed.
BAD_VALUES = {
    "ALEXANDRIA_DATA_DIR": "",
    "ALEXANDRIA_LOG_LEVEL": "LOUD",
    "CALIBRE_LIBRARY_PATH": "",
    "CATALOG_RECHECK_INTERVAL_S": "-1",
    "EMBEDDER_ADDR": "nowhere",
    "CATALOG_ADDR": "catalog",
    "INGEST_ADDR": "ingest:port",
    "QUERY_ADDR": "http://query:50054",
    "LOCAL_INGEST_PATH": "",
    "LOCAL_INGEST_EXTRA_ROOTS": '{"a": 1}',
    "INGEST_MAX_FILE_MB": "0",
    "TESSDATA_PREFIX": " ",
    "AUTO_SYNC": "maybe",
    "AUTO_SYNC_QUIET_S": "-1",
    "EMBEDDER_PROFILE": "fastest",
    "EMBEDDER_MODEL": "",
    "EMBEDDER_BACKEND": "tensorflow",
    "EMBEDDER_QUANTIZE": "int4",
    "EMBEDDER_DEVICE": "tpu",
    "EMBEDDER_RERANKER_MODEL": "",
    "EMBEDDER_MODELS_DIR": "",
    "EMBEDDER_THREADS": "-2",
    "HF_ENDPOINT": "huggingface.co",
    "HF_TOKEN": "",
    "ALEXANDRIA_OFFLINE": "sometimes",
    "QDRANT_URL": "qdrant:6333",
    "QDRANT_API_KEY": "",
    "QDRANT_COLLECTION": "my books",
    "QDRANT_QUANTIZATION": "int4",
    "QDRANT_SHARD_NUMBER": "0",
    "QDRANT_REPLICATION_FACTOR": "x",
    "GUARDIANS_DIR": "",
    "DEFAULT_GUARDIAN": "../zec",
    "LINK_PATHS": "notjson",
    "GATEWAY_HOST": "two words",
    "GATEWAY_PORT": "70000",
    "GATEWAY_ALLOWED_HOSTS": '{"a": 1}',
    "GATEWAY_TOKENS": "notjson",
    "QUERY_SAMPLING": "perhaps",
    "GATEWAY_SHUTDOWN_GRACE_S": "-5",
}
SETTINGS = [variable for variable, _, _ in environment_settings()]


def _clean_environment() -> dict[str, str]:
    """This process's environment without any Alexandria setting (a developer's shell may hold some)."""
    return {key: value for key, value in os.environ.items() if key.upper() not in SETTINGS}


def test_at_most_forty_settings_each_declared_once_and_each_with_a_bad_value_below() -> None:
    assert len(SETTINGS) == len(set(SETTINGS)) <= 40
    assert set(BAD_VALUES) == set(SETTINGS), "give each setting a value it refuses"


@pytest.mark.slow
@pytest.mark.parametrize("command", ["status", "up"])
def test_every_bad_setting_is_refused_up_front_in_a_few_lines_naming_it(command: str, tmp_path: Path) -> None:
    def run(variable: str) -> tuple[str, subprocess.CompletedProcess[str], float]:
        env = {**_clean_environment(), "ALEXANDRIA_DATA_DIR": str(tmp_path / variable), variable: BAD_VALUES[variable]}
        started = time.monotonic()
        done = subprocess.run([ALEXANDRIA, command], env=env, check=False, capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
        return variable, done, time.monotonic() - started

    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(run, SETTINGS))
    for variable, done, seconds in runs:
        output = done.stdout + done.stderr
        assert done.returncode == 2, (variable, output)
        assert "Traceback" not in output and len(output.strip().splitlines()) <= 5, (variable, output)
        assert f"{variable}=" in output and "should be" in output, (variable, output)
        assert seconds < 5, (variable, seconds)
    assert not any((tmp_path / variable / "run").exists() for variable in SETTINGS), "nothing was started"


def test_help_answers_whatever_the_environment_holds() -> None:
    env = {**_clean_environment(), "GATEWAY_PORT": "x", "GATEWAY_TOKENS": "{", "STORE": "y"}
    done = subprocess.run([ALEXANDRIA, "--help"], env=env, check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "alexandria up" in done.stdout, done


def test_a_variable_named_like_a_group_of_settings_is_no_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    for bare in ("STORE", "HUB", "CLIENTS"):
        monkeypatch.setenv(bare, "not json")
    assert settings_problems() == []
    assert IngestSettings().store.qdrant_collection == "alexandria"


def test_lists_take_json_or_commas_and_tuned_constants_ignore_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_ALLOWED_HOSTS", "proxy.example:443, other.example")
    monkeypatch.setenv("LOCAL_INGEST_EXTRA_ROOTS", '["/srv/a", "/srv/b"]')
    monkeypatch.setenv("EMBEDDER_MAX_BATCH", "9")
    assert GatewaySettings().gateway_allowed_hosts == ["proxy.example:443", "other.example"]
    assert IngestSettings().local_ingest_extra_roots == [Path("/srv/a"), Path("/srv/b")]
    assert EmbedderSettings().embedder_max_batch == 64
    assert EmbedderSettings(embedder_max_batch=9).embedder_max_batch == 9


def test_only_the_addresses_the_environment_names_replace_the_stacks_sockets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUERY_ADDR", "dns:///query:50054")
    assert StackSettings().given_addresses() == {"query": "dns:///query:50054"}


def test_the_configuration_page_is_what_the_generator_writes_from_the_settings() -> None:
    done = subprocess.run([sys.executable, str(Path(__file__).parent.parent / "scripts" / "gen_settings_doc.py"),
                           "--check"], check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, "docs/configuration.md is stale: run python scripts/gen_settings_doc.py"
