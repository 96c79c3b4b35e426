"""Extraction of small generated books, one trap each: anchors, fallbacks, PDF repairs, encodings, markup."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.ingest.documents import FRONT_MATTER_TITLE
from services.ingest.extract import extract_book
from services.ingest.extract.html import parse_html
from services.ingest.extract.structure import SECTION_WORDS, Block, TocEntry, choose_chapters


def test_epub_toc_anchors_split_one_file_into_chapters(fixture_books: dict[str, Path]) -> None:
    book = extract_book(fixture_books["fragments.epub"])
    assert book.chapter_source == "toc"
    assert [(c.title, c.level) for c in book.chapters] == [
        (FRONT_MATTER_TITLE, 1),
        ("Part One", 1),
        ("Chapter 1", 2),
        ("Chapter 2", 2),
        ("Chapter 3", 2),
    ]
    front, part, first, second, third = book.chapters
    # the spine, not the manifest (which lists a_part.xhtml first), gives the reading order
    assert front.front_matter and front.text.startswith("A TEST OF FRAGMENTS")
    assert part.text == "" and part.section_end == 5
    assert first.display_title == "Part One > Chapter 1"
    # footnote marker not glued to "mat.", inline <em> not split, <script>/<style> gone
    assert first.text.startswith("The cat sat on the mat. It was very happy.")
    assert second.text == "Short."  # a tiny chapter keeps its text
    assert "The mat was red." in third.text  # the footnote's own text is kept
    assert all("hidden" not in c.text and "margin" not in c.text for c in book.chapters)


def test_epub_metadata_lists_authors_in_order_without_other_roles(fixture_books: dict[str, Path]) -> None:
    book = extract_book(fixture_books["fragments.epub"])
    assert (book.title, book.authors, book.language) == (
        "A Test of Fragments",
        ("Ada Example", "Ben Sample"),
        "en",
    )
    assert book.author == "Ada Example & Ben Sample"


def test_epub_without_toc_uses_headings(fixture_books: dict[str, Path]) -> None:
    book = extract_book(fixture_books["headings.epub"])
    assert book.chapter_source == "headings"
    assert [(c.display_title, c.level) for c in book.chapters] == [
        ("The First", 1),
        ("The First > A Part of It", 2),
        ("The Second", 1),
    ]
    assert book.chapters[0].text.startswith("This is sentence 1 about rivers.")


def test_epub_without_toc_or_headings_uses_fixed_sections(fixture_books: dict[str, Path]) -> None:
    book = extract_book(fixture_books["plain.epub"])
    assert book.chapter_source == "sections"
    assert [c.title for c in book.chapters] == ["Section 1", "Section 2"]
    assert book.chapters[0].word_count >= SECTION_WORDS
    assert book.word_count == 300 * 16  # every paragraph has 16 words: nothing lost at the cut


def test_pdf_outline_headers_footers_and_hyphenation(fixture_books: dict[str, Path]) -> None:
    book = extract_book(fixture_books["running_headers.pdf"])
    assert (book.title, book.authors) == ("A Tale of Testing", ("Ada Example", "Ben Sample"))
    front, part, first, second = book.chapters
    assert front.front_matter and front.text == "A TALE OF TESTING\n\nby Ada Example"
    assert part.title == "Part One" and part.text == "" and part.page_spans[0].page == 2
    # running header "A Tale of Testing" and footer "Page N" are gone
    assert "Page" not in first.text + second.text and "Tale of Testing" not in first.text + second.text
    # line-end hyphens: a broken word is joined, a compound the book writes whole keeps its hyphen
    assert first.text.startswith("It was an international affair, and a well-known one: a well-known story.")
    assert "Here an example is split" in first.text
    # a paragraph running over a page break stays one paragraph, and its pages are known
    sentence = "This paragraph runs on to the next page where it ends in the middle of a line"
    start = first.text.index(sentence)
    assert (first.page_at(start), first.page_at(start + len(sentence) - 1)) == (2, 3)
    # Chapter 2 starts mid-page 3, where its outline entry points, not at the top of the page
    assert second.text.startswith("The second chapter starts in the middle of the page.")
    assert [s.page for s in second.page_spans] == [3, 4]


def test_pdf_without_outline_uses_heading_lines(fixture_books: dict[str, Path]) -> None:
    book = extract_book(fixture_books["no_outline.pdf"])
    assert book.chapter_source == "headings"
    assert [(c.title, c.page_spans[0].page) for c in book.chapters] == [("CHAPTER 1", 1), ("CHAPTER 2", 2)]


def test_legacy_and_bom_encodings_are_detected(fixture_books: dict[str, Path]) -> None:
    croatian = extract_book(fixture_books["croatian_latin2.txt"])
    assert "Čovjek je šetao uz rijeku. Đak je žurio kući, a ćuk je pjevao" in croatian.chapters[0].text
    bom = extract_book(fixture_books["bom_utf8.txt"])
    assert bom.chapters[0].title == "CHAPTER 1"  # the BOM is not glued to the first heading
    assert bom.chapters[0].text == "Café au lait, naïve façade."


def test_txt_chapters_from_heading_lines(tmp_path: Path) -> None:
    path = tmp_path / "play.txt"
    path.write_text(
        "THE PLAY\n\nPERSONS.\n\nACT I.\n\nScene I. A street.\n\nEnter two.\nThey talk.\n\n"
        "SCENE.--Not a heading.\n\nScene II. A house.\n\nMore talk.\n\n"
        "Act II.\n\nScene I. A garden.\n\nThe end.\n",
        encoding="utf-8",
    )
    book = extract_book(path)
    assert [(c.display_title, c.level) for c in book.chapters] == [
        (FRONT_MATTER_TITLE, 1),
        ("ACT I.", 1),
        ("ACT I. > Scene I. A street.", 2),
        ("ACT I. > Scene II. A house.", 2),
        ("Act II.", 1),
        ("Act II. > Scene I. A garden.", 2),
    ]
    assert book.chapters[2].text == "Enter two.\nThey talk.\n\nSCENE.--Not a heading."


def test_markdown_title_heading_is_front_matter_and_levels_shift(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text(
        "# The Notes\n\n*by Someone*\n\n## Part A\n\nSome **bold** text and a [link](http://x.org).\n\n"
        "### Detail\n\nVerse line one  \nverse line two\n\n```\ncode stays\n```\n",
        encoding="utf-8",
    )
    book = extract_book(path)
    assert book.title == "The Notes" and book.format == "MD"
    assert [(c.display_title, c.level) for c in book.chapters] == [
        (FRONT_MATTER_TITLE, 1),
        ("Part A", 1),
        ("Part A > Detail", 2),
    ]
    assert book.chapters[0].text == "The Notes\n\nby Someone"
    assert book.chapters[1].text == "Some bold text and a link."
    assert book.chapters[2].text == "Verse line one\nverse line two\n\ncode stays"


def test_html_file_metadata_and_headings(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_bytes(
        '<html lang="hr"><head><meta charset="windows-1250"><title>Naslov</title>'
        '<meta name="author" content="Ana &amp; Marko"></head><body><h1>Prvo</h1><p>Šuma je tiha.</p>'
        "<h1>Drugo</h1><p>Žuta jesen.</p></body></html>".encode("cp1250")
    )
    book = extract_book(path)
    assert (book.title, book.authors, book.language) == ("Naslov", ("Ana", "Marko"), "hr")
    expected = [("Prvo", "Šuma je tiha."), ("Drugo", "Žuta jesen.")]
    assert [(c.title, c.text) for c in book.chapters] == expected


@pytest.mark.parametrize(
    ("markup", "text"),
    [
        ("<p>word<sup>1</sup> next</p>", "word next"),
        ('<p>word<a href="#fn2">[2]</a> next</p>', "word next"),
        ('<p>word<a epub:type="noteref" href="notes.xhtml#n3">3</a> next</p>', "word next"),
        ("<p>10<sup>6</sup> cells</p>", "10^6 cells"),
        ("<p>one<br/>two</p>", "one\ntwo"),
        ("<p>Hello <em>You</em>r <b>friend</b></p>", "Hello Your friend"),
    ],
)
def test_html_inline_markup_and_note_markers(markup: str, text: str) -> None:
    document = parse_html(
        f'<html xmlns:epub="http://www.idpf.org/2007/ops"><body>{markup}</body></html>'.encode()
    )
    assert [b.text for b in document.blocks] == [text]


def test_a_paragraph_keeps_its_note_markers_as_a_reader_sees_them() -> None:
    document = parse_html(b'<html><body><p>word<a href="#fn2">[2]</a> next<sup>*</sup> and 10<sup>6</sup></p>'
                          b"<p>plain</p></body></html>")
    assert [(b.text, b.reader_text) for b in document.blocks] == [
        ("word next and 10^6", "word[2] next* and 106"), ("plain", None)]


def test_a_toc_that_divides_nothing_gives_way_to_headings() -> None:
    blocks = [
        Block("One", heading_level=1),
        Block("Text one."),
        Block("Two", heading_level=1),
        Block("Text two."),
    ]
    useless = [TocEntry("Start", 1, 0), TocEntry("Also start", 1, 0)]
    chapters, source = choose_chapters(blocks, useless, heading_max_level=2)
    assert source == "headings" and [c.title for c in chapters] == ["One", "Two"]
    chapters, source = choose_chapters(blocks, [TocEntry("One", 1, 0), TocEntry("Two", 1, 2)], 2)
    assert source == "toc" and [c.text for c in chapters] == ["Text one.", "Text two."]


@pytest.mark.parametrize(("unclosed", "head_end"), [("span", "</head>"), ("div", "</head>"), ("span", "")])
def test_a_document_nested_deeper_than_the_parser_builds_keeps_every_paragraph(unclosed: str, head_end: str) -> None:
    paragraphs = "".join(f'<{unclosed} id="n{i}"><p>Paragraph <em>{i}</em> &amp; more.</p>' for i in range(600))
    document = parse_html(
        f"<html><head><title>Deep</title>{head_end}<body>{paragraphs}"
        "<script>hidden()</script><h2>Notes</h2><p>The end.</p></body></html>".encode()
    )
    texts = [b.text for b in document.blocks]
    assert texts[:2] == ["Paragraph 0 & more.", "Paragraph 1 & more."]
    assert texts[-3:] == ["Paragraph 599 & more.", "Notes", "The end."]
    assert len(texts) == 602 and document.blocks[-2].heading_level == 2
    assert document.title == "Deep" and document.anchors["n599"] == 599
