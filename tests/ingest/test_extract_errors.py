"""Bad files: each gives its own clear alexandria.errors exception naming the file, never a stack trace."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from alexandria.errors import AlexandriaError, FailedPrecondition, InvalidArgument, NotFound
from ingest.helpers import make_books_module
from services.ingest.extract import epub as epub_reader
from services.ingest.extract import extract_book


def test_fixture_files_are_what_the_script_makes(fixture_books: dict[str, Path]) -> None:
    makers = make_books_module().MAKERS
    for name, path in fixture_books.items():
        if name != "encrypted.pdf":  # encryption salts differ on every run
            assert path.read_bytes() == makers[name](), f"rerun tests/fixtures/books/make_books.py ({name})"


@pytest.mark.parametrize(
    ("name", "error", "says"),
    [
        ("not_an_epub.epub", InvalidArgument, "is not an EPUB"),
        ("not_a_pdf.pdf", InvalidArgument, "is not a PDF"),
        ("truncated.epub", InvalidArgument, "truncated or corrupt"),
        ("corrupt.epub", InvalidArgument, "damaged EPUB"),
        ("no_package.epub", InvalidArgument, "container.xml"),
        ("drm.epub", FailedPrecondition, "DRM-protected"),
        ("encrypted.pdf", FailedPrecondition, "needs a password"),
        ("scanned.pdf", FailedPrecondition, "OCR found no text on the 2 scanned page(s)"),
        ("empty.epub", InvalidArgument, "is empty (0 bytes)"),
        ("empty.pdf", InvalidArgument, "is empty (0 bytes)"),
        ("binary.txt", InvalidArgument, "binary data"),
        ("book.docx", InvalidArgument, "Unsupported file format"),
    ],
)
def test_bad_file_gets_its_own_error(
    fixture_books: dict[str, Path], name: str, error: type[AlexandriaError], says: str
) -> None:
    with pytest.raises(error) as raised:
        extract_book(fixture_books[name])
    assert type(raised.value) is error
    assert says in raised.value.message
    if name != "book.docx":
        assert name in raised.value.message


def test_format_hint_overrides_the_extension(fixture_books: dict[str, Path]) -> None:
    with pytest.raises(InvalidArgument, match="is not a PDF: .* a ZIP archive"):
        extract_book(fixture_books["fragments.epub"], format_hint="pdf")
    with pytest.raises(InvalidArgument, match="Unsupported format 'DOCX'"):
        extract_book(fixture_books["fragments.epub"], format_hint="DOCX")


def test_missing_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="File not found"):
        extract_book(tmp_path / "nowhere.epub")


@pytest.mark.parametrize("suffix", [".txt", ".md", ".html"])
def test_text_formats_refuse_archives_and_blank_files(
    fixture_books: dict[str, Path], tmp_path: Path, suffix: str
) -> None:
    disguised = tmp_path / f"book{suffix}"
    disguised.write_bytes(fixture_books["fragments.epub"].read_bytes())
    with pytest.raises(InvalidArgument, match="Rename it to its real extension"):
        extract_book(disguised)
    blank = tmp_path / f"blank{suffix}"
    blank.write_text(
        "  \n\n \t\n" if suffix != ".html" else "<html><body> <script>x()</script> </body></html>"
    )
    with pytest.raises(InvalidArgument, match="no text"):
        extract_book(blank)


def _with_members(source: Path, target: Path, changed: dict[str, bytes]) -> Path:
    """A copy of the EPUB `source` with some members' contents changed."""
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as copy:
        for member in original.infolist():
            copy.writestr(member, changed.get(member.filename, original.read(member.filename)))
    return target


def test_an_epub_unpacking_past_what_any_book_needs_is_refused_before_it_is_read(
    fixture_books: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = fixture_books["fragments.epub"]
    with zipfile.ZipFile(source) as archive:
        unpacked = sum(member.file_size for member in archive.infolist())
    monkeypatch.setattr(epub_reader, "MAX_UNPACKED_BYTES", unpacked - 1)
    with pytest.raises(InvalidArgument, match="fragments.epub unpacks to 0.0 GB, more than any book needs"):
        extract_book(source)
    monkeypatch.setattr(epub_reader, "MAX_UNPACKED_BYTES", unpacked)
    assert extract_book(source).chapters


def test_a_document_the_spine_names_many_times_is_read_once(fixture_books: dict[str, Path], tmp_path: Path) -> None:
    source = fixture_books["fragments.epub"]
    with zipfile.ZipFile(source) as archive:
        opf = archive.read("OEBPS/content.opf").decode()
    repeated = opf.replace('<itemref idref="a_part"/>', '<itemref idref="a_part"/>' * 200)
    crafted = _with_members(source, tmp_path / "repeated.epub", {"OEBPS/content.opf": repeated.encode()})
    once, many = extract_book(source), extract_book(crafted)
    assert [c.text for c in many.chapters] == [c.text for c in once.chapters]
