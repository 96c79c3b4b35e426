"""The reader's highlights: what they marked in Calibre's viewer, searchable beside the passages of their books.

Each highlight is one point of its book (level `highlight`), with the book's record, so that it is filtered,
versioned and removed with the book like its passages. It is embedded as a passage is (its windows, under the
book's title and its chapter), the reader's note after the highlighted text, so that a search finds it by
either. A sync brings them in step with the library: `plan_highlights` compares the highlights Calibre lists
(ListLibraryFiles carries them) with the ones the collection holds, by point id, which changes with the
highlight's edit time and with the version of its book; so a highlight changed in Calibre, or whose book was
ingested anew, is written anew and the old point deleted. Only books the collection holds whole get theirs.
A Calibre book ingested on its own gets its highlights right after it is written (`plan_for`): the catalog
hands them over with its file.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from alexandria.clients import EmbedderClient
from alexandria.store import Filter, Store, StoredPoint
from alexandria.store import schema as f
from alexandria.store.records import BookRecord, ChunkRecord, complete
from alexandria.v1 import catalog_pb2
from services.ingest.documents import window_header
from services.ingest.writer import POINT_NAMESPACE, UPSERT_BATCH, lexical_vector


def highlight_key(highlight: catalog_pb2.Highlight) -> str:
    """Which highlight, in which edit: a note changed in Calibre gives another key."""
    return f"{highlight.uuid}@{highlight.timestamp}"


def highlight_point_id(book: BookRecord, highlight: catalog_pb2.Highlight) -> str:
    return str(uuid.uuid5(POINT_NAMESPACE, f"{book.book_key}@{book.version}/highlight/{highlight_key(highlight)}"))


def viewer_location(highlight: catalog_pb2.Highlight) -> str:
    """Where Calibre's viewer opens at the highlight, as Calibre's own annotations browser opens it."""
    return f"epubcfi(/{2 * (highlight.spine_index + 1)}{highlight.start_cfi})" if highlight.start_cfi else ""


def embedded_text(highlight: catalog_pb2.Highlight) -> str:
    return f"{highlight.text}\n{highlight.notes}" if highlight.notes else highlight.text


@dataclass
class HighlightPlan:
    add: dict[str, tuple[BookRecord, catalog_pb2.Highlight]] = field(default_factory=dict)  # point id -> them
    remove: list[str] = field(default_factory=list)  # point ids


def plan_highlights(listed: Iterable[catalog_pb2.LibraryFile], books: dict[str, BookRecord],
                    held: Iterable[str]) -> HighlightPlan:
    """What to write and delete: `books` are the records of the listed books the collection holds whole (by
    book key), `held` the ids of the highlight points it holds."""
    wanted = {}
    for entry in listed:
        book = books.get(entry.uuid)
        if book is not None:
            for highlight in entry.highlights:
                wanted[highlight_point_id(book, highlight)] = (book, highlight)
    held = set(held)
    return HighlightPlan(add={point: found for point, found in wanted.items() if point not in held},
                         remove=sorted(held - wanted.keys()))


def highlight_points(plan: HighlightPlan, windows: list[np.ndarray]) -> list[StoredPoint]:
    """The points of the highlights `plan` adds, each with its window vectors (in the plan's order)."""
    points = []
    for (point, (book, highlight)), vectors in zip(plan.add.items(), windows, strict=True):
        record = ChunkRecord(
            book=book, level=f.Level.HIGHLIGHT, text=highlight.text, chapter_title=" / ".join(highlight.chapter_titles),
            word_count=len(highlight.text.split()), open_at=viewer_location(highlight), note=highlight.notes,
            highlight_format=highlight.format,
        )
        payload = {**record.to_payload(), f.HIGHLIGHT: highlight_key(highlight)}
        centroid = vectors.mean(axis=0)
        points.append(StoredPoint(point, centroid / np.linalg.norm(centroid),
                                  lexical_vector(f.Level.HIGHLIGHT, embedded_text(highlight)), payload, vectors))
    return points


class HighlightSync:
    """Brings one collection's highlights in step with the library's."""

    def __init__(self, store: Store, embedder: EmbedderClient, collection: str) -> None:
        self.store = store
        self.embedder = embedder
        self.collection = collection

    def plan(self, listed: list[catalog_pb2.LibraryFile]) -> HighlightPlan:
        if self.store.collection_info(self.collection) is None:
            return HighlightPlan()
        held = self.store.scroll(self.collection, Filter(must={f.LEVEL: f.Level.HIGHLIGHT.value}), limit=1_000_000)
        return plan_highlights(listed, self._books([entry.uuid for entry in listed if entry.highlights]),
                               [point.id for point in held])

    def plan_for(self, book: BookRecord, highlights: Sequence[catalog_pb2.Highlight]) -> HighlightPlan:
        """What to write of the highlights of one book just written whole (a new version: none of its own yet)."""
        written = dataclasses.replace(book, complete=True)
        return plan_highlights([catalog_pb2.LibraryFile(uuid=book.book_key, highlights=highlights)],
                               {book.book_key: written}, held=[])

    def _books(self, keys: list[str]) -> dict[str, BookRecord]:
        """The record of each of these books the collection holds whole (its newest version)."""
        books = {}
        for key in keys:
            points = self.store.scroll(self.collection, complete(**{f.BOOK_KEY: key, f.LEVEL: f.PASSAGE_LEVELS}), limit=1)
            if points:
                books[key] = BookRecord.from_payload(points[0].payload)
        return books

    async def apply(self, plan: HighlightPlan) -> None:
        """Write the new highlights, then delete the old: a changed one is never missing from a search."""
        if plan.add:
            windows = await self.embedder.embed_windows(
                [(window_header(book.title, " / ".join(highlight.chapter_titles)), embedded_text(highlight))
                 for book, highlight in plan.add.values()])
            points = highlight_points(plan, windows)
            for start in range(0, len(points), UPSERT_BATCH):
                await asyncio.to_thread(self.store.upsert, self.collection, points[start : start + UPSERT_BATCH])
        if plan.remove:
            await asyncio.to_thread(self.store.delete, self.collection,
                                    Filter(ids=tuple(plan.remove)))
