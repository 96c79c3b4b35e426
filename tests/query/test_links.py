"""The link that opens a returned passage: Calibre's URL for a Calibre book, a file URI for a PDF or a local file."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

import pytest

from alexandria.settings import QuerySettings, settings_problems
from alexandria.store import schema as f
from alexandria.store.records import BookRecord, ChunkRecord
from services.query.links import passage_link


def _chunk(file_path: str, book_format: str, calibre_id: int | None = None, **more: object) -> ChunkRecord:
    book = BookRecord(book_key="k", title="T", author="A", file_path=file_path, format=book_format,
                      calibre_id=calibre_id)
    return ChunkRecord(book=book, level=f.Level.CHILD, text="Text.", **more)  # type: ignore[arg-type]


def test_a_calibre_epub_opens_in_calibres_viewer_at_the_passages_words() -> None:
    chunk = _chunk("/home/me/Calibre Library/Jane Austen/Emma (2)/Emma - Jane Austen.epub", "EPUB", 2,
                   open_at="search:borrowed two umbrellas for us from")
    library = "_hex_-" + b"Calibre_Library".hex()
    assert passage_link(chunk, {}) == (f"calibre://view-book/{library}/2/EPUB"
                                       "?open_at=search%253Aborrowed%2520two%2520umbrellas%2520for%2520us%2520from")


@pytest.mark.parametrize("words", ["Dombey & Son had often dealt", "x + y = 100% of £5 #2", "吾輩は猫である。名前"])
def test_calibre_reads_the_words_back_whole_as_it_parses_its_links(words: str) -> None:
    link = passage_link(_chunk("/lib/A/B (7)/B.epub", "EPUB", 7, open_at=f"search:{words}"), {})
    assert parse_qs(unquote(urlparse(link).query)) == {"open_at": [f"search:{words}"]}  # calibre/gui2/ui.py


def test_a_passage_without_a_place_opens_its_book() -> None:
    chunk = _chunk("/lib/A/B (7)/B.azw3", "AZW3", 7)
    assert passage_link(chunk, {}) == f"calibre://view-book/_hex_-{b'lib'.hex()}/7/AZW3"


def test_a_pdf_opens_at_the_passages_first_page_and_a_local_file_as_a_file() -> None:
    pdf = _chunk("/lib/A/Persuasion (4)/Persuasion.pdf", "PDF", 4, page_start=17, page_end=18)
    assert passage_link(pdf, {}) == Path("/lib/A/Persuasion (4)/Persuasion.pdf").as_uri() + "#page=17"
    local = _chunk("/inbox/my notes.md", "MD")
    assert passage_link(local, {}) == "file:///inbox/my%20notes.md"


def test_a_book_stored_with_a_relative_path_gets_no_link_and_breaks_no_answer() -> None:
    assert passage_link(_chunk("Jane Austen/Emma (2)/Emma.pdf", "PDF", 2, page_start=3), {}) == ""


def test_books_read_in_a_container_link_to_where_the_reader_has_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINK_PATHS", '{"/library": "/home/me/Calibre Library", "/inbox": "/home/me/inbox"}')
    link_paths = QuerySettings().link_paths
    epub = _chunk("/library/Jane Austen/Emma (2)/Emma - Jane Austen.epub", "EPUB", 2)
    assert passage_link(epub, link_paths) == f"calibre://view-book/_hex_-{b'Calibre_Library'.hex()}/2/EPUB"
    pdf = _chunk("/inbox/papers/On Whales.pdf", "PDF", page_start=4)
    assert passage_link(pdf, link_paths) == "file:///home/me/inbox/papers/On%20Whales.pdf#page=4"
    elsewhere = _chunk("/srv/books/notes.md", "MD")
    assert passage_link(elsewhere, link_paths) == "file:///srv/books/notes.md"


def test_link_paths_take_the_deepest_folder_and_windows_paths_and_refuse_relative_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LINK_PATHS", r'{"/data": "/mnt/data", "/data/library": "C:\\Users\\me\\Calibre Library"}')
    link_paths = QuerySettings().link_paths
    pdf = _chunk("/data/library/A/B (3)/B.pdf", "PDF", 3, page_start=2)
    assert passage_link(pdf, link_paths) == "file:///C:/Users/me/Calibre%20Library/A/B%20%283%29/B.pdf#page=2"
    epub = _chunk("/data/library/A/B (3)/B.epub", "EPUB", 3)
    assert passage_link(epub, link_paths) == f"calibre://view-book/_hex_-{b'Calibre_Library'.hex()}/3/EPUB"
    monkeypatch.setenv("LINK_PATHS", '{"/library": "~/Calibre Library"}')
    with pytest.raises(ValueError, match=r"both paths absolute \('/library' -> '~/Calibre Library'\)"):
        QuerySettings()
    assert settings_problems() == [("LINK_PATHS='{\"/library\": \"~/Calibre Library\"}': should be both paths absolute "
                                   "('/library' -> '~/Calibre Library'), the second as the machine that opens the "
                                   "links writes it: /home/me/... or C:\\...")]
