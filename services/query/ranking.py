"""How a search's candidates are ranked, and what a result's `score` means.

Two stages. The first finds candidates: the engine's dense and lexical retrievers, fused with RRF
in hybrid mode, give a pool of CANDIDATE_POOL passages whatever the limit asked for (so the first
five results are the same at any limit). The second scores every candidate by its relevance and
sorts by it:

- semantic similarity: a weighted mean of the passage's cosine to the question (its chunk vector)
  and its best window's cosine (MaxSim over its window vectors: runs of the passage that fit the model,
  headed by the book's title and chapter), both computed by the engine for the candidates alone; rescaled by what the model gives two unrelated texts (`similarity_floor`,
  measured by the embedder at start-up), so that 0 means "no closer than unrelated text" for every
  model (e5 models give unrelated texts 0.7, MiniLM about 0);
- lexical match: the passage's BM25 score for the question, relative to the best candidate's, and
  to at least LEXICAL_SCALE (a weak match stays weak when nothing matches better);
- in hybrid mode, their weighted mean (SEMANTIC_WEIGHT), in the single modes the one signal;
- with a cross-encoder configured (the embedder's Rerank), its score for the RERANK_DEPTH best
  candidates replaces that: a model reading question and passage together ranks best.

A query of QUOTE_MIN_WORDS words or more that a candidate holds word for word is a quote of it, in the modes
that match words (hybrid, lexical): such candidates come first, each scored at least as high as the best
candidate that does not hold it (quotes_first). A meaning-only score puts a line like "It is a truth
universally acknowledged" in the passages about truths and acknowledgements; whoever types a line wants the
passage that holds it.

The relevance is then mapped onto [0, 1] so that the model's relevance at half (ScoreScale, from the embedder:
services/embedder/score_scale.py) lands on 0.5, the tool's default threshold: on bench/retrieval.py's tuning half
no answer in the top five scores under it, with a hypothetical passage or without. A cross-encoder's score is
already a probability and is used as it is.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from alexandria.relevance import RELEVANCE_AT_HALF, SEMANTIC_WEIGHT
from alexandria.store import DENSE, Filter, Hit, SparseVector, Store
from alexandria.store.model import SPARSE, SimilarityQuery

# The first stage's pool, and what each retriever contributes to the fusion in hybrid mode.
CANDIDATE_POOL = 50
PREFETCH = 100
# A first stage that leaves the level of its candidates to be checked with their scores (search.candidate_filters)
# finds this many more, so that the chapters among them still leave a pool of CANDIDATE_POOL passages: on the
# retrieval bench's 23 books (440 questions, fast) the first 50 held 2.4 chapters on average (18 at most), the first 70
# 3.5 (26 at most), leaving 7 questions under 50 passages; every headline figure of the bench stayed as it was
# (CHANGELOG.md, 2026-11-28).
UNCHECKED_MARGIN = 20
LEXICAL_SCALE = 8.0
# The best window's share of the semantic similarity, the chunk vector having the rest. the windows bench (bench/windows.py, in git history),
# tuning half (recall@5 / MRR@10), windows of 256 tokens overlapping by 64 under the title and chapter:
# best window alone 0.56 / 0.398, 3:1 0.57 / 0.410, 1:1 0.55 / 0.412, 1:3 0.53 / 0.387; sentence vectors
# instead of windows (1:1, what ranking did before) 0.51 / 0.363, and adding them to the windows gained nothing.
WINDOW_WEIGHT = 0.75
# Candidates a cross-encoder reads: the ones that can still reach the first results.
RERANK_DEPTH = 30
# With a hypothetical passage, a candidate's order is by (1 - HINT_WEIGHT) x its relevance to the question +
# HINT_WEIGHT x its relevance to the passage. Tuning half, every language, fast profile, recall@5 / MRR@10 at the
# tool's defaults with the LLM-written passages: 0 (the passage in the first stage only) 0.538 / 0.369, 0.3
# 0.792 / 0.660, 0.5 0.854 / 0.770, 0.7 0.885 / 0.813, 0.85 0.908 / 0.829, 1 0.892 / 0.827; with the blind set
# (the question restated) 0.7 gives 0.523 and 0.85 0.508, no passage 0.508. 0.7 leaves a wrong guess less sway.
HINT_WEIGHT = 0.7
# With a hypothetical passage, once the question is answered (a candidate reaches the threshold on its relevance to
# the question), the passage's order picks among the candidates that reach this share of the threshold. The threshold
# dropped answers the passage had found and the question alone scores a little under it: tuning half, the LLM's
# passages, recall@5 / MRR@10 with the whole threshold 0.930 / 0.866 (fast) and 0.920 / 0.876 (multilingual),
# with 0.8 of it 0.960 / 0.895 and 0.960 / 0.911, 0.6 and 0.4 0.960 / 0.895 and 0.980 / 0.926, with none (0) the
# same. An off-topic question is turned away exactly as often as without a passage, by construction.
HINTED_THRESHOLD_SHARE = 0.5
# The fewest words a query has for a passage holding them in a row to be taken as quoted (fewer are key words, which
# many passages hold in a row: "the white whale").
QUOTE_MIN_WORDS = 4
_WORD = re.compile(r"\w+")


class PassageReranker(Protocol):
    async def reranks(self) -> bool:
        """Whether there is a cross-encoder to rerank with."""

    async def rerank(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """Each passage's relevance to `query` in [0, 1] by the cross-encoder."""


@dataclass(frozen=True)
class Signals:
    """What the engine measured of each candidate, in candidate order."""

    chunk_cosine: np.ndarray
    window_cosine: np.ndarray  # the best window's (or, in a collection made before windows, sentence's)
    lexical: np.ndarray  # BM25 scores; 0 where the candidate holds no query word


def measure(store: Store, collection: str, hits: Sequence[Hit], texts: Sequence[tuple[np.ndarray | None, SparseVector]],
            multivector: str, where: Filter | None = None, pool: int | None = None) -> tuple[list[Hit], list[Signals]]:
    """The first `pool` candidates within `where` (every one when both are None), and the engine's dense, window and
    lexical scores of them for each text (a dense vector, None in a lexical search, and its lexical terms), all in one
    call on their ids; `multivector` names the collection's window vectors (CollectionModel.passage_vectors). A
    candidate within `where` is in at least one answer: each passage has a chunk vector, and a lexical search's
    candidates hold a query word."""
    ids = [hit.id for hit in hits]
    queries: list[SimilarityQuery] = []
    for vector, terms in texts:
        if vector is not None:
            queries += [(vector, DENSE), (vector, multivector)]
        if terms.indices:
            queries.append((terms, SPARSE))
    answers = store.similarities(collection, ids, queries, where)
    if where is not None:
        within = set().union(*answers)
        hits = [hit for hit in hits if hit.id in within]
    hits = list(hits[:pool])
    ids = [hit.id for hit in hits]
    scores = iter(answers)
    measured = []
    for vector, terms in texts:
        chunk, window = (next(scores), next(scores)) if vector is not None else ({}, {})
        lexical = next(scores) if terms.indices else {}
        measured.append(Signals(
            chunk_cosine=np.array([chunk.get(i, 0.0) for i in ids], dtype=np.float64),
            # A passage stored without window vectors is scored by its chunk vector alone.
            window_cosine=np.array([window.get(i, chunk.get(i, 0.0)) for i in ids], dtype=np.float64),
            lexical=np.array([lexical.get(i, 0.0) for i in ids], dtype=np.float64),
        ))
    return hits, measured


@dataclass(frozen=True)
class ScoreScale:
    """What one model's signals mean (the embedder measures or knows both for its model): the cosine it gives
    unrelated texts, and the relevance at which a passage answers or directly concerns the question (score 0.5)."""

    similarity_floor: float = 0.0
    relevance_at_half: float = RELEVANCE_AT_HALF


# A model that gives unrelated texts a cosine of 0 and is scored as MiniLM is (the fakes of unit tests).
DEFAULT_SCALE = ScoreScale()


def semantic_relevance(signals: Signals, similarity_floor: float) -> np.ndarray:
    """Cosines rescaled so that 0 is what unrelated texts get from this model and 1 is identical text."""
    cosine = (1 - WINDOW_WEIGHT) * signals.chunk_cosine + WINDOW_WEIGHT * signals.window_cosine
    relevance: np.ndarray = np.clip((cosine - similarity_floor) / (1.0 - similarity_floor), 0.0, 1.0)
    return relevance


def lexical_relevance(signals: Signals) -> np.ndarray:
    return np.clip(signals.lexical / max(LEXICAL_SCALE, float(signals.lexical.max(initial=0.0))), 0.0, 1.0)


def relevance(signals: Signals, scale: ScoreScale, semantic: bool, lexical: bool) -> np.ndarray:
    """Each candidate's score in [0, 1] from the signals the mode uses, on the model's scale (see the module
    docstring)."""
    if semantic and lexical:
        raw = SEMANTIC_WEIGHT * semantic_relevance(signals, scale.similarity_floor) + (
            1 - SEMANTIC_WEIGHT
        ) * lexical_relevance(signals)
    elif semantic:
        raw = semantic_relevance(signals, scale.similarity_floor)
    else:
        raw = lexical_relevance(signals)
    return calibrate(raw, scale.relevance_at_half)


def calibrate(raw: np.ndarray, at_half: float) -> np.ndarray:
    """Piecewise linear onto [0, 1], `at_half` to 0.5: the default threshold's meaning."""
    return np.where(
        raw < at_half,
        0.5 * raw / at_half,
        0.5 + 0.5 * (raw - at_half) / (1.0 - at_half),
    )


def best_first(scores: np.ndarray) -> list[int]:
    """Candidate indices by score, highest first; ties keep the first stage's order."""
    return [int(i) for i in np.argsort(-scores, kind="stable")]


def first_stage_terms(question: SparseVector, passage: SparseVector | None) -> SparseVector:
    """The lexical terms the first stage searches for: the question's, and the hypothetical passage's beside them
    (each distinct term once, as a query's are). They cost about 1.3 ms a search and pay for it: without them, the
    LLM's passages on bench/retrieval.py's tuning half went from 0.96 to 0.92 recall@5 (fast)."""
    if passage is None:
        return question
    indices = list(dict.fromkeys([*question.indices, *passage.indices]))
    return SparseVector(indices=indices, values=[1.0] * len(indices))


def hinted_floor(threshold: float) -> float:
    """The least relevance to the question a result of an answered search with a hypothetical passage needs."""
    return threshold * HINTED_THRESHOLD_SHARE


def hinted_order(question_relevance: np.ndarray, passage_relevance: np.ndarray) -> list[int]:
    """Candidate indices, best first, by their relevance to the question and to the caller's hypothetical passage."""
    return best_first((1 - HINT_WEIGHT) * question_relevance + HINT_WEIGHT * passage_relevance)


def quoted_words(text: str) -> str | None:
    """`text`'s words as `holds_quote` compares them (case, accents and punctuation aside), space-separated; None
    when it has fewer than QUOTE_MIN_WORDS."""
    words = _words(text)
    return " ".join(words) if len(words) >= QUOTE_MIN_WORDS else None


def holds_quote(text: str, quote: str) -> bool:
    """Whether `text` holds the words of `quote` (from quoted_words) in a row, whole words."""
    return f" {quote} " in f" {' '.join(_words(text))} "


def _words(text: str) -> list[str]:
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return _WORD.findall("".join(c for c in decomposed if not unicodedata.combining(c)))


def quotes_first(scores: Sequence[float], quoting: Sequence[bool]) -> tuple[list[int], list[float]]:
    """The candidates' order with those that hold the quote first (in their order), and their scores then: each
    quoting one's at least the best that the others have, so that scores still fall down the list."""
    best_other = max((score for score, quotes in zip(scores, quoting, strict=True) if not quotes), default=0.0)
    order = [i for i, quotes in enumerate(quoting) if quotes] + [i for i, quotes in enumerate(quoting) if not quotes]
    return order, [max(scores[i], best_other) if quoting[i] else scores[i] for i in order]
