"""A sentence-transformers model's transformer run by ONNX Runtime: exported once from the loaded model
(`torch.onnx.export`, the same (input_ids, attention_mask) -> token embeddings function that model.py
traces for TorchScript), optionally quantised to int8, cached on disk, and run by a session per thread
count. Tokenizing, truncation counting, length grouping, pooling and normalisation stay the model's own
(model.py), so only the transformer's arithmetic differs from the torch backend.

Why not sentence-transformers' own `backend="onnx"`: it needs optimum-onnx, whose 0.1 wants transformers
< 4.58 while sentence-transformers 6 wants transformers 5. The exporter used here is torch's TorchScript-based
one (`dynamo=False`), which needs nothing beyond torch and onnx.

int8 is weight-only blockwise quantisation of every MatMul (onnxruntime's MatMulNBits, 8 bits, blocks of
128 along the input dimension, symmetric; `accuracy_level=4` lets the kernel quantise each block of its
input to int8 as it runs). onnxruntime's classic dynamic quantisation (one scale for a whole activation
tensor) moved all-mpnet-base-v2's vectors to a mean cosine of 0.85 with its fp32 ones; this keeps 0.999
(bench/backends.py measures both models).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sys
import tempfile
import threading
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Transformer

from alexandria.errors import FailedPrecondition
from alexandria.settings import EmbedderQuantize
from services.embedder.model import TRACE_CHECK_TEXTS, TRACE_EXAMPLE_TEXTS, TokenEmbeddingsModule

log = logging.getLogger(__name__)

# Bumped whenever what an exported file holds changes, so older caches are not reused.
EXPORT_FORMAT = 1
OPSET = 17
INT8_BLOCK_SIZE = 128
INT8_ACCURACY_LEVEL = 4  # int8 compute: the input of each MatMul quantised per block at run time
# The exported fp32 graph must give the eager transformer's token embeddings (values up to ~10) to within this.
EXPORT_TOLERANCE = 1e-3
_INPUTS = ("input_ids", "attention_mask")
_OUTPUT = "token_embeddings"
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def export_folder(sentence_transformer: SentenceTransformer, name: str, model_path: Path, models_dir: Path) -> Path:
    """Where the graphs exported from the model `name` at `model_path` live: one folder per model version (its
    weights' size and time), exporter and onnxruntime version, under `models_dir`/onnx."""
    weights = [model_path / name for name in _WEIGHT_FILES if (model_path / name).is_file()]
    key = "|".join(
        [str(model_path.resolve()), str(EXPORT_FORMAT), torch.__version__, onnxruntime.__version__,
         str(sentence_transformer.max_seq_length)]
        + [f"{w.name}:{w.stat().st_size}:{w.stat().st_mtime_ns}" for w in weights]
    )
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name)
    return models_dir / "onnx" / f"{slug}-{digest}"


def _exportable(sentence_transformer: SentenceTransformer) -> torch.nn.Module:
    first = sentence_transformer[0]
    if not isinstance(first, Transformer):
        raise FailedPrecondition(
            f"The onnx backend runs a text Transformer module; this model starts with {type(first).__name__}. "
            "Use EMBEDDER_BACKEND=torch."
        )
    return TokenEmbeddingsModule(first.auto_model).eval()


def _tokenize(sentence_transformer: SentenceTransformer, texts: list[str]) -> dict[str, np.ndarray]:
    batch = sentence_transformer.tokenizer(
        texts, return_tensors="np", padding=True, truncation=True, max_length=sentence_transformer.max_seq_length
    )
    return {name: np.asarray(batch[name], dtype=np.int64) for name in _INPUTS}


def _write_atomically(target: Path, write: Callable[[Path], None]) -> None:
    """Write `target` through a temporary file beside it, so that a reader never sees half a file (two
    embedders starting at once both export; the second replace is as good as the first)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(handle)
    try:
        write(Path(temporary))
        os.replace(temporary, target)
    finally:
        Path(temporary).unlink(missing_ok=True)


def export_fp32(sentence_transformer: SentenceTransformer, target: Path) -> None:
    """Export the model's transformer to `target` and check that onnxruntime gives what torch gives."""
    module = _exportable(sentence_transformer)
    example = _tokenize(sentence_transformer, TRACE_EXAMPLE_TEXTS)
    dynamic = {0: "batch", 1: "sequence"}

    def write(path: Path) -> None:
        with warnings.catch_warnings(), torch.inference_mode():
            warnings.simplefilter("ignore")  # the exporter's notes on Python branches and deprecations
            torch.onnx.export(
                module,
                tuple(torch.from_numpy(example[name]) for name in _INPUTS),
                str(path),
                dynamo=False,
                input_names=list(_INPUTS),
                output_names=[_OUTPUT],
                dynamic_axes={name: dynamic for name in (*_INPUTS, _OUTPUT)},
                opset_version=OPSET,
            )
        check = _tokenize(sentence_transformer, TRACE_CHECK_TEXTS)
        exported = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, check)[0]
        with torch.inference_mode():
            eager = module(*(torch.from_numpy(check[name]) for name in _INPUTS)).numpy()
        difference = float(np.abs(exported - eager).max())
        if difference > EXPORT_TOLERANCE:
            raise FailedPrecondition(
                f"The model's transformer exported to ONNX gives other token embeddings than torch (by up to "
                f"{difference:.2g}); use EMBEDDER_BACKEND=torch."
            )

    _write_atomically(target, write)


def quantize_int8(fp32: Path, target: Path) -> None:
    """The fp32 graph with every MatMul's weights in int8 blocks (see the module's docstring)."""
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    def write(path: Path) -> None:
        quantizer = MatMulNBitsQuantizer(
            onnx.load(str(fp32)), bits=8, block_size=INT8_BLOCK_SIZE, is_symmetric=True,
            accuracy_level=INT8_ACCURACY_LEVEL,
        )
        quantizer.process()
        quantizer.model.save_model_to_file(str(path), use_external_data_format=False)

    logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(logging.WARNING)
    _write_atomically(target, write)


def exported_graph(
    sentence_transformer: SentenceTransformer, name: str, model_path: Path, models_dir: Path,
    quantize: EmbedderQuantize,
) -> Path:
    """The model's transformer as an ONNX file at `quantize` precision: exported (and quantised) on first
    use, then read from the cache under `models_dir`."""
    folder = export_folder(sentence_transformer, name, model_path, models_dir)
    fp32 = folder / "model.fp32.onnx"
    if not fp32.is_file():
        log.info("exporting %s to ONNX (once; cached in %s)", name, folder)
        export_fp32(sentence_transformer, fp32)
    if quantize == "none":
        return fp32
    int8 = folder / "model.int8.onnx"
    if not int8.is_file():
        log.info("quantising %s's ONNX graph to int8 (once; cached in %s)", name, folder)
        quantize_int8(fp32, int8)
    return int8


def openvino_graph(onnx_graph: Path) -> Path:
    """The ONNX graph converted once into OpenVINO's own format beside it (`.xml` and `.bin`), its fp32 weights as
    they are. OpenVINO compiles that format from the weights mapped from the file instead of a copy of them: each
    compiled model of multilingual-e5-small (the query lane's, and each bulk worker's while it embeds) took 108 MB
    of heap against 578 MB compiled from the ONNX file, and gives the same token embeddings to the bit."""
    xml = onnx_graph.with_suffix(".xml")
    if not xml.is_file():
        log.info("converting %s to OpenVINO's format (once; cached beside it)", onnx_graph)
        openvino = import_openvino()
        # The pair is written aside and moved in .bin first: a reader that finds the .xml finds its weights.
        with tempfile.TemporaryDirectory(prefix=".openvino.", dir=onnx_graph.parent) as scratch:
            staged = Path(scratch) / xml.name
            openvino.save_model(openvino.Core().read_model(str(onnx_graph)), str(staged), compress_to_fp16=False)
            os.replace(staged.with_suffix(".bin"), xml.with_suffix(".bin"))
            os.replace(staged, xml)
    return xml


class _PerThreadCount(ABC):
    """The exported transformer as a function of (input_ids, attention_mask) to its token embeddings, as
    model.py's traced graph is.

    Each calling thread runs it on as many threads as torch gives that thread (threads.py sets each lane's:
    the query worker all cores, each bulk worker one): one runner per thread count, shared by the threads
    with that count.
    """

    def __init__(self, graph: Path) -> None:
        self.graph = graph
        self._runners: dict[int, Callable[[dict[str, np.ndarray]], np.ndarray]] = {}
        self._lock = threading.Lock()
        self._runner(torch.get_num_threads())  # fail now, while loading, if the graph does not load

    @abstractmethod
    def _make(self, threads: int) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
        """What runs the graph on `threads` threads, from any thread."""

    def _runner(self, threads: int) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
        with self._lock:
            runner = self._runners.get(threads)
            if runner is None:
                try:
                    runner = self._runners[threads] = self._make(threads)
                except (RuntimeError, OSError, ValueError) as exc:  # the runtimes' errors for a bad file
                    raise FailedPrecondition(
                        f"{type(self).__name__} could not load {self.graph} ({exc}); delete the file to "
                        "export it again."
                    ) from exc
            return runner

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        feeds = {"input_ids": input_ids.numpy().astype(np.int64, copy=False),
                 "attention_mask": attention_mask.numpy().astype(np.int64, copy=False)}
        return torch.from_numpy(self._runner(torch.get_num_threads())(feeds))


class OnnxTokenEmbeddings(_PerThreadCount):
    """The graph run by onnxruntime. A session's `run` may be called from several threads at once; a
    one-thread session runs in the caller's thread, so the bulk workers' SCHED_IDLE class holds for their
    passes too."""

    def _make(self, threads: int) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        # Spin between the operations of one pass, not after it: idle spinning would take the cores that
        # the store's search, waiting for this vector, needs next (as GOMP_SPINCOUNT in __init__.py).
        options.add_session_config_entry("session.force_spinning_stop", "1")
        try:
            session = onnxruntime.InferenceSession(str(self.graph), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own untyped errors for a bad file
            raise RuntimeError(str(exc)) from exc

        def run(feeds: dict[str, np.ndarray]) -> np.ndarray:
            return np.asarray(session.run([_OUTPUT], feeds)[0])

        return run


# OpenVINO's CPU plugin: f32 computes exactly (its default on CPUs with AMX would be bf16); bf16 runs the
# matrix products on AMX/AVX-512-BF16 where the CPU has them (and in f32 where it has not).
OPENVINO_PRECISIONS = {"none": "f32", "bf16": "bf16"}
PASS_TOKENS = 2048


def padded_width(width: int) -> int:
    """The width a pass of `width` columns runs at: a multiple of 8 up to 64 columns, of 16 above."""
    step = 8 if width <= 64 else 16
    return -(-width // step) * step


def import_openvino() -> Any:
    """OpenVINO without its usage telemetry. Importing openvino loads openvino_telemetry, which, on a machine
    with no consent file, reports the first model compile from a forked child process: the report would leave
    the user's machine, and a fork of the embedder while its gRPC threads run crashed that child and left the
    server deaf (`ev_epoll1_linux.cc ... Check failed: next_worker->state == KICKED`, then every call to the
    embedder timed out). With the module unimportable, OpenVINO takes its own no-op stub."""
    sys.modules["openvino_telemetry"] = None  # type: ignore[assignment]  # None: "not importable"
    import openvino

    return openvino


@dataclass(frozen=True)
class _ThreadRequest:
    threads: int
    request: Any  # openvino.InferRequest


class OpenVinoTokenEmbeddings(_PerThreadCount):
    """The graph compiled by OpenVINO's CPU plugin at `precision` ("none": f32, "bf16"), once per calling
    thread, on as many threads as torch gives that thread (a second or two a compile).

    Nothing of OpenVINO is shared between threads (a Core, a compiled model and an infer request each), and
    its compiled-model cache (CACHE_DIR) is not used: with it, two bulk workers' first passes crashed the
    process (heap corruption, bench/backends.py on all-mpnet-base-v2, OpenVINO 2026.4), without it they run.
    OpenVINO runs a pass on its own worker threads, so the bulk lane's SCHED_IDLE class does not reach them.

    A compiled model keeps, for as long as it lives, buffers for the largest pass it has run and state for
    every input shape it has met: after syncing the shared library the embedder (a model for the query lane
    and one for each bulk worker) held 5.3 GB (bench.scale with no size). So a pass runs in parts of at
    most PASS_TOKENS tokens, its width padded with masked columns (dropped from the output) to a few
    shapes (`padded_width`), and the bulk lane drops its workers' models when it idles (`release`): 0.97 GB
    after the same sync (2.4 GB at its peak), which also ran faster (Pride and Prejudice through
    bench/ingest.py: 22.4 -> 18.7 s; smaller passes stay in cache).
    """

    def __init__(self, graph: Path, precision: EmbedderQuantize, pad_token_id: int) -> None:
        if precision not in OPENVINO_PRECISIONS:
            raise FailedPrecondition(
                f"EMBEDDER_BACKEND=openvino runs at EMBEDDER_QUANTIZE=none or bf16, not {precision}."
            )
        self._precision = OPENVINO_PRECISIONS[precision]
        self._pad_token_id = pad_token_id
        self._requests: dict[int, _ThreadRequest] = {}  # by thread ident
        self._requests_lock = threading.Lock()
        super().__init__(graph)

    def _request(self, threads: int) -> Any:
        """This thread's infer request on its own compiled model (the request keeps its model alive)."""
        thread = threading.get_ident()
        with self._requests_lock:
            mine = self._requests.get(thread)
        if mine is None or mine.threads != threads:
            compiled = import_openvino().Core().compile_model(str(self.graph), "CPU", {
                "INFERENCE_PRECISION_HINT": self._precision,
                "PERFORMANCE_HINT": "LATENCY",
                "NUM_STREAMS": 1,
                "INFERENCE_NUM_THREADS": threads,
                "ENABLE_CPU_PINNING": False,  # a shared machine: threads go where the scheduler has room
            })
            mine = _ThreadRequest(threads, compiled.create_infer_request())
            with self._requests_lock:
                # A thread that has ended (the loading thread, a finished pool's) holds its model no longer.
                alive = {live.ident for live in threading.enumerate()}
                self._requests = {ident: held for ident, held in self._requests.items() if ident in alive}
                self._requests[thread] = mine
        return mine.request

    def release(self, threads: int) -> None:
        """Drop the compiled models of the threads that run at `threads` threads, and their buffers: each is
        compiled again at its thread's next pass (a quarter of a second for all-MiniLM-L6-v2). A pass under
        way keeps its own until it ends."""
        with self._requests_lock:
            for thread in [thread for thread, mine in self._requests.items() if mine.threads == threads]:
                del self._requests[thread]

    def _make(self, threads: int) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
        self._request(threads)  # compiles now in the loading thread: a graph that does not compile fails here

        def run(feeds: dict[str, np.ndarray]) -> np.ndarray:
            request = self._request(threads)
            input_ids, attention_mask = feeds["input_ids"], feeds["attention_mask"]
            rows, width = input_ids.shape
            padding = ((0, 0), (0, padded_width(width) - width))
            input_ids = np.pad(input_ids, padding, constant_values=self._pad_token_id)
            attention_mask = np.pad(attention_mask, padding)
            rows_a_pass = max(1, PASS_TOKENS // input_ids.shape[1])
            parts = []
            for start in range(0, rows, rows_a_pass):
                request.infer({"input_ids": input_ids[start:start + rows_a_pass],
                               "attention_mask": attention_mask[start:start + rows_a_pass]})
                # a copy: the request reuses its output tensor
                parts.append(np.array(request.get_output_tensor(0).data[:, :width], dtype=np.float32))
            return parts[0] if len(parts) == 1 else np.concatenate(parts)

        return run
