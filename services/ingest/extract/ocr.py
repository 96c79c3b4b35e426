"""OCR of scanned PDF pages: Tesseract, through PyMuPDF's OCR text page.

PyMuPDF carries MuPDF's own build of Tesseract; what it needs from the machine is Tesseract's
language data, which Debian's `tesseract-ocr` packages install (`make setup` does). A page is read
by OCR when it shows an image but has (almost) no text layer; its text then comes back as blocks
with their places on the page, like any other page, so headers, hyphenation and chapters are
handled the same way. The book's language picks the language data when it is installed (`make setup`
installs OCR_LANGUAGES': English, German, French, Croatian and Japanese by default); a book in another
language is read with English's, and its ingest result says which data was missing and how to install it.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pymupdf

from alexandria.errors import FailedPrecondition
from alexandria.languages import language_code
from alexandria.settings import IngestSettings, available_cpus
from services.ingest.extract.ocr_cache import OcrCache

# Where Debian (5.x, then 4.x) and other systems put Tesseract's language data.
TESSDATA_FOLDERS = (Path("/usr/share/tesseract-ocr/5/tessdata"), Path("/usr/share/tesseract-ocr/4.00/tessdata"),
                    Path("/usr/share/tessdata"), Path("/usr/local/share/tessdata"))
DEFAULT_LANGUAGE = "eng"
# Measured with bench/ocr.py on book pages: 200 dpi reads clean scans as well as 300 (99.7% of characters)
# and noisy ones better (99.7% against 96.8%), and a little faster.
OCR_DPI = 200
# One page takes about two seconds of one core; from this many pages on, they are read in worker processes,
# one a core (MuPDF runs one thread at a time in a process), which costs a second or so to start.
PARALLEL_FROM_PAGES = 4
# Tesseract's names where they differ from the ISO 639-3 codes books' languages become (alexandria.languages).
_TESSERACT_NAMES = {"zho": "chi_sim", "cmn": "chi_sim"}
INSTALL_HINT = ("install Tesseract's language data (Debian: apt-get install tesseract-ocr tesseract-ocr-eng; "
                "`make setup` does it) or set TESSDATA_PREFIX to its folder")


def _no_progress(done: int, total: int) -> None:
    return None


@dataclass(frozen=True)
class OcrOptions:
    """How to OCR a book's scanned pages: in its language (ISO 639; None: the PDF's own, else English), at
    most `max_pages` of them, telling `progress(done, total)` after each page, with the language data in
    `tessdata` (None: the first system folder that has English)."""

    language: str | None = None
    max_pages: int = IngestSettings.model_fields["ingest_ocr_max_pages"].default
    progress: Callable[[int, int], None] = _no_progress
    tessdata: Path | None = None
    cache: OcrCache | None = None  # the pages read before (ocr_cache.py); None: every page is read

    @classmethod
    def from_settings(cls, settings: IngestSettings) -> OcrOptions:
        """The service's OCR limits, language data and cache (INGEST_OCR_MAX_PAGES, TESSDATA_PREFIX,
        IngestSettings.ingest_ocr_cache_mb)."""
        cache = (OcrCache(settings.store.alexandria_data_dir / "ocr", int(settings.ingest_ocr_cache_mb * 2**20))
                 if settings.ingest_ocr_cache_mb > 0 else None)
        return cls(max_pages=settings.ingest_ocr_max_pages, tessdata=settings.tessdata_prefix, cache=cache)


NO_OPTIONS = OcrOptions()


def tessdata_path(configured: Path | None) -> Path | None:
    """The folder of Tesseract's language data: `configured` (TESSDATA_PREFIX), else the first system folder
    with English; None when it holds no English."""
    candidates = [configured] if configured else list(TESSDATA_FOLDERS)
    return next((folder for folder in candidates if (folder / f"{DEFAULT_LANGUAGE}.traineddata").is_file()), None)


def tesseract_language(book_language: str | None) -> str | None:
    """Tesseract's name for a book's language (a code, tag or name: "hr", "ja", "ger", "Croatian"); None when
    the book names none."""
    code = language_code(book_language or "")
    return _TESSERACT_NAMES.get(code, code) or None


def ocr_language(book_language: str | None, tessdata: Path) -> str:
    """The language data to read a book with: its own language when installed, else English."""
    name = tesseract_language(book_language)
    return name if name and (tessdata / f"{name}.traineddata").is_file() else DEFAULT_LANGUAGE


def missing_language_notice(language: str, pages: int) -> str:
    """What an ingest result says when a book's scanned pages were read as English for want of its language's
    data (Tesseract's name for it)."""
    return (f"{pages} scanned page(s) were read by OCR as English: Tesseract's data for the book's language "
            f"({language}) is not installed. Install it (Debian: apt-get install "
            f"tesseract-ocr-{language.replace('_', '-')}; or add {language} to OCR_LANGUAGES and run make setup), "
            "then ingest the book again.")


def ocr_textpage(page: pymupdf.Page, language: str, tessdata: Path) -> pymupdf.TextPage:
    """The page's text as OCR reads it, as a text page that `get_text` reads like a text layer."""
    try:
        textpage: pymupdf.TextPage = page.get_textpage_ocr(language=language, dpi=OCR_DPI, full=True,
                                                           tessdata=str(tessdata))
    except RuntimeError as exc:
        raise FailedPrecondition(f"OCR of page {page.number + 1} failed ({exc}); {INSTALL_HINT}.") from None
    return textpage


T = TypeVar("T")


def in_worker_processes(read: Callable[..., tuple[int, T]], pages: Sequence[tuple[Any, ...]],
                        each: Callable[[int, T, int], None]) -> dict[int, T]:
    """`read(*arguments)` -> (page number, what it read) for each page's arguments, in worker processes (spawned:
    a forked copy of a process that runs gRPC threads may hang), handing `each(number, value, done)` every page as
    it finishes."""
    workers = max(1, min(available_cpus(), len(pages)))
    read_pages: dict[int, T] = {}
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(read, *arguments) for arguments in pages]
        for done, future in enumerate(as_completed(futures), 1):
            number, value = future.result()
            read_pages[number] = value
            each(number, value, done)
    return read_pages


def ocr_page(page: pymupdf.Page, language: str, tessdata: Path) -> str:
    """The text of one page, read by OCR."""
    text: str = page.get_text(textpage=ocr_textpage(page, language, tessdata))
    return text
