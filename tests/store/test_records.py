"""The store's records convert to payloads and back without losing or inventing anything."""

from __future__ import annotations

import pytest

from alexandria.errors import FailedPrecondition
from alexandria.store import schema as f
from alexandria.store.records import BookRecord, ChunkRecord, CollectionModel

BOOK = BookRecord(
    book_key="uuid-1", title="Persuasion", author="Jane Austen", authors=("Jane Austen",), language="eng",
    file_path="/library/Persuasion.pdf", format="PDF", calibre_id=4, model="all-MiniLM-L6-v2", dimension=384,
    chunking={"threshold": 0.55, "min_chunk_size": 200, "max_chunk_size": 1200, "hierarchical": True},
    ingested_at="2026-11-25T01:00:00+00:00",
)


def test_a_child_chunk_round_trips_with_its_pages_and_parent() -> None:
    child = ChunkRecord(book=BOOK, level=f.Level.CHILD, text="Anne Elliot walked on.", chapter_title="Chapter 3",
                        chapter_index=3, position=41, word_count=4, sibling_count=9, sequence_index=2,
                        parent_id="parent-3", page_start=30, page_end=31)
    payload = child.to_payload()
    assert payload[f.COMPLETE] is False and payload[f.CALIBRE_ID] == 4 and payload[f.PAGE_END] == 31
    assert ChunkRecord.from_payload(payload) == child


def test_a_parent_carries_no_position_among_siblings_and_a_local_book_no_calibre_id() -> None:
    local = BookRecord(book_key="sha256:ab", title="Notes", author="")
    parent = ChunkRecord(book=local, level=f.Level.PARENT, text="A whole chapter.", chapter_title="One",
                         word_count=3, sibling_count=5)
    payload = parent.to_payload()
    assert not {f.SEQUENCE_INDEX, f.PARENT_ID, f.PAGE_START, f.CALIBRE_ID} & payload.keys()
    assert ChunkRecord.from_payload(payload) == parent


def test_a_payload_missing_fields_reads_with_the_defaults() -> None:
    chunk = ChunkRecord.from_payload({f.BOOK_KEY: "k", f.TEXT: "three words here", f.LEVEL: "flat"})
    assert (chunk.book.title, chunk.book.calibre_id, chunk.book.complete) == ("", None, False)
    assert (chunk.word_count, chunk.parent_id, chunk.page_start) == (3, None, None)


def test_a_collection_refuses_another_model_naming_both() -> None:
    recorded = CollectionModel("all-MiniLM-L6-v2", 384)
    recorded.check("books", "all-MiniLM-L6-v2", 384)
    assert CollectionModel(None, 384).matches("anything", 384)
    with pytest.raises(FailedPrecondition) as refused:
        recorded.check("books", "multilingual-e5-small", 384)
    message = refused.value.message
    assert "'books'" in message and "all-MiniLM-L6-v2 (384 dims)" in message
    assert "multilingual-e5-small (384 dims)" in message
