"""The chunk stage: sentences and their neighbour similarities into semantic chunks.

The chunker never embeds. The caller sends `sentence_texts(sentences)` to the
embedder in big batches with `neighbour_similarities` set and passes the returned
floats here: `similarities[i]` is the cosine similarity of sentence i to sentence
i + 1, over the whole book in reading order (pairs across chapters are ignored).

Rules, for one chapter at a time (chunks never cross chapters):
- a chunk ends before sentence i when it already has `min_chunk_size` words and
  similarities[i - 1] < `threshold` (a semantic break);
- a chunk never exceeds `max_chunk_size` words: when the next sentence would take
  it over, it ends at its weakest link instead, the lowest similarity among the
  places that leave it at least `min_chunk_size` words (a forced break);
- a chapter's last chunk shorter than `min_chunk_size` joins the one before it
  when the two fit in `max_chunk_size`, so chapters do not end in scraps.
Hierarchical mode makes each chapter with text a parent of its chunks. A parent
keeps the chapter's whole text, and its vector is made from `embed_text`: the
chapter's title path and its first PARENT_EMBED_WORDS words, which fit in the
256-token window of all-MiniLM-L6-v2, so what a parent's vector stands for is
exactly what was embedded, never a silently truncated tail.
Everything here is a pure function of its inputs: the same book, model and
parameters give the same chunks.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from alexandria.contract import CHUNK_THRESHOLD, MAX_CHUNK_SIZE, MIN_CHUNK_SIZE
from alexandria.errors import InvalidArgument
from alexandria.locator import ChunkLocator
from alexandria.store.schema import Level, TextSource
from services.ingest.documents import (
    BreakKind,
    Chapter,
    Chunk,
    ChunkedBook,
    ChunkingParams,
    ChunkingPreview,
    ChunkSample,
    ChunkStats,
    ExtractedBook,
    ParentChunk,
    SampleBreak,
    Sentence,
    SimilarityDistribution,
    ThresholdComparison,
    ThresholdReport,
    iter_words,
)
from services.ingest.segment import MAX_SENTENCE_WORDS

COMPARE_THRESHOLDS = (0.40, 0.45, 0.50, 0.55, 0.60)
PARENT_EMBED_WORDS = 180
SAMPLE_BREAKS = 3
MAX_FORCED_SHARE = 0.10
BREAK_CONTEXT_CHARS = 100


def validate_params(
    threshold: float | None = None, min_chunk_size: int | None = None, max_chunk_size: int | None = None
) -> ChunkingParams:
    """Chunking parameters with defaults for unset (None or 0) values, or InvalidArgument naming the bad one
    (the bounds are the contract's, alexandria.contract)."""
    defaults = ChunkingParams()
    params = ChunkingParams(
        threshold or defaults.threshold,
        min_chunk_size or defaults.min_chunk_size,
        max_chunk_size or defaults.max_chunk_size,
    )
    CHUNK_THRESHOLD.check(params.threshold, "it is the cosine similarity below which a chunk may end")
    MIN_CHUNK_SIZE.check(params.min_chunk_size)
    MAX_CHUNK_SIZE.check(params.max_chunk_size, f"chunks are made of whole sentences, of up to {MAX_SENTENCE_WORDS} words")
    if params.max_chunk_size <= params.min_chunk_size:
        raise InvalidArgument(
            f"max_chunk_size must be above min_chunk_size ({params.min_chunk_size}), got {params.max_chunk_size}."
        )
    return params


@dataclass(frozen=True)
class _Breaks:
    """Where each chunk starts (a sentence index) and why, for one parameter set."""

    starts: np.ndarray  # int, ascending, starts[0] == 0
    kinds: tuple[BreakKind, ...]

    def ends(self, total: int) -> np.ndarray:
        """Where each chunk ends (exclusive), `total` being the number of sentences."""
        return np.append(self.starts[1:], total) if len(self.starts) else self.starts

    def count(self, kind: BreakKind) -> int:
        return sum(1 for k in self.kinds if k is kind)


class _Sentences:
    """Sentence word counts and chapters as arrays, with prefix sums for O(1) word counts of any run."""

    def __init__(self, sentences: Sequence[Sentence], similarities: np.ndarray) -> None:
        if len(sentences) and len(similarities) != len(sentences) - 1:
            raise ValueError(
                f"{len(similarities)} similarities for {len(sentences)} sentences; "
                "expected one per neighbour pair"
            )
        self.sentences = sentences
        self.similarities = np.asarray(similarities, dtype=np.float64)
        self.words = np.fromiter((s.word_count for s in sentences), dtype=np.int64, count=len(sentences))
        self.chapters = np.fromiter(
            (s.chapter_index for s in sentences), dtype=np.int64, count=len(sentences)
        )
        self.prefix = np.concatenate(([0], np.cumsum(self.words)))
        # within[i]: sentences i and i + 1 are in the same chapter, so their similarity matters
        self.within = self.chapters[:-1] == self.chapters[1:]

    def __len__(self) -> int:
        return len(self.sentences)

    def words_between(self, start: int, end: int) -> int:
        return int(self.prefix[end] - self.prefix[start])

    def chapter_runs(self) -> list[tuple[int, int]]:
        """[start, end) of each chapter's sentences."""
        cuts = np.flatnonzero(~self.within) + 1
        bounds = np.concatenate(([0], cuts, [len(self)])) if len(self) else np.array([0])
        return [(int(a), int(b)) for a, b in itertools.pairwise(bounds) if b > a]


def _forced_break(run: _Sentences, chunk_start: int, next_sentence: int, params: ChunkingParams) -> int:
    """Where to end a chunk that `next_sentence` would take over the maximum: its weakest allowed link."""
    prefix = run.prefix
    # the chunk before the break keeps >= min words; the chunk after it, with next_sentence, stays <= max
    lowest = int(np.searchsorted(prefix, prefix[chunk_start] + params.min_chunk_size, side="left"))
    lowest = max(
        lowest, int(np.searchsorted(prefix, prefix[next_sentence + 1] - params.max_chunk_size, side="left"))
    )
    lowest = max(lowest, chunk_start + 1)
    if lowest >= next_sentence:
        return next_sentence
    window = run.similarities[lowest - 1 : next_sentence]  # similarity before each candidate start
    return lowest + int(np.argmin(window))


def _breaks(run: _Sentences, params: ChunkingParams) -> _Breaks:
    starts: list[int] = []
    kinds: list[BreakKind] = []
    for chapter_start, chapter_end in run.chapter_runs():
        first_of_chapter = len(starts)
        starts.append(chapter_start)
        kinds.append(BreakKind.CHAPTER)
        for i in range(chapter_start + 1, chapter_end):
            chunk_start = starts[-1]
            if (
                run.words_between(chunk_start, i) >= params.min_chunk_size
                and run.similarities[i - 1] < params.threshold
            ):
                starts.append(i)
                kinds.append(BreakKind.SEMANTIC)
            elif run.words_between(chunk_start, i + 1) > params.max_chunk_size:
                starts.append(_forced_break(run, chunk_start, i, params))
                kinds.append(BreakKind.FORCED)
        if (
            len(starts) - first_of_chapter > 1
            and run.words_between(starts[-1], chapter_end) < params.min_chunk_size
            and run.words_between(starts[-2], chapter_end) <= params.max_chunk_size
        ):
            starts.pop()
            kinds.pop()
    return _Breaks(np.array(starts, dtype=np.int64), tuple(kinds))


def _head_words(text: str, words: int) -> str:
    """`text` up to the end of its `words`-th word (the one word rule: a dictionary's words in Japanese...)."""
    for n, (_, end) in enumerate(iter_words(text), start=1):
        if n == words:
            return text[:end]
    return text


def _page_range(chapter: Chapter) -> tuple[int | None, int | None]:
    if not chapter.page_spans:
        return None, None
    return chapter.page_spans[0].page, chapter.page_spans[-1].page


def chunk_book(
    book: ExtractedBook,
    sentences: Sequence[Sentence],
    similarities: np.ndarray,
    params: ChunkingParams,
    hierarchical: bool = True,
) -> ChunkedBook:
    """Semantic chunks of a book (children of chapter parents when `hierarchical`, else flat).

    `sentences` are `segment(book)`; `similarities` the embedder's neighbour
    similarities of their texts (len(sentences) - 1 floats).
    """
    run = _Sentences(sentences, similarities)
    breaks = _breaks(run, params)
    ends = breaks.ends(len(run))
    # chapters with chunks, in reading order, and how many chunks each has
    siblings: dict[int, int] = {}
    for start in breaks.starts:
        chapter_index = sentences[int(start)].chapter_index
        siblings[chapter_index] = siblings.get(chapter_index, 0) + 1
    parent_of = {chapter_index: n for n, chapter_index in enumerate(siblings)} if hierarchical else {}

    chunks = []
    sequence: dict[int, int] = {}
    for position, (start, end, kind) in enumerate(zip(breaks.starts, ends, breaks.kinds, strict=True)):
        first, last = sentences[int(start)], sentences[int(end) - 1]
        chapter = book.chapters[first.chapter_index]
        index_in_chapter = sequence.get(chapter.index, 0)
        sequence[chapter.index] = index_in_chapter + 1
        chunks.append(
            Chunk(
                text=chapter.text[first.start : last.end],
                word_count=run.words_between(int(start), int(end)),
                locator=ChunkLocator(
                    chapter.display_title, chapter.index, position, first.page_start, last.page_end,
                    text_source(book, first.page_start, last.page_end),
                ),
                level=Level.CHILD if hierarchical else Level.FLAT,
                sequence_index=index_in_chapter,
                sibling_count=siblings[chapter.index],
                parent_index=parent_of.get(chapter.index),
                break_kind=kind,
                first_sentence=int(start),
                end_sentence=int(end),
            )
        )
    parents = []
    for chapter_index, n in parent_of.items():
        chapter = book.chapters[chapter_index]
        parents.append(
            ParentChunk(
                text=chapter.text,
                word_count=chapter.word_count,
                locator=ChunkLocator(chapter.display_title, chapter.index, n, *_page_range(chapter),
                                     text_source(book, *_page_range(chapter))),
                embed_text=f"{chapter.display_title}\n\n{_head_words(chapter.text, PARENT_EMBED_WORDS)}",
                child_count=siblings[chapter_index],
            )
        )
    return ChunkedBook(params, hierarchical, tuple(chunks), tuple(parents))


def text_source(book: ExtractedBook, page_start: int | None, page_end: int | None) -> TextSource:
    """OCR when any page of the span was read by OCR, else TEXT."""
    if page_start is None or not book.ocr_pages:
        return TextSource.TEXT
    pages = range(page_start, (page_end or page_start) + 1)
    return TextSource.OCR if any(page in book.ocr_pages for page in pages) else TextSource.TEXT


def _context(sentences: Sequence[Sentence], start: int, end: int, tail: bool) -> str:
    """About BREAK_CONTEXT_CHARS characters from the end (tail) or start of sentences [start, end)."""
    text, index = "", end - 1 if tail else start
    while len(text) < BREAK_CONTEXT_CHARS and start <= index < end:
        piece = sentences[index].text
        text = f"{piece} {text}".strip() if tail else f"{text} {piece}".strip()
        index += -1 if tail else 1
    if len(text) <= BREAK_CONTEXT_CHARS:
        return text
    if tail:
        return "…" + text[-BREAK_CONTEXT_CHARS:].lstrip()
    return text[:BREAK_CONTEXT_CHARS].rstrip() + "…"


def _sample_breaks(run: _Sentences, breaks: _Breaks) -> tuple[SampleBreak, ...]:
    semantic = [n for n, kind in enumerate(breaks.kinds) if kind is BreakKind.SEMANTIC]
    if not semantic:
        return ()
    # spread over the book: at 1/6, 3/6 and 5/6 of its semantic breaks
    picks = sorted(
        {semantic[len(semantic) * (2 * k + 1) // (2 * SAMPLE_BREAKS)] for k in range(SAMPLE_BREAKS)}
    )
    ends = breaks.ends(len(run))
    samples = []
    for n in picks:
        start = int(breaks.starts[n])
        samples.append(
            SampleBreak(
                sentence_index=start,
                similarity=round(float(run.similarities[start - 1]), 4),
                before=_context(run.sentences, int(breaks.starts[n - 1]), start, tail=True),
                after=_context(run.sentences, start, int(ends[n]), tail=False),
            )
        )
    return tuple(samples)


def _compare_one(run: _Sentences, params: ChunkingParams) -> ThresholdComparison:
    breaks = _breaks(run, params)
    chunk_of = np.repeat(np.arange(len(breaks.starts)), np.diff(np.append(breaks.starts, len(run))))
    inside = chunk_of[:-1] == chunk_of[1:]
    inner = run.similarities[inside]
    return ThresholdComparison(
        threshold=params.threshold,
        chunks=len(breaks.starts),
        avg_words=round(float(run.prefix[-1]) / max(1, len(breaks.starts)), 1),
        coherence=round(float(inner.mean()), 4) if inner.size else 0.0,
        semantic_breaks=breaks.count(BreakKind.SEMANTIC),
        forced_breaks=breaks.count(BreakKind.FORCED),
        chapter_breaks=breaks.count(BreakKind.CHAPTER),
        sample_breaks=_sample_breaks(run, breaks),
    )


def _distribution(values: np.ndarray) -> SimilarityDistribution:
    if not values.size:
        return SimilarityDistribution(0.0, 0.0, 0.0, 0.0)
    return SimilarityDistribution(
        min=round(float(values.min()), 4),
        max=round(float(values.max()), 4),
        mean=round(float(values.mean()), 4),
        median=round(float(np.median(values)), 4),
    )


def compare_thresholds(
    sentences: Sequence[Sentence],
    similarities: np.ndarray,
    min_chunk_size: int | None = None,
    max_chunk_size: int | None = None,
    thresholds: Sequence[float] = COMPARE_THRESHOLDS,
) -> ThresholdReport:
    """Chunk the same sentences at each threshold (embedding once) and recommend one, saying why."""
    params = [validate_params(t, min_chunk_size, max_chunk_size) for t in thresholds]
    run = _Sentences(sentences, similarities)
    comparisons = tuple(_compare_one(run, p) for p in params)
    pairs = run.similarities[run.within]
    # two standard errors of a mean of these similarities: coherence differences below it are noise
    noise = 2 * float(pairs.std()) / np.sqrt(pairs.size) if pairs.size > 1 else 0.0
    distribution = _distribution(pairs)
    recommendation, reason = recommend_threshold(comparisons, noise, distribution.median)
    return ThresholdReport(
        total_sentences=len(run),
        total_words=int(run.prefix[-1]),
        similarity_distribution=distribution,
        comparisons=comparisons,
        recommendation=recommendation,
        recommendation_reason=reason,
    )


def _forced_share(comparison: ThresholdComparison) -> float:
    return comparison.forced_breaks / max(1, comparison.semantic_breaks + comparison.forced_breaks)


def recommend_threshold(
    comparisons: Sequence[ThresholdComparison], noise: float, median_similarity: float
) -> tuple[float, str]:
    """The recommended threshold and, in words, the rule that chose it.

    1. Meaning must decide the breaks: keep thresholds where max_chunk_size forces at
       most MAX_FORCED_SHARE of them (if none, the ones forcing the fewest).
    2. Of those, the most coherent wins, but coherences within `noise` (two standard
       errors) of the best are equally good.
    3. Among equally good ones, the nearest to the default: no change without evidence.
    Neither end of the range wins by construction: a low threshold loses on rule 1
    (chunks run into the size cap), a high one on rule 2 (breaks anywhere once a chunk
    has min words, so chunks mix topics and coherence drops).
    """
    eligible = [c for c in comparisons if _forced_share(c) <= MAX_FORCED_SHARE]
    if not eligible:
        fewest = min(_forced_share(c) for c in comparisons)
        eligible = [c for c in comparisons if _forced_share(c) == fewest]
    best = max(c.coherence for c in eligible)
    equivalent = [c for c in eligible if c.coherence >= best - noise]
    chosen = min(equivalent, key=lambda c: (abs(c.threshold - CHUNK_THRESHOLD.default), c.threshold))
    dropped = [c for c in comparisons if c not in eligible]
    parts = []
    if dropped:
        parts.append(
            f"{_thresholds(dropped)} left out: max_chunk_size forced over "
            f"{MAX_FORCED_SHARE:.0%} of their breaks"
        )
    if len(equivalent) > 1:
        low, high = min(c.coherence for c in equivalent), max(c.coherence for c in equivalent)
        parts.append(
            f"{_thresholds(equivalent)} are equally coherent ({low:.3f}-{high:.3f}, "
            "within two standard errors, "
            f"{noise:.3f}), so the one nearest the default {CHUNK_THRESHOLD.default} is taken"
        )
    else:
        parts.append(f"{chosen.threshold:.2f} has clearly the most coherent chunks ({chosen.coherence:.3f})")
    if min(c.threshold for c in comparisons) > median_similarity:
        parts.append(
            "note: every threshold tried is above the median neighbour similarity "
            f"({median_similarity:.2f}), "
            "so chunks end soon after reaching min_chunk_size"
        )
    rule = (
        f"Rule: keep thresholds where at most {MAX_FORCED_SHARE:.0%} of breaks are forced, take the most "
        "coherent, and among those within two standard errors of it the one nearest the default."
    )
    return chosen.threshold, f"{chosen.threshold:.2f}: " + "; ".join(parts) + ". " + rule


def _thresholds(comparisons: Sequence[ThresholdComparison]) -> str:
    return ", ".join(f"{c.threshold:.2f}" for c in comparisons)


def chunk_stats(chunks: Sequence[Chunk]) -> ChunkStats:
    """Number of chunks and their average, smallest and largest sizes in words."""
    words = [chunk.word_count for chunk in chunks]
    if not words:
        return ChunkStats(0, 0.0, 0, 0)
    return ChunkStats(len(words), round(sum(words) / len(words), 1), min(words), max(words))


def sample_chunks(chunked: ChunkedBook) -> ChunkingPreview:
    """Stats and three sample chunks, from the start, the middle and late in the book (chunk_num 1-based)."""
    chunks = chunked.chunks
    picks = sorted({0, len(chunks) // 2, (3 * len(chunks)) // 4}) if chunks else []
    samples = tuple(
        ChunkSample(
            chunk_num=n + 1, words=chunks[n].word_count, text=chunks[n].text, locator=chunks[n].locator
        )
        for n in picks
    )
    return ChunkingPreview(chunk_stats(chunks), samples)
