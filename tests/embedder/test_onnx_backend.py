"""The onnx and openvino backends with the real small model: the vectors torch gives, truncation counted,
prefixes applied, the export made once and reused, int8 and bf16 under names of their own, the service on it."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from alexandria.clients import decode_vectors
from alexandria.errors import FailedPrecondition
from embedder.support import StartEmbedder
from services.embedder import onnx_backend
from services.embedder.loading import load_model, model_name
from services.embedder.model import EmbeddingModel
from services.embedder.model_folder import ModelSource, resolve_model_source
from services.embedder.threads import use_torch_threads

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]  # exports and runs the model

TEXTS = [
    "Who?",
    "",
    "Elizabeth walked three miles through the mud to Netherfield. " * 3,
    "Pemberley " * 300,  # past the model's 256 word pieces
    "It is a truth universally acknowledged that a single man must be in want of a wife.",
]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray((a * b).sum(axis=1))


def test_onnx_fp32_gives_torchs_vectors_under_torchs_name(
    onnx_model: EmbeddingModel, embedding_model: EmbeddingModel
) -> None:
    assert (onnx_model.backend, onnx_model.dtype, onnx_model.traced) == ("onnx", "float32", False)
    assert onnx_model.name == embedding_model.name, "the same vectors: the same collections"
    onnx_batch, torch_batch = onnx_model.encode(TEXTS), embedding_model.encode(TEXTS)
    assert (cosines(onnx_batch.vectors, torch_batch.vectors) >= 0.9999).all()
    np.testing.assert_allclose(onnx_batch.vectors, torch_batch.vectors, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(onnx_batch.vectors, axis=1), 1.0, atol=1e-5)


def test_onnx_counts_truncated_inputs(onnx_model: EmbeddingModel) -> None:
    assert onnx_model.encode(TEXTS).truncated.tolist() == [False, False, False, True, False]


def test_both_lanes_thread_counts_give_the_same_vectors(onnx_model: EmbeddingModel) -> None:
    """A session per thread count: the passage lane's single-threaded workers run their own."""
    wide = onnx_model.encode(TEXTS).vectors  # on every CPU thread, as the query lane runs it
    with ThreadPoolExecutor(1, initializer=use_torch_threads, initargs=(1,)) as single:
        narrow = single.submit(onnx_model.encode, TEXTS).result().vectors
    np.testing.assert_allclose(wide, narrow, atol=1e-5)


def test_the_export_is_made_once_and_reused(
    onnx_model: EmbeddingModel, onnx_models_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_second_export(*args: object) -> None:
        raise AssertionError("exported again")

    monkeypatch.setattr(onnx_backend, "export_fp32", no_second_export)
    again = load_model(resolve_model_source(None), "cpu", 0, backend="onnx", models_dir=onnx_models_dir)
    np.testing.assert_array_equal(again.encode(TEXTS[:3]).vectors, onnx_model.encode(TEXTS[:3]).vectors)
    assert list(onnx_models_dir.glob("onnx/*/model.fp32.onnx")) and not list(onnx_models_dir.rglob("*.tmp"))


def test_onnx_int8_has_its_own_name_and_close_vectors(
    onnx_models_dir: Path, embedding_model: EmbeddingModel
) -> None:
    int8 = load_model(resolve_model_source(None), "cpu", 0, "int8", "onnx", onnx_models_dir)
    assert int8.name == f"{embedding_model.name}+onnx-int8" and int8.dtype == "int8"
    quantised, full = int8.encode(TEXTS), embedding_model.encode(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(quantised.vectors, axis=1), 1.0, atol=1e-4)
    assert (cosines(quantised.vectors, full.vectors) >= 0.98).all()
    assert not np.allclose(quantised.vectors, full.vectors, atol=1e-5)
    assert quantised.truncated.tolist() == full.truncated.tolist()


def test_a_model_is_named_apart_wherever_its_vectors_differ() -> None:
    source = ModelSource(path=Path("/models/all-mpnet-base-v2"), name="all-mpnet-base-v2")
    assert model_name(source, "cpu", "torch", "none") == "all-mpnet-base-v2"
    assert model_name(source, "cpu", "onnx", "none") == "all-mpnet-base-v2"
    assert model_name(source, "cpu", "torch", "int8") == "all-mpnet-base-v2+int8"
    assert model_name(source, "cpu", "onnx", "int8") == "all-mpnet-base-v2+onnx-int8"
    assert model_name(source, "cpu", "openvino", "none") == "all-mpnet-base-v2"
    assert model_name(source, "cpu", "openvino", "bf16") == "all-mpnet-base-v2+openvino-bf16"
    assert model_name(source, "cuda", "torch", "int8") == "all-mpnet-base-v2"  # not quantised on a GPU


@pytest.mark.asyncio
async def test_the_service_on_onnx_applies_an_e5_models_prefixes(
    start_embedder: StartEmbedder, embedding_model: EmbeddingModel, onnx_models_dir: Path, tmp_path: Path
) -> None:
    # The small model's files under an e5 name: the prefix table recognises the name.
    folder = tmp_path / "multilingual-e5-small"
    folder.mkdir()
    for item in resolve_model_source(None).path.iterdir():
        (folder / item.name).symlink_to(item)
    embedder = await start_embedder(
        model=None, embedder_model=str(folder), embedder_device="cpu", embedder_backend="onnx",
        embedder_models_dir=str(onnx_models_dir),
    )
    info = await embedder.client.model_info()
    assert (info.name, info.dtype) == ("multilingual-e5-small", "float32")
    query = await embedder.client.embed_query("a walk to Netherfield")
    response = await embedder.client.embed(["a walk to Netherfield", "Pemberley " * 300])
    assert response.truncated == 1
    expected = embedding_model.sentence_transformer.encode(
        ["query: a walk to Netherfield", "passage: a walk to Netherfield"], normalize_embeddings=True
    )
    np.testing.assert_allclose([query, decode_vectors(response)[0]], expected, atol=1e-5)


def test_openvino_runs_the_same_graph_fp32_under_torchs_name_and_bf16_under_its_own(
    onnx_model: EmbeddingModel, onnx_models_dir: Path, embedding_model: EmbeddingModel
) -> None:
    full = embedding_model.encode(TEXTS)
    fp32 = load_model(resolve_model_source(None), "cpu", 0, "none", "openvino", onnx_models_dir)
    assert (fp32.name, fp32.backend, fp32.dtype) == (embedding_model.name, "openvino", "float32")
    np.testing.assert_allclose(fp32.encode(TEXTS).vectors, full.vectors, atol=1e-5)
    # A batch past PASS_TOKENS runs as several passes, each padded (padded_width).
    many = TEXTS * (2 * onnx_backend.PASS_TOKENS // 256)
    np.testing.assert_allclose(fp32.encode(many).vectors, np.tile(full.vectors, (len(many) // len(TEXTS), 1)),
                               atol=1e-5)
    bf16 = load_model(resolve_model_source(None), "cpu", 0, "bf16", "openvino", onnx_models_dir)
    assert (bf16.name, bf16.dtype) == (f"{embedding_model.name}+openvino-bf16", "bfloat16")
    reduced = bf16.encode(TEXTS)
    assert (cosines(reduced.vectors, full.vectors) >= 0.99).all()
    assert reduced.truncated.tolist() == full.truncated.tolist()
    # Two passage workers at once, each on its own compiled model, as the passage lane runs them.
    with ThreadPoolExecutor(2, initializer=use_torch_threads, initargs=(1,)) as workers:
        narrow = [batch.vectors for batch in workers.map(bf16.encode, [TEXTS] * 6)]
    assert all((cosines(vectors, reduced.vectors) >= 0.999).all() for vectors in narrow)
    # The bulk lane drops its workers' compiled models when it idles: their next passes compile them again.
    bf16.release_pass_memory(threads=1)
    with ThreadPoolExecutor(2, initializer=use_torch_threads, initargs=(1,)) as workers:
        again = [batch.vectors for batch in workers.map(bf16.encode, [TEXTS] * 2)]
    np.testing.assert_allclose(again, narrow[:2], atol=1e-6)


def test_openvino_compiles_its_own_format_converted_once_with_the_onnx_graphs_vectors(
    onnx_model: EmbeddingModel, onnx_models_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = load_model(resolve_model_source(None), "cpu", 0, "bf16", "openvino", onnx_models_dir)
    (xml,) = onnx_models_dir.glob("onnx/*/model.fp32.xml")
    assert xml.with_suffix(".bin").is_file() and not list(xml.parent.glob(".openvino.*"))
    converted_at = xml.stat().st_mtime_ns
    again = load_model(resolve_model_source(None), "cpu", 0, "bf16", "openvino", onnx_models_dir)
    assert xml.stat().st_mtime_ns == converted_at, "converted again"
    # The weights as they were: the same vectors, to the bit, as the ONNX file compiled directly.
    monkeypatch.setattr(onnx_backend, "openvino_graph", lambda onnx_graph: onnx_graph)
    from_onnx = load_model(resolve_model_source(None), "cpu", 0, "bf16", "openvino", onnx_models_dir)
    np.testing.assert_array_equal(model.encode(TEXTS).vectors, from_onnx.encode(TEXTS).vectors)
    np.testing.assert_array_equal(again.encode(TEXTS).vectors, from_onnx.encode(TEXTS).vectors)


FORKS_OF_AN_OPENVINO_COMPILE = """
import os, sys, time
from pathlib import Path
forks = []
os.register_at_fork(before=lambda: forks.append(1))
from services.embedder.loading import load_model
from services.embedder.model_folder import resolve_model_source
model = load_model(resolve_model_source(None), "cpu", 0, "bf16", "openvino", Path(sys.argv[1]))
model.encode(["a walk to Netherfield"])
time.sleep(1)  # OpenVINO's telemetry reports from a pool thread after the compile
print(len(forks))
"""


def test_openvino_compiles_without_forking_a_telemetry_reporter(onnx_models_dir: Path, tmp_path: Path) -> None:
    """Outside CI and with no consent file (a user's machine), OpenVINO's telemetry forks a reporter at the
    first compile; a fork of the embedder beside its gRPC threads left it deaf. No fork at all, no report."""
    env = {name: value for name, value in os.environ.items() if name != "CI"} | {"HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", FORKS_OF_AN_OPENVINO_COMPILE, str(onnx_models_dir)],
                          check=False, env=env, cwd=Path(__file__).resolve().parents[2], capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "0", done.stderr


def test_a_precision_a_backend_does_not_have_is_refused(onnx_models_dir: Path) -> None:
    with pytest.raises(FailedPrecondition, match="openvino"):
        load_model(resolve_model_source(None), "cpu", 0, "bf16", "onnx", onnx_models_dir)
    with pytest.raises(FailedPrecondition, match="none or bf16"):
        load_model(resolve_model_source(None), "cpu", 0, "int8", "openvino", onnx_models_dir)
