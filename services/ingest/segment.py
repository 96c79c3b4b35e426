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
"""

from __future__ import annotations

import math
import re

from services.ingest.documents import WORD_PATTERN, Chapter, ExtractedBook, Sentence, count_words

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
_SOFT_BREAK = re.compile(r"[,;:\u2014\u2013-]|[^\S\n]*\n")  # matched right after a word


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


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) of each sentence of `text`, in order, before any merging or bounding."""
    spans = []
    for start, paragraph_end in _paragraphs(text):
        for match in _BOUNDARY.finditer(text, start, paragraph_end):
            if _ends_sentence(text, match):
                spans.append((start, _rstrip(text, start, match.end())))
                start = match.end()
        spans.append((start, _rstrip(text, start, paragraph_end)))
    return [(s, e) for s, e in spans if WORD_PATTERN.search(text, s, e)]


def _merge_short(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    pending: int | None = None  # start of short fragments waiting for the next sentence
    for start, end in spans:
        start = start if pending is None else pending
        if count_words(text[start:end]) < MIN_SENTENCE_WORDS:
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


def _bounded(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Cut [start, end) into even windows of at most MAX_SENTENCE_WORDS words, at soft breaks if near."""
    words = list(WORD_PATTERN.finditer(text, start, end))
    if len(words) <= MAX_SENTENCE_WORDS:
        return [(start, end)]
    pieces = math.ceil(len(words) / MAX_SENTENCE_WORDS)
    size = len(words) / pieces
    cuts: list[int] = []  # index of the first word of each window after the first
    for k in range(1, pieces):
        even = round(k * size)
        low = max(
            even - _SOFT_CUT_REACH,
            (cuts[-1] if cuts else 0) + 1,
            len(words) - (pieces - k) * MAX_SENTENCE_WORDS,
        )
        high = min(even + _SOFT_CUT_REACH, (cuts[-1] if cuts else 0) + MAX_SENTENCE_WORDS)
        soft = [
            i for i in range(low, high + 1) if _SOFT_BREAK.match(text, words[i - 1].end(), words[i].start())
        ]
        cuts.append(min(soft, key=lambda i: (abs(i - even), i)) if soft else min(max(even, low), high))
    bounds = [start] + [words[i].start() for i in cuts] + [end]
    return [(bounds[i], _rstrip(text, bounds[i], bounds[i + 1])) for i in range(len(bounds) - 1)]


def _rstrip(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def segment_chapter(chapter: Chapter) -> list[Sentence]:
    """The sentences of one chapter, with offsets into its text and, for PDFs, their pages."""
    text = chapter.text
    spans = [piece for s, e in _merge_short(text, sentence_spans(text)) for piece in _bounded(text, s, e)]
    sentences = []
    for start, end in spans:
        content = text[start:end]
        sentences.append(
            Sentence(
                text=" ".join(content.split()),
                chapter_index=chapter.index,
                start=start,
                end=end,
                word_count=count_words(content),
                page_start=chapter.page_at(start),
                page_end=chapter.page_at(end - 1),
            )
        )
    return sentences


def segment(book: ExtractedBook) -> list[Sentence]:
    """Every sentence of the book in reading order; the embedder gets their texts in this order."""
    return [sentence for chapter in book.chapters for sentence in segment_chapter(chapter)]


def sentence_texts(sentences: list[Sentence]) -> list[str]:
    """The texts to embed, in reading order: their neighbour similarities feed `chunk_book`."""
    return [sentence.text for sentence in sentences]
