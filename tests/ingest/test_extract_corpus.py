"""Extraction of the real books of ../shared/corpus, checked against its manifest.json.

Every EPUB, PDF and local file: chapters in reading order with their real TOC titles
and levels, no text lost (chapter words add up to the manifest's, within 1%), front
matter kept, metadata from the file itself, and PDF page numbers that match the pages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pymupdf
import pytest

from ingest.helpers import extracted, fake_similarities
from services.ingest.chunking import chunk_book
from services.ingest.documents import ChunkingParams, count_words
from services.ingest.extract.structure import normalise_space
from services.ingest.segment import segment

LIBRARY = "calibre-library"
HAMLET = "Hamlet, Prince of Denmark - William Shakespeare.epub"
GUIDE = "Guide de demarrage rapide - John Schember.epub"
BOOKS = [
    (
        "pride_and_prejudice",
        f"{LIBRARY}/Jane Austen/Pride and Prejudice (1)/Pride and Prejudice - Jane Austen.epub",
    ),
    (
        "pride_and_prejudice",
        f"{LIBRARY}/Jane Austen/Pride and Prejudice (1)/Pride and Prejudice - Jane Austen.pdf",
    ),
    ("emma", f"{LIBRARY}/Jane Austen/Emma (2)/Emma - Jane Austen.epub"),
    (
        "sense_and_sensibility",
        f"{LIBRARY}/Jane Austen/Sense and Sensibility (3)/Sense and Sensibility - Jane Austen.epub",
    ),
    ("persuasion", f"{LIBRARY}/Jane Austen/Persuasion (4)/Persuasion - Jane Austen.pdf"),
    ("hamlet", f"{LIBRARY}/William Shakespeare/Hamlet, Prince of Denmark (5)/{HAMLET}"),
    ("macbeth", f"{LIBRARY}/William Shakespeare/Macbeth (6)/Macbeth - William Shakespeare.pdf"),
    (
        "quickstart:eng",
        f"{LIBRARY}/John Schember/Quick Start Guide (7)/Quick Start Guide - John Schember.epub",
    ),
    ("quickstart:deu", f"{LIBRARY}/John Schember/Kurzanleitung (8)/Kurzanleitung - John Schember.epub"),
    ("quickstart:fra", f"{LIBRARY}/John Schember/Guide de demarrage rapide (9)/{GUIDE}"),
    ("romeo_and_juliet", "local-files/romeo_and_juliet.txt"),
    ("the_tempest", "local-files/the_tempest.epub"),
    ("julius_caesar", "local-files/julius_caesar.pdf"),
    ("twelfth_night_act1_md", "local-files/twelfth_night_act1.md"),
    ("a_midsummer_nights_dream", "local-files/more/nested/a_midsummer_nights_dream.epub"),
]
IDS = [Path(relative).name for _, relative in BOOKS]
PDFS = [(key, relative) for key, relative in BOOKS if relative.endswith(".pdf")]


@pytest.mark.parametrize(("key", "relative"), BOOKS, ids=IDS)
def test_chapters_are_the_toc_entries_in_reading_order(
    shared_corpus: Path, manifest: dict[str, Any], key: str, relative: str
) -> None:
    book = extracted(shared_corpus / relative)
    toc = manifest["books"][key]["toc"]
    chapters = [c for c in book.chapters if not c.front_matter]
    assert [c.title for c in chapters] == [entry["title"] for entry in toc]
    top = min(entry["level"] for entry in toc)
    assert [c.level for c in chapters] == [entry["level"] - top + 1 for entry in toc]
    assert [c.index for c in book.chapters] == list(range(len(book.chapters)))


@pytest.mark.parametrize(("key", "relative"), BOOKS, ids=IDS)
def test_no_text_is_lost(shared_corpus: Path, manifest: dict[str, Any], key: str, relative: str) -> None:
    book = extracted(shared_corpus / relative)
    expected = manifest["books"][key]
    counted = book.word_count
    if key.startswith("quickstart:"):
        # these guides' counts include their headings, which extraction moves into the chapter titles
        counted += sum(count_words(c.title) for c in book.chapters if not c.front_matter)
    assert counted == pytest.approx(expected["words"], rel=0.01)
    for chapter, entry in zip([c for c in book.chapters if not c.front_matter], expected["toc"], strict=True):
        if entry.get("words") is not None:  # short chapters too: nothing is dropped for being small
            assert chapter.word_count == pytest.approx(entry["words"], rel=0.02, abs=3), chapter.title


@pytest.mark.parametrize(("key", "relative"), BOOKS, ids=IDS)
def test_front_matter_before_the_first_entry_is_kept(
    shared_corpus: Path, manifest: dict[str, Any], key: str, relative: str
) -> None:
    book = extracted(shared_corpus / relative)
    front = [c for c in book.chapters if c.front_matter]
    expected = manifest["books"][key].get("front_matter_words")
    if expected:
        assert len(front) == 1 and book.chapters[0] is front[0]
        assert front[0].word_count == pytest.approx(expected, abs=2)


def test_nested_toc_gives_paths_and_sections(shared_corpus: Path) -> None:
    emma = extracted(shared_corpus / BOOKS[2][1])
    volume_two = next(c for c in emma.chapters if c.title == "VOLUME II")
    first = emma.chapters[volume_two.index + 1]
    assert first.display_title == "VOLUME II > CHAPTER I"
    assert emma.chapters[volume_two.section_end].title == "VOLUME III"

    macbeth = extracted(shared_corpus / BOOKS[6][1])
    act_one = next(c for c in macbeth.chapters if c.title == "ACT I.")
    assert act_one.word_count == 0  # its scenes own the text...
    act_two = next(c for c in macbeth.chapters if c.title == "ACT II.")
    assert act_one.section_end == act_two.index
    # ...but the act, with the scenes it holds, spans their pages.
    pages = [span.page for chapter in macbeth.chapters[act_one.index : act_one.section_end]
             for span in chapter.page_spans]
    assert min(pages) == act_one.page_spans[0].page < max(pages) <= act_two.page_spans[0].page


@pytest.mark.parametrize(
    ("relative", "title", "authors", "language"),
    [
        (BOOKS[0][1], "Pride and Prejudice", ("Jane Austen",), "en"),
        (BOOKS[1][1], "Pride and Prejudice", ("Jane Austen",), None),
        (BOOKS[6][1], "Macbeth", ("William Shakespeare", "Thomas Middleton"), None),
        (BOOKS[8][1], "Kurzanleitung", ("John Schember",), "de"),
        ("local-files/the_tempest.epub", "The Tempest", (), "en"),
        ("local-files/julius_caesar.pdf", None, (), None),
        ("local-files/twelfth_night_act1.md", "Twelfth Night; or, What You Will", (), None),
        ("local-files/romeo_and_juliet.txt", None, (), None),
    ],
    ids=lambda value: Path(value).name if isinstance(value, str) and "/" in value else None,
)
def test_metadata_comes_from_the_file(
    shared_corpus: Path, relative: str, title: str | None, authors: tuple[str, ...], language: str | None
) -> None:
    book = extracted(shared_corpus / relative)
    assert (book.title, book.authors, book.language) == (title, authors, language)


@pytest.mark.parametrize(("key", "relative"), PDFS, ids=[Path(r).name for _, r in PDFS])
def test_pdf_chunks_cite_the_pages_their_text_is_on(shared_corpus: Path, key: str, relative: str) -> None:
    path = shared_corpus / relative
    book = extracted(path)
    sentences = segment(book)
    chunks = chunk_book(book, sentences, fake_similarities(sentences), ChunkingParams()).chunks
    with pymupdf.open(path) as document:
        pages = {n + 1: normalise_space(page.get_text()) for n, page in enumerate(document)}
    for chunk in chunks[:: max(1, len(chunks) // 25)]:
        first, last = sentences[chunk.first_sentence], sentences[chunk.end_sentence - 1]
        assert chunk.locator.page_start == first.page_start and chunk.locator.page_end == last.page_end
        # the first and last few words, short enough not to straddle a page break
        assert " ".join(first.text.split()[:2]) in pages[first.page_start], (chunk.locator, first.text)
        assert last.text.split()[-1] in pages[last.page_end], (chunk.locator, last.text)
        assert chunk.locator.page_start <= chunk.locator.page_end


@pytest.mark.parametrize(("key", "relative"), PDFS, ids=[Path(r).name for _, r in PDFS])
def test_pdf_footers_do_not_reach_the_text(shared_corpus: Path, key: str, relative: str) -> None:
    book = extracted(shared_corpus / relative)
    for chapter in book.chapters:
        for span in chapter.page_spans:
            # a printed page number would sit right before or after a page's text
            assert not chapter.text[span.start : span.end].strip().endswith(f" {span.page}")
            assert not chapter.text[span.start : span.end].startswith(f"{span.page} ")
