"""Scanned PDF pages are read by OCR (Tesseract through PyMuPDF), with page numbers kept, the OCR'd pages
marked, progress per page, and clear refusals when OCR cannot or may not run."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from alexandria.errors import FailedPrecondition
from alexandria.pdf_pages import looks_scanned
from alexandria.settings import IngestSettings
from ingest.helpers import scanned_pdf
from services.ingest.chunking import text_source
from services.ingest.extract import extract_book
from services.ingest.extract.ocr import (
    PARALLEL_FROM_PAGES,
    OcrOptions,
    missing_language_notice,
    ocr_language,
    tessdata_path,
)
from services.ingest.extract.pdf import read_pdf
from services.ingest.segment import segment

TYPED = ("Chapter One. The lighthouse keeper climbed the stairs every evening at dusk and lit the great lamp "
         "so that the fishing boats could find their way home through the fog.")
SCANNED = ("Chapter Two. On the second night a storm came from the west, and the keeper watched the copper "
           "weathervane spin above the harbour until the morning bells rang.")
GERMAN = "Kapitel Drei. Über die Brücke gingen fünf Männer, und die Straße war nass vom großen Regen."
JAPANESE = ("吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。"
            "何でも薄暗いじめじめした所でニャーニャー泣いていた事だけは記憶している。")


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    path = tmp_path / "mixed.pdf"
    path.write_bytes(scanned_pdf([TYPED, SCANNED], scanned={2}))
    return path


def test_only_the_scanned_page_is_read_by_ocr_and_keeps_its_page_number(mixed: Path) -> None:
    pages: list[tuple[int, int]] = []
    book = extract_book(mixed, ocr=OcrOptions(progress=lambda done, total: pages.append((done, total))))
    assert book.ocr_pages == frozenset({2}) and pages == [(1, 1)]
    text = " ".join(chapter.text for chapter in book.chapters)
    assert "lighthouse keeper climbed the stairs" in text  # from the text layer
    assert "copper weathervane spin above the harbour" in text  # read by OCR
    assert (text_source(book, 1, 1), text_source(book, 2, 2), text_source(book, 1, 2)) == ("text", "ocr", "ocr")


def test_many_scanned_pages_are_read_in_worker_processes_in_page_order(tmp_path: Path) -> None:
    path = tmp_path / "scan.pdf"
    lines = [f"Page {word} of the logbook. The keeper noted the {word} tide and the wind." for word in
             ("first", "second", "third", "fourth", "fifth")]
    path.write_bytes(scanned_pdf(lines))
    pages: list[tuple[int, int]] = []
    book = extract_book(path, ocr=OcrOptions(progress=lambda done, total: pages.append((done, total))))
    assert book.ocr_pages == frozenset(range(1, 6))
    assert pages == [(n, 5) for n in range(1, 6)]
    text = " ".join(chapter.text for chapter in book.chapters)
    found = [text.find(f"noted the {word} tide") for word in ("first", "second", "third", "fourth", "fifth")]
    assert -1 not in found and found == sorted(found), text


def test_the_books_language_picks_the_language_data(tmp_path: Path) -> None:
    tessdata = tessdata_path(IngestSettings().tessdata_prefix)
    assert tessdata is not None, "make setup installs Tesseract's language data"
    assert (ocr_language("ger", tessdata), ocr_language("deu", tessdata), ocr_language("fra", tessdata)) == (
        "deu", "deu", "fra")
    assert ocr_language("xyz", tessdata) == ocr_language(None, tessdata) == "eng"
    path = tmp_path / "german.pdf"
    path.write_bytes(scanned_pdf([GERMAN]))
    text = extract_book(path, ocr=OcrOptions(language="deu")).chapters[0].text
    assert "Über die Brücke gingen fünf Männer" in text and "Straße" in text


def test_make_setup_installs_the_librarys_languages_and_a_books_code_or_name_finds_them() -> None:
    tessdata = tessdata_path(IngestSettings().tessdata_prefix)
    assert tessdata is not None, "make setup installs Tesseract's language data"
    # OCR_LANGUAGES' default: English, German, French, Croatian, Japanese; as Calibre, EPUBs and people name them
    assert [ocr_language(language, tessdata) for language in ("en", "deu", "fr", "hr", "Croatian", "jpn", "ja-JP")] \
        == ["eng", "deu", "fra", "hrv", "hrv", "jpn", "jpn"]


def test_a_scanned_japanese_book_is_read_in_japanese_and_its_lines_run_on_without_spaces(tmp_path: Path) -> None:
    path = tmp_path / "neko.pdf"
    path.write_bytes(scanned_pdf([JAPANESE], fontname="japan"))
    book = extract_book(path, ocr=OcrOptions(language="jpn"))
    text = book.chapters[0].text
    assert "名前はまだ無い。どこで生れたか" in text and "泣いていた事だけは記憶している。" in text  # OCR slips a kanji
    assert " " not in text.strip() and book.ocr_missing_language is None
    assert len(segment(book, "jpn")) == 4


def test_a_scanned_book_in_a_language_without_data_is_read_as_english_and_says_so(mixed: Path) -> None:
    book = extract_book(mixed, ocr=OcrOptions(language="cy"))  # Welsh: no data installed
    assert book.ocr_missing_language == "cym"
    assert "copper weathervane spin above the harbour" in " ".join(chapter.text for chapter in book.chapters)
    notice = missing_language_notice("chi_sim", 3)
    assert notice.startswith("3 scanned page(s) were read by OCR as English") and "(chi_sim)" in notice
    assert "apt-get install tesseract-ocr-chi-sim" in notice and "add chi_sim to OCR_LANGUAGES" in notice
    assert extract_book(mixed, ocr=OcrOptions(language="en")).ocr_missing_language is None


def test_too_many_scanned_pages_are_refused_naming_the_setting(tmp_path: Path) -> None:
    path = tmp_path / "long.pdf"
    path.write_bytes(scanned_pdf([SCANNED, SCANNED, SCANNED]))
    with pytest.raises(FailedPrecondition, match="3 scanned pages to read by OCR, over the limit of 2 "
                                                 r"\(INGEST_OCR_MAX_PAGES\)"):
        extract_book(path, ocr=OcrOptions(max_pages=2))


def test_without_the_language_data_a_scan_is_refused_saying_what_to_install(mixed: Path, tmp_path: Path) -> None:
    with pytest.raises(FailedPrecondition) as refused:
        extract_book(mixed, ocr=OcrOptions(tessdata=tmp_path / "nothing-here"))
    assert "1 scanned page(s)" in refused.value.message and "OCR is not available" in refused.value.message
    assert "tesseract-ocr-eng" in refused.value.message


def test_the_language_data_folder_is_a_setting_read_from_tessdata_prefix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSDATA_PREFIX", str(tmp_path))
    assert OcrOptions.from_settings(IngestSettings()).tessdata == tmp_path
    assert tessdata_path(tmp_path) is None, "a folder without English is no language data"


def test_a_preview_does_not_wait_while_worker_processes_ocr_a_book(tmp_path: Path) -> None:
    """The catalog's preview (same process, same MuPDF lock) checks a PDF while an OCR runs in workers."""
    path = tmp_path / "scan.pdf"
    path.write_bytes(scanned_pdf([SCANNED] * PARALLEL_FROM_PAGES))
    page_read, preview_done = threading.Event(), threading.Event()

    def progress(done: int, total: int) -> None:
        page_read.set()
        preview_done.wait(60)  # the OCR stays under way, its worker processes running, until the preview is done

    with ThreadPoolExecutor(2) as threads:
        reading = threads.submit(read_pdf, path, OcrOptions(progress=progress))
        try:
            assert page_read.wait(120), "the workers read a first page"
            assert threads.submit(looks_scanned, path).result(timeout=10) is True
        finally:
            preview_done.set()
        assert reading.result(timeout=120).ocr_pages == frozenset(range(1, PARALLEL_FROM_PAGES + 1))
