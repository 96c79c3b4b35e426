"""A book file's format in one place: the formats ingest reads, parsed and mapped from extensions only here.

`BookFormat` is a format ingest can read, spelled as Calibre spells it ("EPUB"); Calibre knows more
formats (MOBI, AZW3, ...), which the catalog lists under Calibre's own names and ingest refuses by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType

from alexandria.errors import InvalidArgument


class BookFormat(StrEnum):
    """A format ingest can read."""

    EPUB = "EPUB"
    PDF = "PDF"
    TXT = "TXT"
    MD = "MD"
    HTML = "HTML"

    @classmethod
    def parse(cls, name: str, of: str = "") -> BookFormat:
        """The format called `name` (any case); InvalidArgument naming the supported ones for anything else
        (`of`: the file it is the format of, for the message)."""
        try:
            return cls(name.strip().upper())
        except ValueError:
            where = f" for {of}" if of else ""
            raise InvalidArgument(f"Unsupported format '{name}'{where}: supported formats are {SUPPORTED}.") from None

    @classmethod
    def by_extension(cls, path: Path) -> BookFormat | None:
        """The format a file's extension names (any case), or None when it names none ingest reads."""
        return EXTENSIONS.get(path.suffix.lower())

    @classmethod
    def of_file(cls, path: Path) -> BookFormat:
        """The format of a file by its extension; InvalidArgument naming the supported ones for any other."""
        fmt = cls.by_extension(path)
        if fmt is None:
            raise InvalidArgument(
                f"Unsupported file format '{path.suffix or path.name}': supported formats are {SUPPORTED}."
            )
        return fmt


SUPPORTED = ", ".join(BookFormat)  # "EPUB, PDF, TXT, MD, HTML", as messages name them
EXTENSIONS: Mapping[str, BookFormat] = MappingProxyType({
    ".epub": BookFormat.EPUB, ".pdf": BookFormat.PDF, ".txt": BookFormat.TXT, ".md": BookFormat.MD,
    ".markdown": BookFormat.MD, ".html": BookFormat.HTML, ".htm": BookFormat.HTML, ".xhtml": BookFormat.HTML,
})
