"""A scanned page is read by OCR once: what OCR read is kept by the file's content and language, page by page as
it is read, held to a size, and read again only when it cannot be used."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pymupdf
import pytest

from alexandria.settings import IngestSettings, StoreSettings
from alexandria.store.common import disk_usage
from ingest.helpers import scanned_pdf
from services.ingest.extract import extract_book
from services.ingest.extract import pdf as pdf_extractor
from services.ingest.extract.ocr import PARALLEL_FROM_PAGES, OcrOptions, tessdata_path
from services.ingest.extract.ocr_cache import OcrCache

LOGBOOK = [f"Page {word} of the logbook. The keeper noted the {word} tide and the wind from the reef." for word in
           ("first", "second", "third", "fourth", "fifth")]
ALMANAC = ["The almanac says the herring came early to the bay, and eleven ships passed the northern reef."]


def text_of(path: Path, ocr: OcrOptions) -> str:
    return " ".join(chapter.text for chapter in extract_book(path, ocr=ocr).chapters)


def reading(cache: OcrCache, progress: list[tuple[int, int]], language: str | None = None) -> OcrOptions:
    return OcrOptions(language=language, cache=cache, progress=lambda done, total: progress.append((done, total)))


@pytest.fixture
def cache(tmp_path: Path) -> OcrCache:
    return OcrCache(tmp_path / "ocr", max_bytes=64 * 2**20)


@pytest.fixture
def ocr_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The (0-based) pages read by OCR in this process from here on, as they are read."""
    reads: list[int] = []
    read_page = pdf_extractor.ocr_textpage

    def counted(page: pymupdf.Page, language: str, tessdata: Path) -> pymupdf.TextPage:
        reads.append(page.number)
        return read_page(page, language, tessdata)

    monkeypatch.setattr(pdf_extractor, "ocr_textpage", counted)
    return reads


def test_pages_read_in_worker_processes_are_kept_and_a_second_extract_reads_none(
        tmp_path: Path, cache: OcrCache, monkeypatch: pytest.MonkeyPatch, ocr_reads: list[int]) -> None:
    path = tmp_path / "logbook.pdf"
    path.write_bytes(scanned_pdf(LOGBOOK))
    assert len(LOGBOOK) >= PARALLEL_FROM_PAGES
    first: list[tuple[int, int]] = []
    read = text_of(path, reading(cache, first))
    assert first == [(n, 5) for n in range(1, 6)] and "noted the fifth tide" in read

    def no_workers(*_: object) -> None:
        raise AssertionError("pages were read by OCR again")

    monkeypatch.setattr(pdf_extractor, "in_worker_processes", no_workers)
    again: list[tuple[int, int]] = []
    book = extract_book(path, ocr=reading(cache, again))
    assert " ".join(chapter.text for chapter in book.chapters) == read
    assert again == [(5, 5)] and book.ocr_pages == frozenset(range(1, 6)) and ocr_reads == []


def test_an_extract_stopped_midway_keeps_the_pages_it_read(tmp_path: Path, cache: OcrCache,
                                                            ocr_reads: list[int]) -> None:
    path = tmp_path / "short.pdf"
    path.write_bytes(scanned_pdf(LOGBOOK[:3]))  # read in this process, page by page

    def stop_after_two(done: int, total: int) -> None:
        if done == 2:
            raise KeyboardInterrupt  # as a stack stopped amid an ingest

    with pytest.raises(KeyboardInterrupt):
        extract_book(path, ocr=OcrOptions(cache=cache, progress=stop_after_two))
    assert ocr_reads == [0, 1]

    progress: list[tuple[int, int]] = []
    text = text_of(path, reading(cache, progress))
    assert progress == [(2, 3), (3, 3)] and ocr_reads == [0, 1, 2], "pages one and two come from the cache"
    assert all(f"noted the {word} tide" in text for word in ("first", "second", "third"))


def test_another_file_or_language_is_read_anew(tmp_path: Path, cache: OcrCache, ocr_reads: list[int]) -> None:
    path = tmp_path / "book.pdf"
    path.write_bytes(scanned_pdf(ALMANAC))
    tessdata = tessdata_path(None)
    assert tessdata is not None, "make setup installs Tesseract's language data"
    kept = cache.book(path, "eng", tessdata, pdf_extractor.OCR_DPI)
    assert kept is not None
    kept.keep(0, [[50.0, ["What OCR read of the almanac before."], False]])
    assert "of the almanac before" in text_of(path, OcrOptions(cache=cache)) and ocr_reads == []

    path.write_bytes(scanned_pdf(LOGBOOK[:1]))  # the same name, other bytes: the cache holds nothing of it
    assert "noted the first tide" in text_of(path, OcrOptions(cache=cache)) and ocr_reads == [0]
    path.write_bytes(scanned_pdf(ALMANAC))
    assert "herring came early" in text_of(path, OcrOptions(cache=cache, language="deu"))  # German's data
    assert ocr_reads == [0, 0]


def test_a_file_replaced_while_ocr_reads_it_keeps_nothing_read_after(
        tmp_path: Path, cache: OcrCache, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "short.pdf"
    original = scanned_pdf(LOGBOOK[:3])  # read in this process, page by page
    path.write_bytes(original)
    read_page = pdf_extractor.ocr_textpage
    reads: list[int] = []

    def replaced_amid_the_first_page(page: pymupdf.Page, language: str, tessdata: Path) -> pymupdf.TextPage:
        reads.append(page.number)
        if len(reads) == 1:  # as a sync of another copy moves a new file over it
            (tmp_path / "new.pdf").write_bytes(scanned_pdf(ALMANAC))
            os.replace(tmp_path / "new.pdf", path)
        return read_page(page, language, tessdata)

    monkeypatch.setattr(pdf_extractor, "ocr_textpage", replaced_amid_the_first_page)
    text_of(path, OcrOptions(cache=cache))
    assert reads == [0, 1, 2] and "changed while its scanned pages were read by OCR" in caplog.text
    assert not list(cache.folder.glob("*/*.json")), "no page is kept under the hash of a file no longer there"

    (tmp_path / "again.pdf").write_bytes(original)
    os.replace(tmp_path / "again.pdf", path)
    monkeypatch.setattr(pdf_extractor, "ocr_textpage", read_page)
    text = text_of(path, OcrOptions(cache=cache))
    assert all(f"noted the {word} tide" in text for word in ("first", "second", "third"))
    assert len(list(cache.folder.glob("*/*.json"))) == 3, "a file left alone keeps its pages"


def test_other_language_data_is_read_anew(tmp_path: Path, cache: OcrCache, ocr_reads: list[int]) -> None:
    path = tmp_path / "almanac.pdf"
    path.write_bytes(scanned_pdf(ALMANAC))
    installed = tessdata_path(None)
    assert installed is not None, "make setup installs Tesseract's language data"
    tessdata = tmp_path / "tessdata"
    tessdata.mkdir()
    shutil.copy(installed / "eng.traineddata", tessdata)
    text_of(path, OcrOptions(cache=cache, tessdata=tessdata))
    text_of(path, OcrOptions(cache=cache, tessdata=tessdata))
    assert ocr_reads == [0]

    text_of(path, OcrOptions(cache=cache))  # the system's data (TESSDATA_PREFIX unset)
    os.utime(tessdata / "eng.traineddata", ns=(0, 0))  # as a package upgrade replaces it
    text_of(path, OcrOptions(cache=cache, tessdata=tessdata))
    assert ocr_reads == [0, 0, 0]


def test_a_data_dir_that_cannot_keep_pages_leaves_ocr_as_it_was(tmp_path: Path, ocr_reads: list[int]) -> None:
    path = tmp_path / "almanac.pdf"
    path.write_bytes(scanned_pdf(ALMANAC))
    (tmp_path / "data").write_text("a file where the data dir should be")
    cache = OcrCache(tmp_path / "data" / "ocr", max_bytes=2**30)
    assert "herring came early" in text_of(path, OcrOptions(cache=cache))
    assert "herring came early" in text_of(path, OcrOptions(cache=cache))
    assert ocr_reads == [0, 0]


@pytest.mark.parametrize("damage", ['[[50.0, ["half a', "{}", "[1]"])
def test_a_damaged_page_file_is_read_again_and_kept_anew(tmp_path: Path, cache: OcrCache, ocr_reads: list[int],
                                                         damage: str) -> None:
    path = tmp_path / "almanac.pdf"
    path.write_bytes(scanned_pdf(ALMANAC))
    read = text_of(path, OcrOptions(cache=cache))
    (page,) = list(cache.folder.glob("*/0.json"))
    page.write_text(damage)

    assert text_of(path, OcrOptions(cache=cache)) == read and ocr_reads == [0, 0]
    assert text_of(path, OcrOptions(cache=cache)) == read and ocr_reads == [0, 0]
    assert page.read_text().startswith("[")


def test_the_cache_drops_the_books_read_longest_ago_past_its_size(tmp_path: Path, ocr_reads: list[int]) -> None:
    books = []
    for name, pages in (("almanac", ALMANAC), ("logbook", LOGBOOK[:1]), ("third", LOGBOOK[1:2])):
        path = tmp_path / f"{name}.pdf"
        path.write_bytes(scanned_pdf(pages))
        books.append(path)
    probe = OcrCache(tmp_path / "probe", max_bytes=2**30)
    text_of(books[0], OcrOptions(cache=probe))
    one_book = disk_usage(probe.folder)
    cache = OcrCache(tmp_path / "ocr", max_bytes=2 * one_book + one_book // 2)  # room for two books

    for path in books[:2]:
        text_of(path, OcrOptions(cache=cache))
    text_of(books[0], OcrOptions(cache=cache))  # read again: now the logbook is the one read longest ago
    text_of(books[2], OcrOptions(cache=cache))
    assert len(list(cache.folder.iterdir())) == 2

    ocr_reads.clear()
    text_of(books[0], OcrOptions(cache=cache))
    text_of(books[2], OcrOptions(cache=cache))
    assert ocr_reads == [], "the two books read last are kept"
    text_of(books[1], OcrOptions(cache=cache))
    assert ocr_reads == [0], "the logbook was dropped"


def test_the_cache_lives_in_the_data_dir_and_a_size_of_zero_keeps_nothing(
        tmp_path: Path) -> None:
    options = OcrOptions.from_settings(IngestSettings(store=StoreSettings(alexandria_data_dir=tmp_path)))
    assert options.cache is not None and options.cache.folder == tmp_path / "ocr"
    assert options.cache.max_bytes == 512 * 2**20
    assert OcrOptions.from_settings(IngestSettings(ingest_ocr_cache_mb=0)).cache is None
