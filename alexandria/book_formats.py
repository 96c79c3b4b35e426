"""A book file's format in one place: the formats ingest reads, which one a call prefers, and in which order.

`BookFormat` is a format ingest can read, spelled as Calibre spells it ("EPUB"); Calibre knows more
formats (MOBI, AZW3, ...), which the catalog lists under Calibre's own names and ingest refuses by name.
`FormatPreference` is the contract's word for the file a call wants read (`epub`, `pdf`; a preview also
takes `any`), and travels as the proto enum `alexandria.v1.FormatPreference`, UNSPECIFIED meaning the
contract's default, EPUB. Both are parsed and formatted only here.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType

from alexandria.enums import enum_number, enum_word
from alexandria.errors import InvalidArgument
from alexandria.v1 import common_pb2


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
INGEST_ORDER = (BookFormat.EPUB, BookFormat.PDF)  # what ingest reads best, best first; then the others by name


class FormatPreference(StrEnum):
    """Which of a book's files a call wants read: its format if the book has it on disk, else the best other
    one (INGEST_ORDER, then by name)."""

    EPUB = "epub"
    PDF = "pdf"
    ANY = "any"  # no preference: the best file the book has (a preview's `format_filter` only)

    @property
    def book_format(self) -> BookFormat | None:
        """The format preferred; None for ANY."""
        return None if self is FormatPreference.ANY else BookFormat.parse(self.value)

    @classmethod
    def to_read_again(cls, calibre_format: str) -> FormatPreference:
        """The preference that picks a file of `calibre_format` again: that format when a preference can
        name it (EPUB, PDF), else ANY, the best file the book has."""
        try:
            return cls(calibre_format.lower())
        except ValueError:
            return cls.ANY

    def rank(self, calibre_format: str) -> tuple[bool, int, bool, str]:
        """Sort key for a book's formats (Calibre's names, upper case): the preferred one first, then
        INGEST_ORDER, then the other formats ingest reads, then the rest (MOBI...), each by name."""
        ingest_rank = INGEST_ORDER.index(calibre_format) if calibre_format in INGEST_ORDER else len(INGEST_ORDER)
        unreadable = calibre_format not in BookFormat.__members__
        return calibre_format != (self.book_format or INGEST_ORDER[0]), ingest_rank, unreadable, calibre_format

    @classmethod
    def from_proto(cls, number: int) -> FormatPreference:
        """The preference a proto carries: UNSPECIFIED is the contract's default, EPUB."""
        try:
            word = enum_word(common_pb2.FormatPreference.DESCRIPTOR, number)
        except KeyError:
            raise InvalidArgument(f"Unknown format preference {number}: use {', '.join(cls)}.") from None
        return cls(word) if word else DEFAULT_PREFERENCE

    def to_proto(self) -> str:
        """The proto enum value, by name: the generated stubs type an enum field as the enum or its value's name."""
        return common_pb2.FormatPreference.Name(enum_number(common_pb2.FormatPreference.DESCRIPTOR, self.value))


DEFAULT_PREFERENCE = FormatPreference.EPUB  # the contract's default
# The contract's `format_preference` words (an ingest reads one format or the other; `any` is a preview's).
INGEST_PREFERENCES = (FormatPreference.EPUB, FormatPreference.PDF)
INGEST_PREFERENCE_WORDS = tuple(p.value for p in INGEST_PREFERENCES)  # as tool schemas and the CLI list them
FORMAT_FILTER_WORDS = tuple(p.value for p in FormatPreference)  # the preview's `format_filter` words
