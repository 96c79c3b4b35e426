"""The search tests' store, holding library.py's chapter, and the encoder that knows their questions."""

from __future__ import annotations

import pytest

from alexandria.store import schema as f
from query.fakes import FakeEncoder, RecordingStore, embedded_store, point, unit
from query.search.library import (
    CHILD_COSINES,
    COLLECTION,
    FILLER,
    NAME_QUERY,
    QUESTION,
    child_text,
    vector_with_cosine,
)


@pytest.fixture
def store(tmp_path) -> RecordingStore:
    s = embedded_store(tmp_path)
    s.add_collection(COLLECTION)
    s.add_collection("empty")
    children = [
        point(f"c{i}", child_text(i), vector_with_cosine(c), sequence_index=i)
        for i, c in enumerate(CHILD_COSINES)
    ]
    chapter = FILLER + "\n\n" + "\n\n".join(p.payload[f.TEXT] for p in children) + "\n\n" + FILLER
    s.upsert(COLLECTION, [
        *children,
        # A chapter matches the question best, but chapters are context, never hits.
        point("chapter-1", chapter, unit(1, 0, 0, 0), level=f.Level.PARENT, parent_id=None),
        # A book being written is invisible even when it matches perfectly.
        point("half", "Half-written book about daughters.", unit(1, 0, 0, 0), complete=False, parent_id="p-half",
              book_title="Unfinished"),
        point("flat", "A flat chunk of a book without chapters.", vector_with_cosine(0.6), level=f.Level.FLAT,
              parent_id=None, book_title="Emma", calibre_id=2),
    ])
    s.calls.clear()
    yield s
    s.store.close()


@pytest.fixture
def encoder() -> FakeEncoder:
    return FakeEncoder({QUESTION: unit(1, 0, 0, 0), NAME_QUERY: unit(0, 0, 0, 1), "daughters": unit(1, 0, 0, 0)})

