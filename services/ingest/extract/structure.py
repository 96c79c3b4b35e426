"""From a format's paragraphs and table of contents to the book's chapters.

Every format reader turns its file into the same thing: a list of `Block`s (the
paragraphs in reading order, with a page for PDFs and a level for headings) and,
when the file has one, a table of contents whose entries point at blocks. This
module does the rest once for all formats: chapters from the TOC when it is
usable, else from the headings, else fixed-size sections; front matter before the
first entry kept as its own chapter; nothing dropped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from services.ingest.documents import FRONT_MATTER_TITLE, BookText, Chapter, PageSpan, count_words

PARAGRAPH_BREAK = "\n\n"
# Books with neither TOC nor headings are cut at paragraph ends near this many words:
# long enough to be a meaningful parent, short enough that its opening represents it.
SECTION_WORDS = 2500


@dataclass
class Block:
    """A paragraph of the book in reading order."""

    text: str
    page: int | None = None  # 1-based, PDFs only
    heading_level: int | None = None  # 1 for <h1> or `#`, 2 for <h2> or `##`, ...
    # What joins it to the previous block: a paragraph break, or " " / "" where a
    # paragraph runs on across a page break (with "" a line-end hyphen was removed).
    separator: str = PARAGRAPH_BREAK
    # The paragraph as a reader's viewer shows it, where that differs from `text`: with its footnote markers.
    reader_text: str | None = None


def book_text(blocks: Sequence[Block]) -> BookText:
    """Every paragraph, headings included (the chapters' text leaves out a heading that repeats its title), as read
    and as shown."""
    return BookText(PARAGRAPH_BREAK.join(block.text for block in blocks),
                    PARAGRAPH_BREAK.join(block.reader_text or block.text for block in blocks))


@dataclass(frozen=True)
class TocEntry:
    """A table of contents entry: its title, depth (1 = top) and the first block it owns."""

    title: str
    level: int
    block: int


def normalise_space(text: str) -> str:
    """Collapse every run of whitespace to one space and strip the ends."""
    return " ".join(text.split())


def _same_heading(block: Block, title: str) -> bool:
    return normalise_space(block.text).casefold() == normalise_space(title).casefold()


def heading_entries(blocks: Sequence[Block], max_level: int) -> list[TocEntry]:
    """TOC entries from heading blocks of level <= max_level, levels renumbered from 1 by rank.

    Ranking keeps a book whose chapters are <h2> under no <h1> at level 1.
    """
    found = [
        (i, block.heading_level, block)
        for i, block in enumerate(blocks)
        if block.heading_level is not None and block.heading_level <= max_level and count_words(block.text)
    ]
    ranks = {level: rank for rank, level in enumerate(sorted({level for _, level, _ in found}), start=1)}
    return [TocEntry(normalise_space(b.text), ranks[level], i) for i, level, b in found]


def section_entries(blocks: Sequence[Block]) -> list[TocEntry]:
    """Fixed-size sections, cut at the first paragraph end after SECTION_WORDS words."""
    entries = [TocEntry("Section 1", 1, 0)] if blocks else []
    words = 0
    for i, block in enumerate(blocks):
        if words >= SECTION_WORDS and block.separator == PARAGRAPH_BREAK:
            entries.append(TocEntry(f"Section {len(entries) + 1}", 1, i))
            words = 0
        words += count_words(block.text)
    return entries


@dataclass(frozen=True)
class _Text:
    text: str
    page_spans: tuple[PageSpan, ...]


def _join(blocks: Sequence[Block]) -> _Text:
    parts: list[str] = []
    spans: list[PageSpan] = []
    offset = 0
    for block in blocks:
        if parts:
            parts.append(block.separator)
            offset += len(block.separator)
        start, offset = offset, offset + len(block.text)
        parts.append(block.text)
        if block.page is None:
            continue
        if spans and spans[-1].page == block.page:
            spans[-1] = PageSpan(spans[-1].start, offset, block.page)
        else:
            spans.append(PageSpan(start, offset, block.page))
    return _Text("".join(parts), tuple(spans))


def choose_chapters(
    blocks: Sequence[Block], toc: Sequence[TocEntry], heading_max_level: int
) -> tuple[tuple[Chapter, ...], str]:
    """Chapters from a usable TOC, else from headings, else fixed-size sections.

    A TOC is usable when its entries start at two places at least: one whose entries
    all point at the start of the book divides nothing, and headings do better.
    Returns the chapters and which of "toc", "headings", "sections" made them.
    """
    if len({entry.block for entry in toc}) > 1:
        return build_chapters(blocks, toc), "toc"
    if headings := heading_entries(blocks, heading_max_level):
        return build_chapters(blocks, headings), "headings"
    if toc:
        return build_chapters(blocks, toc), "toc"
    return build_chapters(blocks, section_entries(blocks)), "sections"


@dataclass(frozen=True)
class _Piece:
    title: str
    level: int
    blocks: list[Block]
    front_matter: bool = False
    heading_page: int | None = None  # page of a heading left out of the text: where the chapter starts


def build_chapters(blocks: Sequence[Block], entries: Sequence[TocEntry]) -> tuple[Chapter, ...]:
    """Chapters owning the blocks from each entry to the next; the blocks before the first are front matter.

    An entry's heading block is left out of its text when it only repeats the title,
    since the title travels with every chunk anyway; its page still counts as the
    chapter's first (a zero-length page span), so an ACT I. whose scenes own all the
    text still knows where it starts.
    """
    ordered = sorted(entries, key=lambda e: e.block)  # stable: ties keep the TOC's order
    starts = [e.block for e in ordered] + [len(blocks)]
    pieces: list[_Piece] = []
    front = list(blocks[: starts[0]])
    if any(count_words(b.text) for b in front):
        pieces.append(_Piece(FRONT_MATTER_TITLE, 1, front, front_matter=True))
    for entry, end in zip(ordered, starts[1:], strict=True):
        owned = list(blocks[entry.block : end])
        if owned and _same_heading(owned[0], entry.title):
            pieces.append(_Piece(entry.title, entry.level, owned[1:], heading_page=owned[0].page))
        else:
            pieces.append(_Piece(entry.title, entry.level, owned))

    chapters: list[Chapter] = []
    ancestors: list[_Piece] = []  # the open entries above the current one
    for index, piece in enumerate(pieces):
        while ancestors and ancestors[-1].level >= piece.level:
            ancestors.pop()
        path = tuple(a.title for a in ancestors) + (piece.title,)
        ancestors.append(piece)
        section_end = next(
            (j for j in range(index + 1, len(pieces)) if pieces[j].level <= piece.level), len(pieces)
        )
        joined = _join(piece.blocks)
        spans = joined.page_spans
        if piece.heading_page is not None and (not spans or spans[0].page != piece.heading_page):
            spans = (PageSpan(0, 0, piece.heading_page), *spans)
        chapters.append(
            Chapter(
                index, piece.title, piece.level, joined.text, path, section_end, spans, piece.front_matter
            )
        )
    return tuple(chapters)


def clean_metadata(raw: str | None) -> str | None:
    """A metadata value with its whitespace normalised; None when nothing is left."""
    if raw is None:
        return None
    value = normalise_space(raw)
    return value or None


def split_authors(raw: str | None) -> tuple[str, ...]:
    """`A & B` or `A; B` (as calibre and most PDF producers write several authors) into a tuple."""
    value = clean_metadata(raw)
    if value is None:
        return ()
    return tuple(name for name in re.split(r"\s*[&;]\s*", value) if name)
