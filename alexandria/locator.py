"""Where a chunk sits in its book, what a citation shows: ingest records it with each chunk, and a search
returns it with each passage (proto `Locator`, common to both services)."""

from __future__ import annotations

from dataclasses import dataclass

from alexandria.store.schema import TextSource
from alexandria.v1 import common_pb2


@dataclass(frozen=True)
class ChunkLocator:
    """Where a chunk sits in its book: what a citation shows (proto `Locator`)."""

    chapter_title: str
    chapter_index: int
    position: int  # 0-based order of the chunk among the book's chunks of its kind
    page_start: int | None = None
    page_end: int | None = None
    text_source: TextSource = TextSource.TEXT

    def to_proto(self) -> common_pb2.Locator:
        return common_pb2.Locator(
            chapter_title=self.chapter_title,
            chapter_index=self.chapter_index,
            position=self.position,
            page_start=self.page_start,
            page_end=self.page_end,
            text_source=self.text_source,
        )
