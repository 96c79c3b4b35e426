"""A book file's format and the preferred one: parsed, mapped from extensions and the wire, and ranked only here."""

from __future__ import annotations

from pathlib import Path

import pytest

from alexandria.book_formats import (
    DEFAULT_PREFERENCE,
    FORMAT_FILTER_WORDS,
    INGEST_PREFERENCE_WORDS,
    BookFormat,
    FormatPreference,
)
from alexandria.errors import InvalidArgument
from alexandria.v1 import common_pb2


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


def test_the_contracts_words() -> None:
    assert INGEST_PREFERENCE_WORDS == ("epub", "pdf")
    assert FORMAT_FILTER_WORDS == ("epub", "pdf", "any")
    assert DEFAULT_PREFERENCE is FormatPreference.EPUB


@pytest.mark.parametrize(
    ("preference", "order"),
    [
        (FormatPreference.EPUB, ["EPUB", "PDF", "TXT", "AZW3", "MOBI"]),
        (FormatPreference.PDF, ["PDF", "EPUB", "TXT", "AZW3", "MOBI"]),
        (FormatPreference.ANY, ["EPUB", "PDF", "TXT", "AZW3", "MOBI"]),
    ],
)
def test_a_preference_ranks_its_format_first_then_epub_pdf_then_what_ingest_reads(
    preference: FormatPreference, order: list[str]
) -> None:
    assert sorted(["TXT", "MOBI", "PDF", "AZW3", "EPUB"], key=preference.rank) == order


def test_the_wire_enum_round_trips_and_unspecified_is_epub() -> None:
    for preference in FormatPreference:
        assert FormatPreference.from_proto(common_pb2.FormatPreference.Value(preference.to_proto())) is preference
    assert FormatPreference.from_proto(common_pb2.FORMAT_PREFERENCE_UNSPECIFIED) is FormatPreference.EPUB
    with pytest.raises(InvalidArgument, match="Unknown format preference 9: use epub, pdf, any"):
        FormatPreference.from_proto(9)
