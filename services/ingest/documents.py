"""The typed values passed between the ingest stages: extract -> segment -> chunk.

Every stage takes and returns these frozen dataclasses, never dicts, so the servicer
can map them 1:1 onto the messages of `alexandria/v1/ingest.proto`. The one word
rule of the project lives here too, because every `word_count` below is defined by it.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from typing import Any

from alexandria.book_formats import BookFormat
from alexandria.contract import CHUNK_THRESHOLD, MAX_CHUNK_SIZE, MIN_CHUNK_SIZE
from alexandria.locator import ChunkLocator
from alexandria.store.schema import Level
from services.ingest.scripts import UNSPACED_LETTER, UNSPACED_RUN, dictionary_words

# Runs of letters/digits; an inner apostrophe (straight or curly) keeps a word together
# ("don't", "o'er"), a hyphen splits ("well-known" is two). The corpus manifest counts this way.
WORD_PATTERN = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")

def window_header(title: str, chapter: str) -> str:
    """What every window of a passage (or a reader's highlight) starts with: the book's title and its chapter."""
    return f"{title}, {chapter}\n" if chapter else f"{title}\n"


def iter_words(text: str, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int]]:
    """[start, end) of each word of text[start:end] by the project's one word rule: WORD_PATTERN's runs, except
    that letters of a script written without spaces (Chinese, Japanese, Thai...) are cut into the words of
    ICU's dictionary (`services.ingest.scripts`), so that 吾輩は猫である is five words (吾輩 は 猫 で ある), not one."""
    end = len(text) if end is None else end
    position = start
    for run in UNSPACED_RUN.finditer(text, start, end):
        yield from (match.span() for match in WORD_PATTERN.finditer(text, position, run.start()))
        yield from dictionary_words(text, run.start(), run.end())
        position = run.end()
    yield from (match.span() for match in WORD_PATTERN.finditer(text, position, end))


def word_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Every word of text[start:end] (`iter_words`), at once."""
    end = len(text) if end is None else end
    if not UNSPACED_LETTER.search(text, start, end):  # most books: no dictionary to consult
        return [match.span() for match in WORD_PATTERN.finditer(text, start, end)]
    return list(iter_words(text, start, end))


def count_words(text: str) -> int:
    """Number of words in `text` by the project's one word rule (see `iter_words`)."""
    if not UNSPACED_LETTER.search(text):
        return sum(1 for _ in WORD_PATTERN.finditer(text))
    return sum(1 for _ in iter_words(text))


FRONT_MATTER_TITLE = "Front matter"


@dataclass(frozen=True)
class PageSpan:
    """Characters [start, end) of a chapter's text that were printed on `page` (1-based)."""

    start: int
    end: int
    page: int


@dataclass(frozen=True)
class Chapter:
    """One entry of the book's table of contents (or detected heading), with the text it owns.

    A chapter owns the text from its own start to the start of the next entry of any
    level, so the chapters of a book partition its text and nothing is counted twice;
    an entry whose subsections follow at once (ACT I. > Scene I.) owns little or no
    text. The whole section of an entry, subsections included, is chapters
    `[index, section_end)`.
    """

    index: int
    title: str
    level: int  # 1 = top level of this book's table of contents
    text: str
    path: tuple[str, ...]  # titles from the top level down to this one
    section_end: int
    page_spans: tuple[PageSpan, ...] = ()  # PDFs only
    front_matter: bool = False

    @property
    def display_title(self) -> str:
        """What a citation shows: the title with its enclosing entries (`ACT I. > Scene II. ...`)."""
        return " > ".join(self.path)

    @cached_property
    def word_count(self) -> int:
        return count_words(self.text)

    def page_at(self, offset: int) -> int | None:
        """The PDF page (1-based) that holds character `offset` of the text; None for books without pages."""
        if not self.page_spans:
            return None
        starts = [span.start for span in self.page_spans]
        return self.page_spans[max(0, bisect_right(starts, offset) - 1)].page


@dataclass(frozen=True)
class BookText:
    """The whole book twice: as ingest reads it, and as a reader's viewer shows it, with the footnote markers that
    ingest leaves out ("truth¹ universally"). Words found once in both are found once by the viewer, at the same
    place: a marker can only part words that would otherwise be found."""

    read: str
    shown: str


@dataclass(frozen=True)
class ExtractedBook:
    """A book as extracted from its file: metadata from the file itself, chapters in reading order."""

    path: str
    format: BookFormat
    title: str | None
    authors: tuple[str, ...]
    language: str | None
    chapters: tuple[Chapter, ...]
    chapter_source: str  # "toc", "headings" or "sections": where the chapter boundaries came from
    ocr_pages: frozenset[int] = frozenset()  # pages (1-based) whose text was read by OCR
    # Tesseract's name of the book's language when its data was not installed: OCR read the pages as English.
    ocr_missing_language: str | None = None
    # Markup formats: every paragraph and heading, as read and as shown; None where the chapters' text is all there is.
    paragraphs: BookText | None = None

    @property
    def viewer_text(self) -> BookText:
        """The text a viewer's search of the book searches (`paragraphs`, else the chapters' text)."""
        if self.paragraphs is not None:
            return self.paragraphs
        text = "\n".join(chapter.text for chapter in self.chapters)
        return BookText(text, text)

    @property
    def author(self) -> str | None:
        """Authors joined as the payload stores them (`A & B`), None when the file names none."""
        return " & ".join(self.authors) if self.authors else None

    @property
    def word_count(self) -> int:
        return sum(chapter.word_count for chapter in self.chapters)


@dataclass(frozen=True)
class Sentence:
    """The unit of embedding: a sentence (or a bounded word window) of one chapter."""

    text: str  # whitespace collapsed, as sent to the embedder
    chapter_index: int
    start: int  # [start, end) in the chapter's text
    end: int
    word_count: int
    page_start: int | None = None
    page_end: int | None = None


@dataclass(frozen=True)
class ChunkingParams:
    """Semantic chunking parameters: a cosine similarity and two sizes in words."""

    threshold: float = CHUNK_THRESHOLD.default
    min_chunk_size: int = int(MIN_CHUNK_SIZE.default)
    max_chunk_size: int = int(MAX_CHUNK_SIZE.default)

    def to_stored(self, hierarchical: bool) -> dict[str, float | int | bool]:
        """How a book's points record the chunking it was ingested with (BookRecord.chunking)."""
        return {"threshold": self.threshold, "min_chunk_size": self.min_chunk_size,
                "max_chunk_size": self.max_chunk_size, "hierarchical": hierarchical}

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> tuple[ChunkingParams, bool]:
        """The parameters and hierarchy `to_stored` recorded (the defaults for what a book did not record)."""
        default = cls()
        return cls(float(stored.get("threshold", default.threshold)),
                   int(stored.get("min_chunk_size", default.min_chunk_size)),
                   int(stored.get("max_chunk_size", default.max_chunk_size))), bool(stored.get("hierarchical", True))


class BreakKind(StrEnum):
    """Why a chunk starts where it does."""

    CHAPTER = "chapter"  # first chunk of a chapter: chunks never cross chapters
    SEMANTIC = "semantic"  # similarity to the previous sentence fell below the threshold
    FORCED = "forced"  # the chunk would have grown past max_chunk_size


@dataclass(frozen=True)
class Chunk:
    """A semantic chunk: a child of its chapter's parent, or a flat chunk."""

    text: str
    word_count: int
    locator: ChunkLocator
    level: Level  # CHILD or FLAT
    sequence_index: int  # among the chunks of its chapter
    sibling_count: int
    parent_index: int | None  # index into ChunkedBook.parents; None for flat chunks
    break_kind: BreakKind
    first_sentence: int  # sentences [first_sentence, end_sentence) of the book
    end_sentence: int


@dataclass(frozen=True)
class ParentChunk:
    """A whole chapter. Its text is stored whole; its vector comes from `embed_text` only."""

    text: str
    word_count: int
    locator: ChunkLocator
    embed_text: str  # title path + the opening words: a part that fits the model's window
    child_count: int


@dataclass(frozen=True)
class ChunkedBook:
    params: ChunkingParams
    hierarchical: bool
    chunks: tuple[Chunk, ...]
    parents: tuple[ParentChunk, ...] = ()


@dataclass(frozen=True)
class SampleBreak:
    sentence_index: int  # the first sentence of the new chunk
    similarity: float  # to the sentence before it
    before: str  # end of the previous chunk
    after: str  # start of the next chunk


@dataclass(frozen=True)
class ThresholdComparison:
    threshold: float
    chunks: int
    avg_words: float
    coherence: float  # mean neighbour similarity inside chunks; 0.0 when no chunk has two sentences
    semantic_breaks: int
    forced_breaks: int
    chapter_breaks: int
    sample_breaks: tuple[SampleBreak, ...]


@dataclass(frozen=True)
class SimilarityDistribution:
    min: float
    max: float
    mean: float
    median: float


@dataclass(frozen=True)
class ThresholdReport:
    """What compare_chunking returns (proto `CompareChunkingResult` without the book's metadata)."""

    total_sentences: int
    total_words: int
    similarity_distribution: SimilarityDistribution
    comparisons: tuple[ThresholdComparison, ...]
    recommendation: float
    recommendation_reason: str


@dataclass(frozen=True)
class ChunkStats:
    total_chunks: int
    avg_words: float
    min_words: int
    max_words: int


@dataclass(frozen=True)
class ChunkSample:
    chunk_num: int  # 1-based
    words: int
    text: str
    locator: ChunkLocator


@dataclass(frozen=True)
class ChunkingPreview:
    """What test_chunking returns (proto `TestChunkingResult` without the book's metadata)."""

    stats: ChunkStats
    samples: tuple[ChunkSample, ...]
