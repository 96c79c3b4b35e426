"""The segment stage: chapters into sentences, the units the embedder compares with their neighbours.

A sentence ends at `.`, `!`, `?` or `…` (with any closing quotes or brackets) when
the next one starts with a capital, a digit or an opening quote, except after an
abbreviation that introduces a name (Mr., Mrs., Dr., St., i.e., e.g., ...) or an
initial (J. R. R.): `"Is that his design?" said he.` stays one sentence,
`"Oh! Single, my dear!"` is two. Paragraph breaks always end a sentence.
Two rules keep the units useful to embed:
- a fragment of under MIN_SENTENCE_WORDS words (a speaker's name `Ber.`, an `Oh!`)
  joins the sentence after it, so that it is compared by what it says;
- no sentence exceeds MAX_SENTENCE_WORDS: longer runs (verse, lists, text with no
  punctuation at all) are cut into even word windows, at a comma, semicolon, colon,
  dash or line end near each cut when there is one.
A book in a language written without spaces (Chinese, Japanese, Thai...; `services.ingest.scripts`)
has its sentences ended by ICU's rules instead (`。` needs no capital after it), within the same
paragraphs, and there a space is a soft break too (Thai separates phrases with one). Words are the
project's one word rule (`word_spans`) in every language: a dictionary's words in those scripts.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left

from services.ingest.documents import WORD_PATTERN, Chapter, ExtractedBook, Sentence, word_spans
from services.ingest.scripts import DETECTION_SAMPLE_CHARS, icu_sentence_ends, unspaced_locale

MAX_SENTENCE_WORDS = 120
MIN_SENTENCE_WORDS = 3
_SOFT_CUT_REACH = 15  # words either side of an even cut where a comma or line end is looked for

# Words after which a full stop does not end the sentence: titles before a name and
# Latin abbreviations that are followed by more of the sentence.
# fmt: off
ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "mme", "mlle", "messrs", "dr", "prof", "rev", "revd", "hon", "st", "sr", "jr", "capt",
    "col", "gen", "lt", "sgt", "maj", "cmdr", "adm", "gov", "sen", "rep", "fr", "bros", "co", "corp", "inc",
    "ltd", "no", "nos", "vol", "vols", "ch", "chap", "fig", "figs", "pp", "ed", "eds", "cf", "viz", "vs",
    "approx", "dept", "est", "e.g", "i.e", "a.m", "p.m", "u.s", "u.k",
})
# fmt: on
_BOUNDARY = re.compile(r"[.!?\u2026]+[\"'\u201d\u2019)\]]*\s+")
_OPENERS = "\"'\u201c\u2018([\u00bf\u00a1"
_PARAGRAPH = re.compile(r"\n\s*\n")
_SOFT_BREAK = re.compile(r"[,;:\u2014\u2013\u3001\uff0c\uff1b\uff1a-]|[^\S\n]*\n")  # right after a word
_UNSPACED_SOFT_BREAK = re.compile(_SOFT_BREAK.pattern + r"|\s")


def _token_before(text: str, end: int) -> str:
    start = end
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    return text[start:end].lstrip(_OPENERS)


def _ends_sentence(text: str, match: re.Match[str]) -> bool:
    following = text[match.end() : match.end() + 4].lstrip(_OPENERS)
    if not following or not (following[0].isupper() or following[0].isdigit()):
        return False
    if text[match.start()] != ".":
        return True
    token = _token_before(text, match.start())
    if token.casefold() in ABBREVIATIONS:
        return False
    return not (len(token) == 1 and token.isupper())  # an initial: J. R. R. Tolkien


def _paragraphs(text: str) -> list[tuple[int, int]]:
    bounds, start = [], 0
    for separator in _PARAGRAPH.finditer(text):
        bounds.append((start, separator.start()))
        start = separator.end()
    bounds.append((start, len(text)))
    return bounds


def sentence_spans(text: str, locale: str | None = None) -> list[tuple[int, int]]:
    """[start, end) of each sentence of `text`, in order, before any merging or bounding: by the rules above,
    or by ICU's for `locale` (a language written without spaces, `unspaced_locale`)."""
    spans = []
    for start, paragraph_end in _paragraphs(text):
        if locale is not None:
            for end in icu_sentence_ends(text, start, paragraph_end, locale):
                spans.append((start, _rstrip(text, start, end)))
                start = end
            continue
        for match in _BOUNDARY.finditer(text, start, paragraph_end):
            if _ends_sentence(text, match):
                spans.append((start, _rstrip(text, start, match.end())))
                start = match.end()
        spans.append((start, _rstrip(text, start, paragraph_end)))
    return [(s, e) for s, e in spans if WORD_PATTERN.search(text, s, e)]


class _Words:
    """The words of a chapter (`word_spans`), found once: any span's words by bisection."""

    def __init__(self, text: str) -> None:
        self.spans = word_spans(text)
        self.starts = [start for start, _ in self.spans]

    def between(self, start: int, end: int) -> tuple[int, int]:
        """Indexes [first, last) of the words that start in [start, end)."""
        return bisect_left(self.starts, start), bisect_left(self.starts, end)

    def count(self, start: int, end: int) -> int:
        first, last = self.between(start, end)
        return last - first


def _merge_short(words: _Words, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    pending: int | None = None  # start of short fragments waiting for the next sentence
    for start, end in spans:
        start = start if pending is None else pending
        if words.count(start, end) < MIN_SENTENCE_WORDS:
            pending = start
            continue
        merged.append((start, end))
        pending = None
    if pending is not None:
        if merged:
            merged[-1] = (merged[-1][0], spans[-1][1])
        else:
            merged.append((pending, spans[-1][1]))
    return merged


def _bounded(text: str, words: _Words, start: int, end: int, soft_break: re.Pattern[str]) -> list[tuple[int, int]]:
    """Cut [start, end) into even windows of at most MAX_SENTENCE_WORDS words, at soft breaks if near."""
    first, last = words.between(start, end)
    if last - first <= MAX_SENTENCE_WORDS:
        return [(start, end)]
    spans = words.spans[first:last]
    pieces = math.ceil(len(spans) / MAX_SENTENCE_WORDS)
    size = len(spans) / pieces
    cuts: list[int] = []  # index of the first word of each window after the first
    for k in range(1, pieces):
        even = round(k * size)
        low = max(
            even - _SOFT_CUT_REACH,
            (cuts[-1] if cuts else 0) + 1,
            len(spans) - (pieces - k) * MAX_SENTENCE_WORDS,
        )
        high = min(even + _SOFT_CUT_REACH, (cuts[-1] if cuts else 0) + MAX_SENTENCE_WORDS)
        soft = [i for i in range(low, high + 1) if soft_break.match(text, spans[i - 1][1], spans[i][0])]
        cuts.append(min(soft, key=lambda i: (abs(i - even), i)) if soft else min(max(even, low), high))
    bounds = [start] + [spans[i][0] for i in cuts] + [end]
    return [(bounds[i], _rstrip(text, bounds[i], bounds[i + 1])) for i in range(len(bounds) - 1)]


def _rstrip(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def segment_chapter(chapter: Chapter, locale: str | None = None) -> list[Sentence]:
    """The sentences of one chapter, with offsets into its text and, for PDFs, their pages; `locale`: ICU's
    sentence rules for a language written without spaces (`unspaced_locale`), None for the rules above."""
    text = chapter.text
    words = _Words(text)
    soft_break = _SOFT_BREAK if locale is None else _UNSPACED_SOFT_BREAK
    spans = [piece for s, e in _merge_short(words, sentence_spans(text, locale))
             for piece in _bounded(text, words, s, e, soft_break)]
    sentences = []
    for start, end in spans:
        sentences.append(
            Sentence(
                text=" ".join(text[start:end].split()),
                chapter_index=chapter.index,
                start=start,
                end=end,
                word_count=words.count(start, end),
                page_start=chapter.page_at(start),
                page_end=chapter.page_at(end - 1),
            )
        )
    return sentences


def segment(book: ExtractedBook, language: str | None = None) -> list[Sentence]:
    """Every sentence of the book in reading order; the embedder gets their texts in this order. `language`:
    the book's as its library records it (Calibre's); the file's own when None, else detected from the text."""
    locale = unspaced_locale(language or book.language, _opening(book))
    return [sentence for chapter in book.chapters for sentence in segment_chapter(chapter, locale)]


def _opening(book: ExtractedBook) -> str:
    """The book's first DETECTION_SAMPLE_CHARS characters: what its language is detected from when it names none."""
    parts, size = [], 0
    for chapter in book.chapters:
        if size >= DETECTION_SAMPLE_CHARS:
            break
        parts.append(chapter.text[: DETECTION_SAMPLE_CHARS - size])
        size += len(parts[-1])
    return "\n".join(parts)


def sentence_texts(sentences: list[Sentence]) -> list[str]:
    """The texts to embed, in reading order: their neighbour similarities feed `chunk_book`."""
    return [sentence.text for sentence in sentences]
