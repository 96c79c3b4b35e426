"""What the catalog and ingest both ask of a PDF's pages, with the one lock on MuPDF.

MuPDF's context is shared by every thread of a process, and catalog and ingest may run in one
process (the embedded default): all PyMuPDF work holds `MUPDF_LOCK`.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pymupdf

MUPDF_LOCK = threading.Lock()
# A page with fewer words than this in its text layer, and something drawn on it, is a scanned page.
SCANNED_PAGE_MAX_WORDS = 5
# How many pages a preview looks at to tell a scanned book.
PREVIEW_PAGES = 5


def is_scanned(page: pymupdf.Page, words: int | None = None) -> bool:
    """(Almost) no text in the page's text layer (`words`, when the caller has already read it), and
    something on the page: an image, or drawings (text set as outlines, a scan traced to vectors)."""
    if (len(page.get_text("words")) if words is None else words) >= SCANNED_PAGE_MAX_WORDS:
        return False
    return bool(page.get_images(full=False)) or bool(page.get_drawings())


def looks_scanned(path: Path) -> bool:
    """Whether a PDF's first pages are all scanned: a book that only OCR can read (an unreadable file: False,
    ingest says what is wrong with it)."""
    with MUPDF_LOCK:
        try:
            with pymupdf.open(path, filetype="pdf") as document:
                pages = [document[n] for n in range(min(PREVIEW_PAGES, document.page_count))]
                return bool(pages) and all(is_scanned(page) for page in pages)
        except (RuntimeError, ValueError):
            return False
