"""Sentence segmentation: abbreviations, dialogue, bounded windows, offsets and pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.helpers import extracted
from services.ingest.documents import Chapter, PageSpan, count_words
from services.ingest.segment import (
    MAX_SENTENCE_WORDS,
    segment,
    segment_chapter,
    sentence_spans,
    sentence_texts,
)


def _chapter(text: str, index: int = 0, page_spans: tuple[PageSpan, ...] = ()) -> Chapter:
    return Chapter(index, "Title", 1, text, ("Title",), index + 1, page_spans)


def _sentences(text: str) -> list[str]:
    return [text[start:end] for start, end in sentence_spans(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Mr. Bennet replied. Mrs. Long had come.", ["Mr. Bennet replied.", "Mrs. Long had come."]),
        ("Dr. Watson met St. John at noon. He left.", ["Dr. Watson met St. John at noon.", "He left."]),
        ("Fruit, e.g. Apples, i.e. Red ones. Good.", ["Fruit, e.g. Apples, i.e. Red ones.", "Good."]),
        ("J. R. R. Tolkien wrote it. It sold well.", ["J. R. R. Tolkien wrote it.", "It sold well."]),
        ('"Is that his design?" said he. "Design!"', ['"Is that his design?" said he.', '"Design!"']),
        ('"Oh! Single, my dear." She smiled.', ['"Oh!', 'Single, my dear."', "She smiled."]),
        (
            "\u201cYou want to tell me.\u201d \u201cYes.\u201d",
            ["\u201cYou want to tell me.\u201d", "\u201cYes.\u201d"],
        ),
        ("It cost 5 dollars. 12 people came.", ["It cost 5 dollars.", "12 people came."]),
        ("First paragraph without a stop\n\nSecond one.", ["First paragraph without a stop", "Second one."]),
        ("Wait... what? Yes!", ["Wait... what?", "Yes!"]),
    ],
)
def test_sentence_boundaries(text: str, expected: list[str]) -> None:
    assert _sentences(text) == expected


def test_short_fragments_join_the_next_sentence() -> None:
    text = "Ber.\nWho's there?\n\nFran.\nBernardo?\n\nBer.\nHe."
    assert [s.text for s in segment_chapter(_chapter(text))] == [
        "Ber. Who's there?",
        "Fran. Bernardo? Ber. He.",
    ]


def test_text_without_punctuation_is_cut_into_bounded_windows() -> None:
    text = " ".join(f"word{n}" for n in range(1000))
    sentences = segment_chapter(_chapter(text))
    assert len(sentences) == 9 and {s.word_count for s in sentences} <= {111, 112}  # even, all <= 120
    assert " ".join(s.text for s in sentences) == text


def test_long_sentences_are_cut_at_a_comma_near_the_even_cut() -> None:
    words = [f"w{n}" + ("," if n == 105 else "") for n in range(1, 201)]
    sentences = segment_chapter(_chapter(" ".join(words) + "."))
    assert [s.word_count for s in sentences] == [105, 95]
    assert sentences[0].text.endswith("w105,")


def test_offsets_pages_and_words_match_the_chapter_text() -> None:
    text = "One two three. Four five six seven.\n\nEight nine ten eleven. Twelve thirteen fourteen."
    chapter = _chapter(text, index=3, page_spans=(PageSpan(0, 35, 7), PageSpan(37, len(text), 8)))
    sentences = segment_chapter(chapter)
    assert [(s.text, s.chapter_index, s.page_start, s.page_end) for s in sentences] == [
        ("One two three.", 3, 7, 7),
        ("Four five six seven.", 3, 7, 7),
        ("Eight nine ten eleven.", 3, 8, 8),
        ("Twelve thirteen fourteen.", 3, 8, 8),
    ]
    for sentence in sentences:
        assert text[sentence.start : sentence.end] == sentence.text
        assert count_words(sentence.text) == sentence.word_count


@pytest.mark.parametrize(
    ("text", "words"),
    [("don't stop", 2), ("well-known", 2), ("o\u2019er the hill", 3), ("Ça va, 2024!", 3), ("-- ... !!", 0)],
)
def test_one_word_rule(text: str, words: int) -> None:
    assert count_words(text) == words


def test_a_whole_book_loses_no_words_and_is_deterministic(shared_corpus: Path) -> None:
    book = extracted(
        shared_corpus / "calibre-library/Jane Austen/Pride and Prejudice (1)/"
        "Pride and Prejudice - Jane Austen.epub"
    )
    sentences = segment(book)
    assert sum(s.word_count for s in sentences) == book.word_count
    assert max(s.word_count for s in sentences) <= MAX_SENTENCE_WORDS
    assert [s.chapter_index for s in sentences] == sorted(s.chapter_index for s in sentences)
    assert sentence_texts(segment(book)) == sentence_texts(sentences)
