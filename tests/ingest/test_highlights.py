"""Which highlights a sync writes and deletes, and the points it writes for them."""

from __future__ import annotations

import numpy as np

from alexandria.store import schema as f
from alexandria.store.records import BookRecord, ChunkRecord
from alexandria.v1 import catalog_pb2
from services.ingest.highlights import (
    HighlightPlan,
    highlight_point_id,
    highlight_points,
    plan_highlights,
    viewer_location,
)
from services.query.links import passage_link

BOOK = BookRecord("uuid-1", "Emma", "Jane Austen", file_path="/lib/Jane Austen/Emma (1)/Emma - Jane Austen.epub",
                  format="EPUB", calibre_id=1, version=7, complete=True)
HIGHLIGHT = catalog_pb2.Highlight(uuid="h1", format="EPUB", text="Emma Woodhouse, handsome, clever, and rich",
                                  notes="the famous opening", chapter_titles=["Volume I", "Chapter I"],
                                  start_cfi="/4/2/2:0", spine_index=2, timestamp="2026-11-26T10:00:00.000Z")


def listed(book_key: str, *highlights: catalog_pb2.Highlight) -> catalog_pb2.LibraryFile:
    return catalog_pb2.LibraryFile(uuid=book_key, highlights=highlights)


def test_a_new_highlight_is_added_and_one_held_is_kept() -> None:
    plan = plan_highlights([listed("uuid-1", HIGHLIGHT)], {"uuid-1": BOOK}, held=[])
    assert list(plan.add) == [highlight_point_id(BOOK, HIGHLIGHT)] and plan.remove == []
    again = plan_highlights([listed("uuid-1", HIGHLIGHT)], {"uuid-1": BOOK}, held=list(plan.add))
    assert again.add == {} and again.remove == []


def test_a_highlight_edited_in_calibre_or_whose_book_was_ingested_anew_is_written_anew() -> None:
    held = [highlight_point_id(BOOK, HIGHLIGHT)]
    edited = catalog_pb2.Highlight()
    edited.CopyFrom(HIGHLIGHT)
    edited.notes, edited.timestamp = "a note changed", "2026-11-27T09:00:00.000Z"
    plan = plan_highlights([listed("uuid-1", edited)], {"uuid-1": BOOK}, held)
    assert list(plan.add) == [highlight_point_id(BOOK, edited)] and plan.remove == held
    newer = BookRecord("uuid-1", "Emma", "Jane Austen", version=8, complete=True)
    plan = plan_highlights([listed("uuid-1", HIGHLIGHT)], {"uuid-1": newer}, held)
    assert list(plan.add) == [highlight_point_id(newer, HIGHLIGHT)] and plan.remove == held


def test_highlights_deleted_in_calibre_go_and_those_of_books_not_held_wait_for_their_book() -> None:
    held = [highlight_point_id(BOOK, HIGHLIGHT)]
    plan = plan_highlights([listed("uuid-1"), listed("uuid-2", HIGHLIGHT)], {"uuid-1": BOOK}, held)
    assert plan.add == {} and plan.remove == held


def test_a_highlight_point_carries_its_book_its_note_and_opens_the_viewer_at_it() -> None:
    plan = HighlightPlan(add={"point-1": (BOOK, HIGHLIGHT)})
    (point,) = highlight_points(plan, [np.array([[3.0, 4.0]], dtype=np.float32)])
    np.testing.assert_allclose(point.dense, [0.6, 0.8])
    assert point.windows is not None and point.windows.shape == (1, 2) and point.sparse is not None
    chunk = ChunkRecord.from_payload(point.payload)
    assert chunk.level == f.Level.HIGHLIGHT and chunk.book.book_key == "uuid-1" and chunk.book.version == 7
    assert (chunk.text, chunk.note, chunk.chapter_title) == (HIGHLIGHT.text, "the famous opening", "Volume I / Chapter I")
    assert chunk.open_at == viewer_location(HIGHLIGHT) == "epubcfi(/6/4/2/2:0)"  # spine item 2 is the CFI's step /6
    assert passage_link(chunk, {}) == (
        "calibre://view-book/_hex_-6c6962/1/EPUB?open_at=epubcfi%2528%252F6%252F4%252F2%252F2%253A0%2529")
