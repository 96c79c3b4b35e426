"""OCR accuracy and speed on scanned pages made from the shared corpus's own books.

    .venv/bin/python -m bench.ocr [--pages 6]

Builds the scanned test set here: pages of Pride and Prejudice and Persuasion (the corpus's PDFs)
rendered to images at 300 and 150 dpi, plus a noisier variant (grey speckle, rotated 1 degree)
at 300 dpi, each wrapped in an image-only PDF; and German and French pages typeset from the
calibre guides' text (EPUB) the same way, to check the language packs. Each page is read back by
the engine Alexandria uses (Tesseract through PyMuPDF's OCR text page, the book's language) and
compared with the text the page was made from: character accuracy = 1 - edit distance / length,
over whitespace-normalised text, and pages/s one page at a time; then the clean 300 dpi pages as one
scanned book through `extract_book`, which reads them in worker processes, one a core: without the OCR cache,
then with an empty one (each page kept as it is read), then again from it. Prints a table by variant; the last
line is JSON.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pymupdf

from alexandria.book_formats import BookFormat
from alexandria.settings import IngestSettings
from bench.common import CALIBRE_LIBRARY
from services.ingest.extract import extract_book
from services.ingest.extract.ocr import NO_OPTIONS, OcrOptions, ocr_page, tessdata_path
from services.ingest.extract.ocr_cache import OcrCache

ENGLISH = [CALIBRE_LIBRARY / "Jane Austen" / "Pride and Prejudice (1)" / "Pride and Prejudice - Jane Austen.pdf",
           CALIBRE_LIBRARY / "Jane Austen" / "Persuasion (4)" / "Persuasion - Jane Austen.pdf"]
GUIDES = {"deu": CALIBRE_LIBRARY / "John Schember" / "Kurzanleitung (8)" / "Kurzanleitung - John Schember.epub",
          "fra": CALIBRE_LIBRARY / "John Schember" / "Guide de demarrage rapide (9)" / "Guide de demarrage rapide - John Schember.epub"}
_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def accuracy(truth: str, read: str) -> float:
    """1 - (characters inserted, deleted or replaced) / characters of the truth."""
    truth, read = normalise(truth), normalise(read)
    errors = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, truth, read, autojunk=False).get_opcodes():
        if tag != "equal":
            errors += max(i2 - i1, j2 - j1)
    return max(0.0, 1.0 - errors / max(1, len(truth)))


@dataclass(frozen=True)
class Scan:
    variant: str
    language: str
    truth: str
    pdf: bytes  # one image-only page


def image_pdf(pixmap: pymupdf.Pixmap, dpi: int) -> bytes:
    """One image-only page holding `pixmap` at `dpi`."""
    document = pymupdf.open()
    width, height = pixmap.width * 72 / dpi, pixmap.height * 72 / dpi
    document.new_page(width=width, height=height).insert_image(pymupdf.Rect(0, 0, width, height), pixmap=pixmap)
    return document.tobytes()


def rendered(page: pymupdf.Page, dpi: int, rotate: float = 0.0) -> pymupdf.Pixmap:
    matrix = pymupdf.Matrix(dpi / 72, dpi / 72).prerotate(rotate)
    return page.get_pixmap(matrix=matrix, colorspace=pymupdf.csGRAY)


def noisy(page: pymupdf.Page, seed: int) -> pymupdf.Pixmap:
    """A worse scan: the page rotated by 1 degree, softened, with grey speckle over 0.5% of it."""
    pixmap = rendered(page, 300, rotate=1.0)
    pixels = np.frombuffer(pixmap.samples, dtype=np.uint8).reshape(pixmap.height, pixmap.width).astype(np.float32)
    pixels = (pixels + np.roll(pixels, 1, axis=0) + np.roll(pixels, 1, axis=1)) / 3  # a little blur
    rng = np.random.default_rng(seed)
    speckle = rng.random(pixels.shape) < 0.005
    pixels[speckle] = rng.choice([0, 90, 170], size=int(speckle.sum()))
    return pymupdf.Pixmap(pymupdf.csGRAY, pixmap.width, pixmap.height, pixels.astype(np.uint8).tobytes(), False)


def english_scans(pages: int) -> list[Scan]:
    scans = []
    for path in ENGLISH:
        with pymupdf.open(path) as document:
            chosen = [n for n in range(10, document.page_count) if len(document[n].get_text().split()) > 150][:pages]
            for n in chosen:
                page = document[n]
                truth = page.get_text()
                for dpi in (300, 150):
                    scans.append(Scan(f"clean {dpi} dpi", "eng", truth, image_pdf(rendered(page, dpi), dpi)))
                scans.append(Scan("noisy, rotated, 300 dpi", "eng", truth, image_pdf(noisy(page, n), 300)))
    return scans


def typeset_scans(pages: int) -> list[Scan]:
    """Pages typeset from the guides' text, as a printed page would look, then scanned at 300 dpi."""
    scans = []
    for language, path in GUIDES.items():
        book = extract_book(path, BookFormat.EPUB)
        paragraphs = [normalise(p) for c in book.chapters for p in c.text.split("\n\n") if len(p.split()) > 20]
        for n in range(pages):
            text = " ".join(paragraphs[n * 3 : n * 3 + 3])
            document = pymupdf.open()
            page = document.new_page(width=420, height=595)
            page.insert_textbox(pymupdf.Rect(50, 50, 370, 545), text, fontsize=10.5, fontname="tiro")
            truth = page.get_text()
            scans.append(Scan("typeset 300 dpi", language, truth, image_pdf(rendered(page, 300), 300)))
    return scans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=6, help="pages of each English book (and of each guide / 2)")
    args = parser.parse_args()
    scans = english_scans(args.pages) + typeset_scans(max(1, args.pages // 2))
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    tessdata = tessdata_path(IngestSettings().tessdata_prefix)
    for scan in scans:
        with pymupdf.open(stream=scan.pdf, filetype="pdf") as document:
            started = time.perf_counter()
            read = ocr_page(document[0], scan.language, tessdata)
            seconds = time.perf_counter() - started
        results.setdefault((scan.variant, scan.language), []).append((accuracy(scan.truth, read), seconds))
    print(f"{'variant':<26}{'lang':>5}{'pages':>6}{'char accuracy':>15}{'worst':>8}{'pages/s':>9}")
    figures = {}
    for (variant, language), rows in results.items():
        mean = sum(a for a, _ in rows) / len(rows)
        rate = len(rows) / sum(s for _, s in rows)
        print(f"{variant:<26}{language:>5}{len(rows):>6}{mean:>15.4f}{min(a for a, _ in rows):>8.4f}{rate:>9.2f}")
        figures[f"{variant} {language}"] = {"pages": len(rows), "accuracy": round(mean, 4), "pages_per_s": round(rate, 2)}
    book = pymupdf.open()
    for scan in scans:
        if scan.variant == "clean 300 dpi":
            book.insert_pdf(pymupdf.open(stream=scan.pdf, filetype="pdf"))
    path = Path(tempfile.mkdtemp(prefix="alexandria-ocr-")) / "scanned.pdf"
    book.save(path)
    cache = OcrCache(path.parent / "ocr", max_bytes=2**30)
    timings = {}
    for read, options in (("no cache", NO_OPTIONS), ("kept as read", OcrOptions(cache=cache)),
                          ("again, from the cache", OcrOptions(cache=cache))):
        started = time.perf_counter()
        extracted = extract_book(path, ocr=options)
        timings[read] = time.perf_counter() - started
    seconds = timings["no cache"]
    rate = len(extracted.ocr_pages) / seconds
    print(f"a scanned book of {book.page_count} pages through extract_book (pages in worker processes, one a core):"
          f" {seconds:.1f} s, {rate:.2f} pages/s; its pages kept as read (INGEST_OCR_CACHE_MB) "
          f"{timings['kept as read']:.1f} s, read again from the cache {timings['again, from the cache']:.2f} s")
    figures["book_pages_per_s"] = round(rate, 2)
    figures["book_kept_s"] = round(timings["kept as read"], 2)
    figures["book_again_s"] = round(timings["again, from the cache"], 3)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
