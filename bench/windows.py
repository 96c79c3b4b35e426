"""Passage vectors that fit the model: windows of each passage, measured against today's sentence vectors.

    .venv/bin/python bench/windows.py [--scratch bench/out/retrieval] [--config 256:32:title ...]

Before windows, a passage was scored by its chunk vector (the mean of its sentences' vectors) and its
best sentence (MaxSim over its sentence vectors): this bench embeds each passage's sentences itself (as
the ingest cut them: the segmenter's sentences) to compare. A sentence alone has lost its context, and the model reads at most
`max_seq_length` word pieces of a text. Here every passage of the retrieval bench's store is cut into
windows of at most W of the model's own tokens (the header included), overlapping by O tokens, each
starting on a word and never crossing the passage; a window's text starts with a header (nothing, the
book's title, or the title and the chapter). Each window is embedded as a passage, and a passage's window
score is its best window's cosine to the question (MaxSim).

The first stage (the engine's candidates) and the lexical signal are the search's own; only the second
stage's semantic signal changes, in the variants of SEMANTIC_VARIANTS. The questions are the retrieval
bench's, split into its tuning and check halves; hybrid mode, threshold 0, ranks as the tool returns them.
A config's window vectors are cached under the scratch folder.

Last line: JSON, per config and variant, recall@5 and MRR@10 of each half.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from questions import DEFAULT_CORPUS, SPLITS, Question, book_file, contains_phrase, load_questions
from retrieval import (
    COLLECTION,
    DEFAULT_SCRATCH,
    Configuration,
    embedder_service,
    ingest_corpus,
    ingested_file_names,
    is_from_book,
    model_slug,
    store_settings,
)
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from alexandria.logs import configure_logging
from alexandria.store import WINDOWS, Filter, Hit, open_store
from alexandria.store import schema as f
from alexandria.store.lexical import encode_query
from alexandria.store.records import ChunkRecord
from services.embedder.model_folder import resolve_model_source
from services.ingest.segment import sentence_spans
from services.query.outcome import SearchMode
from services.query.ranking import CANDIDATE_POOL, SEMANTIC_WEIGHT, Signals, lexical_relevance, measure
from services.query.search import Ranked, Searcher, SearchQuery, candidate_filters, first_stage_pool
from services.query.server import EmbedderQueryEncoder

log = logging.getLogger("bench.windows")

HEADERS = ("none", "title", "chapter")
DEFAULT_CONFIGS = ("256:0:none", "256:64:none", "256:64:title", "256:64:chapter", "128:32:chapter")
RECALL_K = 5
MRR_K = 10


@dataclass(frozen=True)
class WindowConfig:
    tokens: int  # at most, special tokens and header included
    overlap: int
    header: str  # one of HEADERS

    @classmethod
    def parse(cls, text: str) -> WindowConfig:
        tokens, overlap, header = text.split(":")
        if header not in HEADERS:
            raise SystemExit(f"header must be one of {HEADERS}, not {header!r}")
        return cls(int(tokens), int(overlap), header)

    @property
    def slug(self) -> str:
        return f"{self.tokens}-{self.overlap}-{self.header}"


@dataclass(frozen=True)
class StoredPassage:
    id: str
    text: str
    title: str
    chapter: str


def header_of(passage: StoredPassage, header: str) -> str:
    if header == "title":
        return f"{passage.title}\n"
    if header == "chapter":
        return f"{passage.title}, {passage.chapter}\n" if passage.chapter else f"{passage.title}\n"
    return ""


def windows(passage: StoredPassage, config: WindowConfig, tokenizer: PreTrainedTokenizerBase) -> list[str]:
    """The passage's windows: header + a span of the passage of at most the budget's tokens, each span
    starting on a word, consecutive spans overlapping by `config.overlap` tokens."""
    header = header_of(passage, config.header)
    budget = config.tokens - tokenizer.num_special_tokens_to_add() - len(tokenizer.tokenize(header))
    encoding = tokenizer(passage.text, add_special_tokens=False, return_offsets_mapping=True)
    offsets, words = encoding["offset_mapping"], encoding.word_ids()
    if len(offsets) <= budget:
        return [header + passage.text]
    spans, start = [], 0
    while True:
        end = min(start + budget, len(offsets))
        if end < len(offsets):  # end on a whole word: back to the first piece of the word cut
            while end > start + 1 and words[end] == words[end - 1]:
                end -= 1
        spans.append(header + passage.text[offsets[start][0] : offsets[end - 1][1]])
        if end == len(offsets):
            return spans
        following = max(end - config.overlap, start + 1)
        while following > start + 1 and words[following] == words[following - 1]:
            following -= 1  # start on a word
        start = following


def load_passages(store: Any) -> list[StoredPassage]:
    records = store.scroll(COLLECTION, Filter(must={f.COMPLETE: True, f.LEVEL: f.PASSAGE_LEVELS}), limit=10**7)
    passages = []
    for record in records:
        chunk = ChunkRecord.from_payload(record.payload)
        passages.append(StoredPassage(str(record.id), chunk.text, chunk.book.title, chunk.chapter_title))
    return passages


async def window_vectors(embedder: Any, passages: Sequence[StoredPassage], config: WindowConfig | None,
                         tokenizer: PreTrainedTokenizerBase, cache: Path) -> dict[str, np.ndarray]:
    """Each passage id -> its windows' vectors (normalised rows), cached per config; with no config, its
    sentences' vectors."""
    path = cache / f"windows-{config.slug if config else 'sentences'}.npz"
    if path.is_file():
        saved = np.load(path)
        counts, vectors = saved["counts"], saved["vectors"]
    else:
        texts, counts_list = [], []
        for passage in passages:
            if config is None:
                cut = [passage.text[start:end] for start, end in sentence_spans(passage.text)] or [passage.text]
            else:
                cut = windows(passage, config, tokenizer)
            texts += cut
            counts_list.append(len(cut))
        started = time.perf_counter()
        embedded = await embedder.embed_many(texts)
        vectors = np.asarray(embedded.vectors, dtype=np.float32)
        seconds = time.perf_counter() - started
        log.info("%s: %d windows of %d passages embedded in %.0f s (%.0f windows/s, %d truncated)",
                 config.slug if config else "sentences",
                 len(texts), len(passages), seconds, len(texts) / seconds, embedded.truncated)
        counts = np.asarray(counts_list)
        np.savez(path, counts=counts, vectors=vectors)
    vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    return {p.id: vectors[bounds[n] : bounds[n + 1]] for n, p in enumerate(passages)}


def rescale(cosine: np.ndarray, floor: float) -> np.ndarray:
    relevance: np.ndarray = np.clip((cosine - floor) / (1.0 - floor), 0.0, 1.0)
    return relevance


# How the semantic signal is made from the chunk vector's cosine (c), the best sentence's (s) and the
# best window's (w); "today" is ranking.semantic_relevance.
SEMANTIC_VARIANTS: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]] = {
    "today (c+s)/2": lambda c, s, w: (c + s) / 2,
    "(c+w)/2": lambda c, s, w: (c + w) / 2,
    "w": lambda c, s, w: w,
    "(c+s+w)/3": lambda c, s, w: (c + s + w) / 3,
    "(s+w)/2": lambda c, s, w: (s + w) / 2,
    "(c+s+2w)/4": lambda c, s, w: (c + s + 2 * w) / 4,
    "(c+3w)/4": lambda c, s, w: (c + 3 * w) / 4,
    "(3c+w)/4": lambda c, s, w: (3 * c + w) / 4,
    "max((c+3w)/4, s)": lambda c, s, w: np.maximum((c + 3 * w) / 4, s),
    "max((c+3w)/4, .9s)": lambda c, s, w: np.maximum((c + 3 * w) / 4, 0.9 * s),
}


@dataclass(frozen=True)
class Candidates:
    question: Question
    hits: list[Hit]
    signals: Signals
    query_vector: np.ndarray
    floor: float


def answer_rank(order: Sequence[int], hits: Sequence[Hit], question: Question) -> int | None:
    for rank, index in enumerate(order):
        chunk = ChunkRecord.from_payload(hits[index].payload)
        if is_from_book(chunk.book.file_path, chunk.book.calibre_id, question.book) and contains_phrase(
            chunk.text, question.phrase
        ):
            return rank
    return None


def scores(ranks: Sequence[int | None]) -> dict[str, float]:
    n = max(1, len(ranks))
    return {"recall@5": round(sum(r is not None and r < RECALL_K for r in ranks) / n, 4),
            "mrr@10": round(sum(1 / (r + 1) for r in ranks if r is not None and r < MRR_K) / n, 4)}


def best_cosines(vectors_of: dict[str, np.ndarray], cand: Candidates) -> np.ndarray:
    return np.array([float((vectors_of[h.id] @ cand.query_vector).max()) if h.id in vectors_of
                     else cand.signals.chunk_cosine[i] for i, h in enumerate(cand.hits)])


def evaluate(candidates: Sequence[Candidates], sentence_of: dict[str, np.ndarray],
             window_of: dict[str, np.ndarray] | None) -> dict[str, dict[str, Any]]:
    """Per variant, the scores of each half (hybrid mode, threshold 0)."""
    rows: dict[str, dict[str, Any]] = {}
    variants = SEMANTIC_VARIANTS if window_of is not None else {"today (c+s)/2": SEMANTIC_VARIANTS["today (c+s)/2"]}
    answered: dict[str, list[float]] = {}
    for name, combine in variants.items():  # s: the bench's sentence vectors, w: the config's windows
        ranks: dict[str, list[int | None]] = {split: [] for split in SPLITS}
        for cand in candidates:
            sig = cand.signals
            best_sentence = best_cosines(sentence_of, cand)
            best_window = best_cosines(window_of, cand) if window_of is not None else best_sentence
            semantic = rescale(combine(sig.chunk_cosine, best_sentence, best_window), cand.floor)
            relevance = SEMANTIC_WEIGHT * semantic + (1 - SEMANTIC_WEIGHT) * lexical_relevance(sig)
            order = [int(i) for i in np.argsort(-relevance, kind="stable")]
            rank = answer_rank(order, cand.hits, cand.question)
            ranks[cand.question.split].append(rank)
            if cand.question.split == "tuning" and rank is not None and rank < RECALL_K:
                answered.setdefault(name, []).append(float(relevance[order[rank]]))
        rows[name] = {split: scores(r) for split, r in ranks.items()}
        if answered.get(name):
            # What RELEVANCE_AT_HALF is tuned from: the lowest relevance of an answer in the top five.
            rows[name]["tuning"]["lowest answer"] = round(min(answered[name]), 3)
            rows[name]["tuning"]["median answer"] = round(float(np.median(answered[name])), 3)
    pool: dict[str, list[int | None]] = {split: [] for split in SPLITS}
    for cand in candidates:
        pool[cand.question.split].append(answer_rank(range(len(cand.hits)), cand.hits, cand.question))
    rows["in the pool"] = {split: {"recall@5": round(sum(r is not None for r in ranks) / max(1, len(ranks)), 4),
                                   "mrr@10": 0.0} for split, ranks in pool.items()}
    return rows


async def run(corpus: Path, scratch: Path, configs: Sequence[WindowConfig]) -> dict[str, Any]:
    questions = load_questions()
    scratch.mkdir(parents=True, exist_ok=True)
    files = sorted({book_file(corpus, q.book) for q in questions})
    store = open_store(store_settings(scratch))
    tokenizer = AutoTokenizer.from_pretrained(str(resolve_model_source(None).path))
    result: dict[str, Any] = {}
    try:
        async with embedder_service(scratch) as embedder:
            missing = [p for p in files if p.name not in ingested_file_names(store, COLLECTION)]
            if missing:
                log.info("ingesting %d books into %s", len(missing), scratch)
                await ingest_corpus(store, embedder, missing, COLLECTION)
            await asyncio.to_thread(store.optimize, COLLECTION)
            encoder = EmbedderQueryEncoder(embedder)
            searcher = Searcher(store, encoder)
            candidates = []
            for q in questions:
                query = SearchQuery(q.question, COLLECTION, search_mode=SearchMode.HYBRID)
                encoded = await encoder.encode(q.question)
                terms = encode_query(q.question)
                # The first stage gives ids alone (the search reads its results' payloads); this bench reads
                # every candidate's, to find the answer at any rank.
                where, checked_after = candidate_filters(query)
                first = searcher._candidates(query, where, first_stage_pool(checked_after), encoded.vector, terms)
                hits = searcher._read(COLLECTION, Ranked(first, [0.0] * len(first)), first).hits
                hits, [signals] = measure(store, COLLECTION, hits, [(encoded.vector, terms)], WINDOWS,
                                          checked_after, CANDIDATE_POOL)
                candidates.append(Candidates(q, hits, signals, encoded.vector, encoded.similarity_floor))
            passages = load_passages(store)
            sentence_of = await window_vectors(embedder, passages, None, tokenizer, scratch)
            result["sentences"] = evaluate(candidates, sentence_of, None)
            for config in configs:
                window_of = await window_vectors(embedder, passages, config, tokenizer, scratch)
                result[config.slug] = evaluate(candidates, sentence_of, window_of)
                counts = np.array([len(v) for v in window_of.values()])
                result[config.slug]["windows"] = {"total": int(counts.sum()), "mean": round(float(counts.mean()), 2),
                                                  "max": int(counts.max())}
                print(table(config.slug, result[config.slug]), flush=True)
    finally:
        store.close()
    return result


def table(title: str, rows: dict[str, Any]) -> str:
    lines = [f"{title}: {rows.get('windows', '')}",
             f"{'':<16}" + "".join(f"{s + ' ' + m:>18}" for s in SPLITS for m in ("recall@5", "mrr@10"))]
    for name, halves in rows.items():
        if name != "windows":
            lines.append(f"{name:<16}" + "".join(f"{halves[s][m]:>18.3f}" for s in SPLITS for m in ("recall@5", "mrr@10")))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--scratch", type=Path, default=DEFAULT_SCRATCH / model_slug(Configuration(None, None)))
    parser.add_argument("--config", action="append", help="TOKENS:OVERLAP:HEADER (header: none, title, chapter)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    configure_logging("bench.windows", "WARNING")
    log.setLevel(logging.INFO)
    logging.getLogger("bench.retrieval").setLevel(logging.INFO)
    configs = [WindowConfig.parse(c) for c in (args.config or DEFAULT_CONFIGS)]
    result = asyncio.run(run(args.corpus, args.scratch.resolve(), configs))
    print(table("sentences (today)", result["sentences"]))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
