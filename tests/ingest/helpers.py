"""Helpers shared by the ingest tests: the corpus files, cached extraction, fake similarities."""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import numpy as np
import pymupdf

from services.ingest.documents import ExtractedBook, Sentence
from services.ingest.extract import extract_book

FIXTURE_BOOKS = Path(__file__).resolve().parents[1] / "fixtures" / "books"
# Real public-domain text in languages written without spaces (sources in the folder's README)
FIXTURE_TEXTS = Path(__file__).resolve().parents[1] / "fixtures" / "texts"
WAGAHAI = FIXTURE_TEXTS / "wagahai_chapter1.ja.txt"  # 吾輩は猫である, chapter 1 (Natsume Sōseki)
ZHUFU = FIXTURE_TEXTS / "zhufu.zh.txt"  # 祝福 (Lu Xun)


def make_books_module() -> ModuleType:
    """tests/fixtures/books/make_books.py, imported by path (the fixtures folder is no package)."""
    spec = importlib.util.spec_from_file_location("make_books", FIXTURE_BOOKS / "make_books.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def extracted(path: Path) -> ExtractedBook:
    """A book extracted once per test session."""
    return extract_book(path)


def fake_similarities(sentences: list[Sentence], seed: int = 7) -> np.ndarray:
    """A deterministic stand-in for the embedder's neighbour similarities, spread like real ones."""
    return np.random.default_rng(seed).uniform(0.0, 0.9, max(0, len(sentences) - 1))


def scanned_pdf(pages: Sequence[str | None], dpi: int = 200, scanned: set[int] | None = None,
                fontname: str = "tiro") -> bytes:
    """A PDF of typeset pages; those numbered in `scanned` (1-based; default: all) are images of the page only,
    as a scanner makes them, with no text layer. A None page is a page with a text layer too."""
    scanned = set(range(1, len(pages) + 1)) if scanned is None else scanned
    document = pymupdf.open()
    for number, text in enumerate(pages, 1):
        typeset = pymupdf.open()
        typeset.new_page(width=420, height=595).insert_textbox(
            pymupdf.Rect(50, 50, 370, 545), text or "", fontsize=11, fontname=fontname)
        if number in scanned:
            pixmap = typeset[0].get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY)
            document.new_page(width=420, height=595).insert_image(pymupdf.Rect(0, 0, 420, 595), pixmap=pixmap)
        else:
            document.insert_pdf(typeset)
    return document.tobytes()
