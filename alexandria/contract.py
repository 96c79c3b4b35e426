"""The tool contract's numeric defaults and bounds, in one place.

The gateway's tool schemas (what an MCP client is told), the CLI's defaults and the services'
validation (what is really accepted) all read these, so they cannot drift apart: a value the
schema admits is a value the service takes. A service also clamps or defaults what internal gRPC
callers send (0 meaning "the default").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field

from alexandria.errors import InvalidArgument

Number = int | float


@dataclass(frozen=True)
class Bound:
    """One numeric parameter: its default and the values it accepts (an open end is itself refused)."""

    name: str
    default: Number
    low: Number
    high: Number
    low_open: bool = False
    high_open: bool = False
    unit: str = ""

    def field(self, description: str) -> Any:
        """The pydantic Field of a tool parameter: JSON Schema minimum/maximum (or exclusive ones)."""
        return Field(  # a bound given as None is no bound
            gt=self.low if self.low_open else None,
            ge=None if self.low_open else self.low,
            lt=self.high if self.high_open else None,
            le=None if self.high_open else self.high,
            description=description,
        )

    def accepts(self, value: Number) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def span(self) -> str:
        """`between 0 and 1 (both excluded)`, `from 10 to 9999 words`."""
        unit = f" {self.unit}" if self.unit else ""
        if self.low_open or self.high_open:
            excluded = {(True, True): "both", (True, False): f"{self.low}", (False, True): f"{self.high}"}
            return f"between {self.low} and {self.high}{unit} ({excluded[self.low_open, self.high_open]} excluded)"
        return f"from {self.low} to {self.high}{unit}"

    def check(self, value: Number, why: str = "") -> Number:
        """`value`, or InvalidArgument naming the parameter, what it accepts and its default."""
        if not self.accepts(value):
            reason = f": {why}" if why else ""
            raise InvalidArgument(f"{self.name} must be {self.span()}, got {value}{reason} (default {self.default}).")
        return value

    def clamp(self, requested: int) -> int:
        """A result limit from an internal caller: 0 is the default, anything else held within the bounds."""
        if requested == 0:
            return int(self.default)
        return int(max(self.low, min(requested, self.high)))


# alexandria_query
QUERY_LIMIT = Bound("limit", 5, 1, 20)
QUERY_THRESHOLD = Bound("threshold", 0.5, 0.0, 1.0)
# One to three sentences are asked for; a page is not a hypothetical passage (and would outweigh the question).
HYPOTHETICAL_PASSAGE_MAX_CHARS = 1000
# alexandria_search, alexandria_ingest_preview, alexandria_batch_ingest
BOOK_SEARCH_LIMIT = Bound("limit", 20, 1, 100)
PREVIEW_LIMIT = Bound("limit", 20, 1, 50)
BATCH_LIMIT = Bound("limit", 10, 1, 50)
# Chunking (ingest, batch ingest, ingest file, both chunking tests). A threshold is a cosine similarity:
# 0 or 1 would make every or no place a break. Shorter chunks than 10 words are fragments that match
# anything; a chunk is made of whole sentences, and ingest cuts none longer than 120 words; a parent already
# holds a whole chapter, so 10,000 words is plenty. max_chunk_size must also exceed min_chunk_size.
CHUNK_THRESHOLD = Bound("threshold", 0.55, 0.0, 1.0, low_open=True, high_open=True)
MIN_CHUNK_SIZE = Bound("min_chunk_size", 200, 10, 9_999, unit="words")
MAX_CHUNK_SIZE = Bound("max_chunk_size", 1200, 120, 10_000, unit="words")
