"""A book file's format: parsed and mapped from extensions only here."""

from __future__ import annotations

from pathlib import Path

import pytest

from alexandria.book_formats import BookFormat
from alexandria.errors import InvalidArgument


@pytest.mark.parametrize("name", ["pdf", "PDF", " Pdf "])
def test_a_format_is_parsed_in_any_case(name: str) -> None:
    assert BookFormat.parse(name) is BookFormat.PDF


def test_an_unsupported_format_is_refused_naming_the_supported_ones() -> None:
    with pytest.raises(InvalidArgument) as raised:
        BookFormat.parse("MOBI", of="book.mobi")
    assert raised.value.message == (
        "Unsupported format 'MOBI' for book.mobi: supported formats are EPUB, PDF, TXT, MD, HTML."
    )


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("a.epub", BookFormat.EPUB), ("a.PDF", BookFormat.PDF), ("a.markdown", BookFormat.MD), ("a.htm", BookFormat.HTML),
     ("a.xhtml", BookFormat.HTML), ("a.txt", BookFormat.TXT)],
)
def test_a_files_format_comes_from_its_extension(name: str, fmt: BookFormat) -> None:
    assert BookFormat.by_extension(Path(name)) is fmt
    assert BookFormat.of_file(Path(name)) is fmt


def test_an_unknown_extension_has_no_format() -> None:
    assert BookFormat.by_extension(Path("a.docx")) is None
    with pytest.raises(InvalidArgument, match="Unsupported file format '.docx': supported formats are EPUB, PDF"):
        BookFormat.of_file(Path("a.docx"))
