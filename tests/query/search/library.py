"""The small library the search tests run on (the `store` and `encoder` fixtures of conftest.py hold it), and
the helpers that search it."""

from __future__ import annotations

import numpy as np

from alexandria.relevance import RELEVANCE_AT_HALF
from query.fakes import FakeEncoder, RecordingStore, unit
from services.query.outcome import SearchOutcome
from services.query.ranking import calibrate
from services.query.search import Searcher, SearchQuery

COLLECTION = "books"
QUESTION = "what does Mr. Bennet think of his daughters"
NAME_QUERY = "Netherfield"
BUDGET = 80_000
# Cosines to QUESTION's vector, by sequence index of the five children of chapter 1.
CHILD_COSINES = [0.3, 0.2, 0.9, 0.7, 0.1]


def vector_with_cosine(cosine: float) -> np.ndarray:
    return unit(cosine, float(np.sqrt(1 - cosine**2)), 0, 0)


def child_text(index: int) -> str:
    extra = " They drove to Netherfield in the rain." if index == 4 else ""
    return f"Passage {index} of the first chapter, with words of its own, number {index}.{extra}"


FILLER = " ".join(["Long chapter prose goes on here without end."] * 200)



def search_query(text: str = QUESTION, **changes) -> SearchQuery:
    return SearchQuery(text=text, collection=COLLECTION, **changes)


async def run_search(
    store: RecordingStore, encoder: FakeEncoder, query: SearchQuery, budget: int = BUDGET, reserved: int = 0
) -> SearchOutcome:
    """One search by a searcher that has met the collection before (as the query service's has): its common words are
    known, so the store calls recorded are the search's own."""
    searcher = Searcher(store, encoder)
    if store.collection_info(query.collection) is not None:
        searcher.common_words.common(query.collection)
    store.calls.clear()
    store.asked.clear()
    return await searcher.search(query, budget, reserved)


def semantic_score(cosine: float) -> float:
    """A semantic-mode score for a chunk without sentence vectors (floor 0): its cosine, calibrated."""
    return round(float(calibrate(np.array([cosine]), RELEVANCE_AT_HALF)[0]), 4)

