"""PDF with pymupdf 1.28: text per page, chapters from the outline, page numbers kept.

- Running headers and footers (a printed page number, a book title on every page)
  are blocks in the top or bottom band of the page whose text, digits aside, comes
  back on many pages; they are dropped so they never land inside a sentence.
- A line that ends in `letter-` before a line starting in lower case is a word
  broken by hyphenation when the document itself shows the word whole elsewhere, or
  never shows the hyphenated pair as a compound; it is joined without the hyphen.
  `well-known` split at its own hyphen stays `well-known` when the book writes it so.
- A paragraph that runs on across a page break (no final punctuation, next page
  starting in lower case) is joined with a space, so its sentence stays one.
- An outline entry starts at its target point on its page; it owns the text up to
  the next entry of any level, and `Chapter.section_end` gives its whole section.
- A scanned page (an image, no text layer) is read by OCR (ocr.py) and its blocks join the
  others: a book may mix both, and the pages read by OCR are listed in `ExtractedBook.ocr_pages`.
PyMuPDF must not run on two threads at once (its MuPDF context is shared), so all of
its work here holds the one lock (alexandria.pdf_pages): callers may run `read_pdf` in worker
threads freely. Worker processes that OCR many pages have MuPDFs of their own: the lock is released
while they run, so the catalog's previews in the same process do not wait for a whole book's OCR.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pymupdf

from alexandria.book_formats import BookFormat
from alexandria.errors import FailedPrecondition, InvalidArgument
from alexandria.pdf_pages import MUPDF_LOCK, is_scanned
from services.ingest.documents import WORD_PATTERN, ExtractedBook
from services.ingest.extract.ocr import (
    INSTALL_HINT,
    NO_OPTIONS,
    OCR_DPI,
    PARALLEL_FROM_PAGES,
    OcrOptions,
    in_worker_processes,
    ocr_language,
    ocr_textpage,
    tessdata_path,
    tesseract_language,
)
from services.ingest.extract.ocr_cache import CachedBook
from services.ingest.extract.plain import heading_line_level
from services.ingest.extract.structure import (
    PARAGRAPH_BREAK,
    Block,
    TocEntry,
    choose_chapters,
    clean_metadata,
    normalise_space,
    split_authors,
)
from services.ingest.scripts import joins_without_space

# Ligatures expanded ("ﬁ" -> "fi") so that words match what people type.
_TEXT_FLAGS = pymupdf.TEXTFLAGS_BLOCKS & ~pymupdf.TEXT_PRESERVE_LIGATURES
_BAND = 0.08  # top and bottom 8% of the page: where running headers and footers sit
_RUNNING_MIN_PAGES = 3
_RUNNING_SHARE = 0.3  # a band text on at least this share of the pages repeats, i.e. it is not content
_DIGITS = re.compile(r"\d+")
_ROMAN = re.compile(r"^[ivxlcdm]+$", re.IGNORECASE)
_HYPHEN_BREAK = re.compile(r"([^\W\d_]+)-$")
_WORD_START = re.compile(r"^([^\W\d_]+)")
_COMPOUND = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)+")
_SENTENCE_END = (".", "!", "?", ":", ";", '"', "'", "\u201d", "\u2019", ")", "]")
_TARGET_SLACK = 3.0  # points: an outline target a little below the top of its heading line still hits it


@dataclass(frozen=True)
class _RawBlock:
    page: int  # 1-based
    y0: float
    lines: tuple[str, ...]
    in_band: bool


def _open(path: Path) -> pymupdf.Document:
    try:
        document = pymupdf.open(path, filetype="pdf")
    except (pymupdf.FileDataError, pymupdf.EmptyFileError, RuntimeError) as exc:
        raise InvalidArgument(
            f"{path.name} is a damaged PDF ({exc}); it may be truncated or corrupt. "
            "Download or export it again."
        ) from None
    if document.needs_pass:
        document.close()
        raise FailedPrecondition(
            f"{path.name} is an encrypted PDF that needs a password; save an unprotected copy "
            "(e.g. print it to PDF after opening it with its password) and ingest that."
        )
    if document.page_count == 0:
        document.close()
        raise InvalidArgument(f"{path.name} is a PDF with no pages; there is nothing to index.")
    return document


def _band_key(text: str) -> str:
    """Text of a header/footer block with its numbers blanked, so `Page 3` and `Page 4` compare equal."""
    flat = normalise_space(text).casefold()
    return "#" if _ROMAN.match(flat) else _DIGITS.sub("#", flat)


def _page_blocks(page: pymupdf.Page, textpage: pymupdf.TextPage | None = None) -> list[_RawBlock]:
    blocks = []
    height = page.rect.height
    for x0, y0, x1, y1, text, _number, kind in page.get_text("blocks", flags=_TEXT_FLAGS, textpage=textpage):
        lines = tuple(line.strip() for line in text.split("\n") if line.strip())
        if kind != 0 or not lines:
            continue
        in_band = y1 <= height * _BAND or y0 >= height * (1 - _BAND)
        blocks.append(_RawBlock(page.number + 1, y0, lines, in_band))
    return blocks


@dataclass(frozen=True)
class _OcrPlan:
    """Scanned pages to read by OCR, in which language, with which language data; those read before (`kept`, by
    0-based page number) come from the cache and are not read again."""

    pages: list[int]  # 0-based page numbers, those kept aside
    language: str
    tessdata: Path
    missing_language: str | None = None  # the book's language, read as English: its data is not installed
    kept: dict[int, list[_RawBlock]] = field(default_factory=dict)
    cached: CachedBook | None = None

    @property
    def in_workers(self) -> bool:
        return len(self.pages) >= PARALLEL_FROM_PAGES

    def read(self, number: int, blocks: list[_RawBlock], done: int, ocr: OcrOptions) -> None:
        """One more page read by OCR (the `done`th of `pages`): kept, and told as progress over every scanned page."""
        if self.cached is not None:
            self.cached.keep(number, [[block.y0, list(block.lines), block.in_band] for block in blocks])
        ocr.progress(len(self.kept) + done, len(self.kept) + len(self.pages))


def _text_blocks(document: pymupdf.Document) -> tuple[list[list[_RawBlock]], list[int]]:
    """Every page's blocks from its text layer, and the (0-based) numbers of the scanned pages."""
    by_page = [_page_blocks(document[number]) for number in range(document.page_count)]
    scanned = [
        number for number, blocks in enumerate(by_page)
        if is_scanned(document[number], sum(len(line.split()) for block in blocks for line in block.lines))
    ]
    return by_page, scanned


def _ocr_plan(document: pymupdf.Document, path: Path, scanned: list[int], ocr: OcrOptions) -> _OcrPlan:
    """How to read the scanned pages; refused when OCR is not available here or they are over the limit."""
    tessdata = tessdata_path(ocr.tessdata)
    if tessdata is None:
        raise FailedPrecondition(
            f"{path.name} has {len(scanned)} scanned page(s) (images with no text layer) and OCR is not "
            f"available here: {INSTALL_HINT}."
        )
    if len(scanned) > ocr.max_pages:
        raise FailedPrecondition(
            f"{path.name} has {len(scanned)} scanned pages to read by OCR, over the limit of {ocr.max_pages} "
            "(INGEST_OCR_MAX_PAGES); raise it, or OCR the file first (e.g. `ocrmypdf in.pdf out.pdf`)."
        )
    book_language = ocr.language or _language(document)
    language, wanted = ocr_language(book_language, tessdata), tesseract_language(book_language)
    return _OcrPlan(scanned, language, tessdata, wanted if wanted not in (None, language) else None)


def _with_kept_pages(plan: _OcrPlan, path: Path, ocr: OcrOptions) -> _OcrPlan:
    """`plan` less the pages OCR read before (ocr_cache.py), which it then holds as `kept`. Called without the MuPDF
    lock: it reads the whole file for its hash."""
    cached = ocr.cache.book(path, plan.language, plan.tessdata, OCR_DPI) if ocr.cache is not None else None
    if cached is None:
        return plan

    def parse(page: Any) -> list[_RawBlock]:
        if not isinstance(page, list):
            raise TypeError(f"a page is a list of blocks, not {type(page).__name__}")
        return [_RawBlock(0, float(y0), tuple(str(line) for line in lines), bool(in_band))
                for y0, lines, in_band in page]

    kept = {number: [replace(block, page=number + 1) for block in blocks]
            for number, blocks in cached.pages(plan.pages, parse).items()}
    if kept:
        ocr.progress(len(kept), len(plan.pages))
    return replace(plan, pages=[number for number in plan.pages if number not in kept], kept=kept, cached=cached)


def _ocr_here(path: Path, plan: _OcrPlan, ocr: OcrOptions) -> dict[int, list[_RawBlock]]:
    """A few scanned pages read by OCR in this process (worker processes cost a second or so to start)."""
    read: dict[int, list[_RawBlock]] = {}
    if not plan.pages:
        return read
    with MUPDF_LOCK, _open(path) as document:
        for done, number in enumerate(plan.pages, 1):
            page = document[number]
            read[number] = _page_blocks(page, ocr_textpage(page, plan.language, plan.tessdata))
            plan.read(number, read[number], done, ocr)
    return read


def _ocr_in_workers(path: Path, plan: _OcrPlan, ocr: OcrOptions) -> dict[int, list[_RawBlock]]:
    """Many scanned pages read by OCR in worker processes; called without the MuPDF lock."""
    pages = [(str(path), number, plan.language, str(plan.tessdata)) for number in plan.pages]
    return in_worker_processes(_ocr_blocks, pages, lambda number, blocks, done: plan.read(number, blocks, done, ocr))


def _ocr_blocks(path: str, number: int, language: str, tessdata: str) -> tuple[int, list[_RawBlock]]:
    """One page's blocks read by OCR, in a worker process (MuPDF runs one thread at a time in a process)."""
    with pymupdf.open(path, filetype="pdf") as document:
        page = document[number]
        return number, _page_blocks(page, ocr_textpage(page, language, Path(tessdata)))


def _without_running_lines(blocks: list[_RawBlock], page_count: int) -> list[_RawBlock]:
    """Blocks minus running headers/footers: band texts repeated on many pages, and bare page numbers."""
    pages_with: dict[str, set[int]] = {}
    for block in blocks:
        if block.in_band:
            pages_with.setdefault(_band_key(" ".join(block.lines)), set()).add(block.page)
    needed = max(_RUNNING_MIN_PAGES, _RUNNING_SHARE * page_count)

    def running(block: _RawBlock) -> bool:
        text = " ".join(block.lines)
        return block.in_band and (len(pages_with[_band_key(text)]) >= needed or text == str(block.page))

    return [block for block in blocks if not running(block)]


class _Dehyphenator:
    """Decides, from the document's own words, whether `inter-` + `national` is one word."""

    def __init__(self, blocks: list[_RawBlock]) -> None:
        words: set[str] = set()
        compounds: set[str] = set()
        for block in blocks:
            for line in block.lines:
                inner = line.removesuffix("-")
                words.update(w.casefold() for w in WORD_PATTERN.findall(inner))
                compounds.update(c.casefold() for c in _COMPOUND.findall(inner))
        self._words = words
        self._compounds = compounds

    def joins(self, left: str, right: str) -> str | None:
        """What replaces the `-` ending `left` before `right`: "" (a broken word), "-" (a compound).

        None when `left` does not end in a word and one hyphen (`--` is a dash).
        """
        head = _HYPHEN_BREAK.search(left)
        tail = _WORD_START.match(right)
        if head is None or tail is None or left.endswith("--"):
            return None
        if not right[0].islower():
            return "-"  # Jean-/Pierre: hyphenation never splits before a capital
        first, second = head.group(1).casefold(), tail.group(1).casefold()
        if f"{first}-{second}" in self._compounds and first + second not in self._words:
            return "-"
        return ""


def _join_lines(lines: tuple[str, ...], dehyphenate: _Dehyphenator) -> str:
    text = lines[0]
    for line in lines[1:]:
        joined = dehyphenate.joins(text, line)
        if joined is not None:
            text = text[:-1] + joined + line
        else:
            text += ("" if joins_without_space(text, line) else " ") + line
    return text


def _blocks(raw: list[_RawBlock]) -> list[Block]:
    dehyphenate = _Dehyphenator(raw)
    blocks: list[Block] = []
    for block in raw:
        text = _join_lines(block.lines, dehyphenate)
        separator = PARAGRAPH_BREAK
        if blocks and blocks[-1].page != block.page and text[0].islower():  # a paragraph running on
            last = blocks[-1]
            joined = dehyphenate.joins(last.text, text)
            if joined is not None:
                last.text = last.text[:-1] + joined
                separator = ""
            elif not last.text.endswith(_SENTENCE_END):
                separator = " "
        blocks.append(Block(text, block.page, heading_line_level(text), separator))
    return blocks


def _outline(toc: list[list[Any]], raw: list[_RawBlock]) -> list[TocEntry]:
    """Outline entries (`get_toc(simple=False)`) placed on the first block at or below their target point (or
    the next page's first)."""
    first_on_page: dict[int, int] = {}
    for index, block in enumerate(raw):
        first_on_page.setdefault(block.page, index)
    pages = sorted(first_on_page)
    entries = []
    for level, title, page, destination in toc:
        if page < 1 or not normalise_space(title):
            continue
        target = destination.get("to") if isinstance(destination, dict) else None
        top = target.y - _TARGET_SLACK if target is not None else float("-inf")
        at = bisect_left(pages, page)
        start = first_on_page[pages[at]] if at < len(pages) else len(raw)
        found = next((i for i in range(start, len(raw)) if raw[i].page > page or raw[i].y0 >= top), None)
        if found is not None:
            entries.append(TocEntry(normalise_space(title), level, found))
    return entries


def _language(document: pymupdf.Document) -> str | None:
    kind, value = document.xref_get_key(document.pdf_catalog(), "Lang")
    return clean_metadata(value.strip("()")) if kind == "string" else None


def read_pdf(path: Path, ocr: OcrOptions = NO_OPTIONS) -> ExtractedBook:
    """Text, page numbers, chapters and metadata of a PDF (its magic already checked); scanned pages by OCR."""
    with MUPDF_LOCK, _open(path) as document:
        by_page, scanned = _text_blocks(document)
        plan = _ocr_plan(document, path, scanned, ocr) if scanned else None
        toc: list[list[Any]] = document.get_toc(simple=False)
        page_count: int = document.page_count
        metadata = document.metadata or {}
        title = clean_metadata(metadata.get("title"))
        authors = split_authors(metadata.get("author"))
        language = _language(document)
    if plan is not None:
        plan = _with_kept_pages(plan, path, ocr)
        read = _ocr_in_workers(path, plan, ocr) if plan.in_workers else _ocr_here(path, plan, ocr)
        by_page = _with_pages(_with_pages(by_page, plan.kept), read)
    ocr_pages = frozenset(number + 1 for number in scanned)
    raw = _without_running_lines([block for blocks in by_page for block in blocks], page_count)
    if not any(WORD_PATTERN.search(line) for block in raw for line in block.lines):
        if ocr_pages:
            raise FailedPrecondition(
                f"OCR found no text on the {len(ocr_pages)} scanned page(s) of {path.name}: blank or "
                "unreadable scans. Scan it again at 300 dpi, or ingest another copy."
            )
        raise InvalidArgument(f"{path.name} has no text on any page (no text layer and no scanned image).")
    chapters, source = choose_chapters(_blocks(raw), _outline(toc, raw), heading_max_level=2)
    return ExtractedBook(str(path), BookFormat.PDF, title, authors, language, chapters, source, ocr_pages,
                         plan.missing_language if plan is not None else None)


def _with_pages(by_page: list[list[_RawBlock]], read: dict[int, list[_RawBlock]]) -> list[list[_RawBlock]]:
    """Every page's blocks, those of the pages in `read` (by 0-based number) replaced by what OCR read."""
    return [read.get(number, blocks) for number, blocks in enumerate(by_page)]
