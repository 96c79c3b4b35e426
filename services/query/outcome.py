"""What a search returns: passages with their citations, chapter windows and neighbouring chunks.

The types the query domain's stages (search, ranking, context, budget) pass along, and the
servicer turns into protos.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from alexandria.locator import ChunkLocator


class ContextMode(StrEnum):
    PRECISE = "precise"              # the matched chunks only
    CONTEXTUAL = "contextual"        # plus a window of each result's chapter
    COMPREHENSIVE = "comprehensive"  # plus the previous and next chunk of each result


class SearchMode(StrEnum):
    HYBRID = "hybrid"
    SEMANTIC = "semantic"
    LEXICAL = "lexical"


class SearchIn(StrEnum):
    """What a search looks in."""

    PASSAGES = "passages"      # the books' text
    HIGHLIGHTS = "highlights"  # what the reader highlighted in Calibre's viewer
    BOTH = "both"


@dataclass(frozen=True)
class Passage:
    """A matched chunk: what a citation needs, and where it sits in its chapter."""

    chunk_id: str
    score: float
    text: str
    book_title: str
    author: str
    section_name: str
    locator: ChunkLocator
    book_key: str
    calibre_id: int | None
    file_path: str
    language: str
    parent_id: str
    sequence_index: int
    sibling_count: int
    matched_lexically: bool
    link: str = ""  # opens the book at the passage (services/query/links.py)
    kind: str = "passage"  # or "highlight"
    note: str = ""  # a highlight's note


@dataclass(frozen=True)
class ChapterContext:
    """A window of one chapter around the results it holds."""

    parent_id: str
    book_title: str
    author: str
    section_name: str
    text: str
    trimmed: bool
    chapter_words: int
    result_indices: tuple[int, ...]


@dataclass(frozen=True)
class NeighbourChunk:
    chunk_id: str
    result_index: int
    relation: str  # "previous" or "next"
    sequence_index: int
    section_name: str
    text: str


@dataclass(frozen=True)
class HierarchyStats:
    results: int
    parents_fetched: int
    results_sharing_a_parent: int
    siblings_fetched: int


@dataclass(frozen=True)
class SearchOutcome:
    query: str
    context_mode: ContextMode
    search_mode: SearchMode
    results: tuple[Passage, ...]
    parents: tuple[ChapterContext, ...] = ()
    siblings: tuple[NeighbourChunk, ...] = ()
    hierarchy_stats: HierarchyStats | None = None
    trimmed: bool = False
    notice: str = ""
