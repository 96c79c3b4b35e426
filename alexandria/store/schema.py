"""Payload field names written by ingest and read by query and catalog: the one list of them.

A book's points are written with COMPLETE false and flipped to true only when all
of them are in the store; every read that serves users filters on COMPLETE true,
so a half-written book is never visible.
"""

from __future__ import annotations

from enum import StrEnum


class Level(StrEnum):
    PARENT = "parent"  # a whole chapter: its text stored whole, its vector from a bounded part
    CHILD = "child"    # a semantic chunk under a parent
    FLAT = "flat"      # a semantic chunk of a book ingested without hierarchy
    HIGHLIGHT = "highlight"  # text the reader highlighted in Calibre's viewer (services/ingest/highlights.py)


# The levels whose points are the books' passages (a search's hits)
PASSAGE_LEVELS = [Level.CHILD.value, Level.FLAT.value]


class TextSource(StrEnum):
    """Where a chunk's text was read from."""

    TEXT = "text"  # the file's own text
    OCR = "ocr"    # scanned pages, read by OCR


# identity
BOOK_KEY = "book_key"          # Calibre book uuid, or a local file's local_book_key (book_identity.py)
CALIBRE_ID = "calibre_id"      # int, Calibre books only
FILE_PATH = "file_path"
FORMAT = "format"              # a BookFormat (alexandria.book_formats): the format read
COMPLETE = "complete"          # bool: the whole book is written
VERSION = "version"            # int: when this version of the book was ingested (ns); a re-ingest writes a newer one
SOURCE = "source"              # the file this version was read from, as FileVersion.to_stored writes it

# book metadata
BOOK_TITLE = "book_title"
AUTHOR = "author"              # authors joined with " & "
AUTHORS = "authors"            # list, in Calibre's order
LANGUAGE = "language"

# chunk
TEXT = "text"
LEVEL = "level"
PARENT_ID = "parent_id"        # a child's parent point id
SEQUENCE_INDEX = "sequence_index"  # a child's index among its siblings (0-based)
SIBLING_COUNT = "sibling_count"
CHAPTER_TITLE = "chapter_title"
CHAPTER_INDEX = "chapter_index"
POSITION = "position"          # order of the chunk in the whole book
PAGE_START = "page_start"
PAGE_END = "page_end"
TEXT_SOURCE = "text_source"    # a TextSource; absent: TEXT
OPEN_AT = "open_at"            # where Calibre's viewer opens the book at the passage; absent: unknown
WORD_COUNT = "word_count"

# highlight (its TEXT is the highlighted text, its CHAPTER_TITLE the chapters it is in)
HIGHLIGHT = "highlight"        # which highlight, in which edit: Calibre's uuid of it and when it was last changed
NOTE = "note"                  # the reader's note on it
HIGHLIGHT_FORMAT = "highlight_format"  # the format it was made in: the one Calibre's viewer opens at it

# provenance
MODEL = "model"
DIMENSION = "dimension"
PASSAGE_VECTORS = "passage_vectors"  # a collection's: the multivector its passages carry (store.WINDOWS)
CHUNKING = "chunking"          # {"threshold", "min_chunk_size", "max_chunk_size", "hierarchical"}
INGESTED_AT = "ingested_at"    # ISO 8601 UTC

KEYWORD_INDEXES = (BOOK_KEY, LEVEL, LANGUAGE, AUTHORS, FILE_PATH, PARENT_ID, FORMAT, SOURCE)
INTEGER_INDEXES = (CALIBRE_ID, SEQUENCE_INDEX, CHAPTER_INDEX, VERSION)
BOOL_INDEXES = (COMPLETE,)
# word-matched (Filter.text): lowercased, accents folded, so "austen" finds "Jane Austen"
TEXT_INDEXES = (AUTHOR,)
# What every search's filter names (services/query/search.py, search_filter): the engine checks `complete` at each point
# a search visits, and `level` there in a search of the highlights (on the candidates alone in one of the passages:
# candidate_filters), so their indexes stay in RAM where the others may be read through mmap (QDRANT_ON_DISK).
EVERY_SEARCH_FILTERS = (COMPLETE, LEVEL)
