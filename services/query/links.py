"""The link that opens a returned passage: Calibre's own URL for a Calibre book, a file URI otherwise.

- A Calibre book in a format Calibre's viewer reads: `calibre://view-book/<library>/<book id>/<FORMAT>` with
  `?open_at=` the passage's place (`search:` and its first words, services/ingest/locations.py) when ingest found
  one, percent-encoded twice as Calibre decodes it. The library is named as Calibre names it (the library folder's name, spaces as underscores), hex-encoded
  as Calibre's own links are (`_hex_-` and the UTF-8 bytes in hex: calibre/gui2/book_details.py), and Calibre's
  files sit in `<library>/<author>/<title (id)>/`, so the library is the book file's third parent folder.
- A PDF, Calibre's or a local one: its `file://` URI with `#page=N`, the passage's first page.
- Any other local file: its `file://` URI.
- A reader's highlight: Calibre's URL for the format it was made in, opened at its CFI (stored at sync as Calibre's
  own annotations browser builds it: `epubcfi(/<2 x (spine index + 1)><start CFI>)`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePath, PurePosixPath
from urllib.parse import quote

from alexandria.store.records import ChunkRecord

PDF = "PDF"


def calibre_library_id(book_file: PurePath) -> str:
    """The library's name in Calibre's URLs, for a file of a book of that library."""
    name = book_file.parent.parent.parent.name.replace(" ", "_")
    return "_hex_-" + name.encode("utf-8").hex()


def _as_the_reader_sees_it(path: Path, link_paths: Mapping[PurePosixPath, PurePath]) -> PurePath:
    for served in sorted(link_paths, key=lambda folder: len(folder.parts), reverse=True):  # the deepest first
        if path.is_relative_to(served):
            return link_paths[served].joinpath(*path.relative_to(served).parts)
    return path


def passage_link(chunk: ChunkRecord, link_paths: Mapping[PurePosixPath, PurePath]) -> str:
    """The URL that opens `chunk`'s book at it ("" for a book with no file recorded); `link_paths`: where the folders
    books were read from sit on the machine that opens it (QuerySettings.link_paths)."""
    book = chunk.book
    if not book.file_path:
        return ""
    path = _as_the_reader_sees_it(Path(book.file_path), link_paths)
    if not path.is_absolute():  # stored by a catalog given a relative library path: no URI can name it
        return ""
    book_format = chunk.highlight_format or book.format
    if book_format == PDF:
        page = f"#page={chunk.page_start}" if chunk.page_start is not None else ""
        return path.as_uri() + page
    if book.calibre_id is None:
        return path.as_uri()
    # Encoded twice: Calibre decodes the query, then parses it (calibre/gui2/ui.py: `parse_qs(unquote(query))`),
    # so an `&` encoded once would end the words there and a `+` would read as a space.
    at = f"?open_at={quote(quote(chunk.open_at, safe=''), safe='')}" if chunk.open_at else ""
    return f"calibre://view-book/{calibre_library_id(path)}/{book.calibre_id}/{book_format or path.suffix[1:].upper()}{at}"
