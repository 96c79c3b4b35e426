"""TXT, Markdown and HTML files, and the heading-line rule that PDFs without an outline share.

Plain text has no markup, so its chapters come from lines that look like headings
(`ACT I.`, `Scene II. A Street.`, `CHAPTER 1`, `Book Two`). Markdown is rendered to
HTML (markdown-it) and read like HTML, so both get the same paragraphs and headings.
A Markdown or HTML file's first level-1 heading is its title; when it is the only
one it counts as front matter text, not as a chapter.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from markdown_it import MarkdownIt

from alexandria.book_formats import BookFormat
from alexandria.errors import InvalidArgument
from services.ingest.documents import ExtractedBook
from services.ingest.extract.encoding import decode_text, looks_binary
from services.ingest.extract.html import HtmlDocument, parse_html
from services.ingest.extract.structure import Block, book_text, choose_chapters, clean_metadata, split_authors

# Keyword, then a number (digits, Roman numerals or a spelled-out one), then an optional title.
_HEADING_LINE = re.compile(
    r"^(?P<kind>book|part|volume|act|chapter|scene)\s+"
    r"(?:\d{1,4}|[ivxlcdm]{1,8}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\b"
    r"(?:[.:]|\s*$|[.:]?\s+\S.*)$",
    re.IGNORECASE,
)
_HEADING_RANK = {"book": 1, "part": 1, "volume": 1, "act": 1, "chapter": 2, "scene": 2}
_MAX_HEADING_CHARS = 120
_BLANK_LINES = re.compile(r"\n[ \t]*\n+")


def heading_line_level(text: str) -> int | None:
    """1 for a BOOK/PART/VOLUME/ACT line, 2 for a CHAPTER/SCENE line, None for anything else."""
    line = text.strip()
    if "\n" in line or len(line) > _MAX_HEADING_CHARS:
        return None
    match = _HEADING_LINE.match(line)
    return _HEADING_RANK[match.group("kind").lower()] if match else None


def _file_bytes(path: Path, fmt: BookFormat) -> bytes:
    data = path.read_bytes()
    if looks_binary(data):
        raise InvalidArgument(
            f"{path.name} is not a {fmt} file: it contains binary data. Check that it is the file you meant."
        )
    return data


def _no_text(path: Path) -> InvalidArgument:
    return InvalidArgument(
        f"{path.name} holds no text (only whitespace or markup): there is nothing to index."
    )


def _text_of(path: Path, fmt: BookFormat) -> str:
    text = decode_text(_file_bytes(path, fmt)).replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise _no_text(path)
    return text


def read_txt(path: Path) -> ExtractedBook:
    """Paragraphs between blank lines; chapters from heading-like lines when there are any."""
    text = _text_of(path, BookFormat.TXT)
    blocks = []
    for paragraph in _BLANK_LINES.split(text):
        lines = [line.strip() for line in paragraph.split("\n") if line.strip()]
        if lines:
            joined = "\n".join(lines)
            blocks.append(Block(joined, heading_level=heading_line_level(joined)))
    chapters, source = choose_chapters(blocks, (), heading_max_level=2)
    return ExtractedBook(str(path), BookFormat.TXT, None, (), None, chapters, source)


def _title_heading(document: HtmlDocument) -> tuple[str | None, int]:
    """The document's title from its first <h1>, and the deepest heading level that makes chapters.

    A lone <h1> that opens the document is the title, not a chapter: it becomes front
    matter text and the chapters come from the two levels below it.
    """
    level_one = [i for i, block in enumerate(document.blocks) if block.heading_level == 1]
    if not level_one:
        return None, 2
    title = clean_metadata(document.blocks[level_one[0]].text)
    if len(level_one) == 1 and level_one[0] == 0:
        document.blocks[0] = dataclasses.replace(document.blocks[0], heading_level=None)
        return title, 3
    return title, 2


def _read_markup(path: Path, fmt: BookFormat, document: HtmlDocument) -> ExtractedBook:
    if not document.blocks:
        raise _no_text(path)
    heading_title, max_level = _title_heading(document)
    title = heading_title if fmt is BookFormat.MD else clean_metadata(document.title) or heading_title
    authors = split_authors(document.meta.get("author"))
    chapters, source = choose_chapters(document.blocks, (), heading_max_level=max_level)
    return ExtractedBook(str(path), fmt, title, authors, clean_metadata(document.language), chapters, source,
                         paragraphs=book_text(document.blocks))


def read_markdown(path: Path) -> ExtractedBook:
    """Markdown rendered to HTML (CommonMark, hard breaks kept) and read as HTML."""
    rendered = MarkdownIt("commonmark").render(_text_of(path, BookFormat.MD))
    return _read_markup(path, BookFormat.MD, parse_html(rendered.encode("utf-8")))


def read_html(path: Path) -> ExtractedBook:
    """An HTML file: title from <title> (else its first <h1>), author from <meta name="author">."""
    return _read_markup(path, BookFormat.HTML, parse_html(_file_bytes(path, BookFormat.HTML)))
