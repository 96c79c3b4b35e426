"""What a model folder is, read from its own files before anything loads it: an embedder (a sentence-transformers
model) or a cross-encoder (a sequence classifier), how many dimensions it embeds into, how many tokens it reads,
and how much memory its weights take. A folder named for the wrong role, or too large for the memory there is,
is refused with the reason, instead of failing half-way through loading (or loading and answering nonsense).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from alexandria.errors import FailedPrecondition

Role = Literal["embedder", "reranker"]
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
