"""Parameters several tools share, with their schemas (bounds from alexandria.contract)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from alexandria import book_formats
from alexandria.contract import CHUNK_THRESHOLD, MAX_CHUNK_SIZE, MIN_CHUNK_SIZE
from alexandria.v1 import common_pb2, ingest_pb2

BookId = Annotated[
    int,
    Field(ge=1, description="Calibre book id: the `id` from alexandria_search or alexandria_ingest_preview."),
]
Collection = Annotated[
    str | None, Field(min_length=1, description="Qdrant collection. Default: the server's QDRANT_COLLECTION.")
]
FormatPreference = Annotated[
    Literal[book_formats.INGEST_PREFERENCE_WORDS],
    Field(description="Which file to read when the book has several formats."),
]
DEFAULT_FORMAT_PREFERENCE = book_formats.DEFAULT_PREFERENCE.value
Threshold = Annotated[
    float,
    CHUNK_THRESHOLD.field(
        "Chunking threshold (cosine similarity): a new chunk starts where neighbouring sentences are "
        "less similar than this. Higher gives more, smaller chunks."
    ),
]
Language = Annotated[
    str | None,
    Field(
        min_length=1,
        description="Only books in this language: an ISO 639 code or the language's English name "
        "('eng', 'en' and 'English' alike).",
    ),
]
MinChunkSize = Annotated[int, MIN_CHUNK_SIZE.field("Minimum words per chunk.")]
MaxChunkSize = Annotated[int, MAX_CHUNK_SIZE.field("Maximum words per chunk (above min_chunk_size).")]
Hierarchical = Annotated[
    bool,
    Field(
        description="Two-level chunking: chapter-level parents plus semantic child chunks. Needed for "
        "alexandria_query's contextual and comprehensive context modes."
    ),
]
FilePath = Annotated[
    str,
    Field(
        min_length=1,
        description="Absolute path of an EPUB, PDF, TXT, Markdown or HTML file in a local-ingest folder "
        "(see alexandria_browse_local).",
    ),
]


def book_source(book_id: int, format_preference: str) -> ingest_pb2.BookSource:
    """A Calibre book for the chunking tests, and the file of it to read."""
    return ingest_pb2.BookSource(
        book_id=book_id, format_preference=book_formats.FormatPreference(format_preference).to_proto()
    )


def ingest_options(
    collection: str | None,
    format_preference: str | None,  # None for a local file: it has one format
    hierarchical: bool,
    threshold: float,
    min_chunk_size: int,
    max_chunk_size: int,
) -> ingest_pb2.IngestOptions:
    return ingest_pb2.IngestOptions(
        collection=collection or "",
        format_preference=book_formats.FormatPreference(format_preference).to_proto() if format_preference else None,
        hierarchical=hierarchical,
        chunking=chunking_params(threshold, min_chunk_size, max_chunk_size),
    )


def chunking_params(threshold: float, min_chunk_size: int, max_chunk_size: int) -> common_pb2.ChunkingParams:
    return common_pb2.ChunkingParams(
        threshold=threshold, min_chunk_size=min_chunk_size, max_chunk_size=max_chunk_size
    )
