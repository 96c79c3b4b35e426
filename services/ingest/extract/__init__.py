"""The extract stage: a book file in, an `ExtractedBook` (metadata + chapters in reading order) out.

`extract_book` checks what can be checked before any parsing (the file exists, is
not empty, starts with the magic bytes of its format) so that every bad file gets
its own clear `alexandria.errors` exception naming the file and what to do; the
format readers add theirs (corrupt archive, encrypted PDF, no text layer).
Extraction is all or nothing: a reader either returns a whole book or raises.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from alexandria.book_formats import BookFormat
from alexandria.errors import InvalidArgument, NotFound
from services.ingest.documents import ExtractedBook
from services.ingest.extract.epub import read_epub
from services.ingest.extract.ocr import NO_OPTIONS, OcrOptions
from services.ingest.extract.pdf import read_pdf
from services.ingest.extract.plain import read_html, read_markdown, read_txt

READERS: dict[BookFormat, Callable[[Path], ExtractedBook]] = {  # and PDF, read with the OCR options
    BookFormat.EPUB: read_epub,
    BookFormat.TXT: read_txt,
    BookFormat.MD: read_markdown,
    BookFormat.HTML: read_html,
}
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_PDF_MAGIC = b"%PDF-"
_PDF_MAGIC_WINDOW = 1024  # the PDF spec lets a header start anywhere in the first KB


def _looks_like(head: bytes) -> str:
    if _PDF_MAGIC in head[:_PDF_MAGIC_WINDOW]:
        return "a PDF"
    if head.startswith(_ZIP_MAGIC):
        return "a ZIP archive (an EPUB is one)"
    if head.lstrip().lower().startswith((b"<!doctype html", b"<html", b"<?xml")):
        return "an HTML/XML document"
    return "neither a ZIP archive nor a PDF"


def _check_magic(path: Path, fmt: BookFormat, head: bytes) -> None:
    if fmt is BookFormat.EPUB and not head.startswith(_ZIP_MAGIC):
        raise InvalidArgument(
            f"{path.name} is not an EPUB: an EPUB is a ZIP archive, but this file is {_looks_like(head)}. "
            "Check that it is the file you meant, or ingest it under its real format."
        )
    if fmt is BookFormat.PDF and _PDF_MAGIC not in head[:_PDF_MAGIC_WINDOW]:
        raise InvalidArgument(
            f"{path.name} is not a PDF: it has no %PDF- header, and looks like {_looks_like(head)}. "
            "Check that it is the file you meant, or ingest it under its real format."
        )
    if fmt in (BookFormat.TXT, BookFormat.MD, BookFormat.HTML) and (head.startswith(_ZIP_MAGIC) or head.startswith(_PDF_MAGIC)):
        raise InvalidArgument(
            f"{path.name} is not a {fmt} file: it is {_looks_like(head)}. Rename it to its real extension."
        )


def extract_book(path: Path, format_hint: str | None = None, ocr: OcrOptions = NO_OPTIONS) -> ExtractedBook:
    """Read a book file: metadata from the file itself and its chapters in reading order.

    `format_hint` (a BookFormat's name, any case) overrides the file extension, e.g. for calibre's
    files whose format the catalog already knows (and may be one ingest cannot read); `ocr` says how to
    read a PDF's scanned pages. Raises NotFound, InvalidArgument or FailedPrecondition with a
    message for the user.
    """
    if not path.is_file():
        raise NotFound(f"File not found: {path}.")
    fmt = BookFormat.parse(format_hint, of=path.name) if format_hint else BookFormat.of_file(path)
    with path.open("rb") as file:
        head = file.read(_PDF_MAGIC_WINDOW)
    if not head:
        raise InvalidArgument(f"{path.name} is empty (0 bytes); the download or copy probably failed.")
    _check_magic(path, fmt, head)
    return read_pdf(path, ocr) if fmt is BookFormat.PDF else READERS[fmt](path)
