"""The words a search's lexical stage skips: those in more than half the passages, by the engine's own IDF."""

from __future__ import annotations

import math

import pytest

from alexandria.store import SparseVector
from alexandria.store.lexical import encode_query
from query.fakes import FakeEncoder, RecordingStore, embedded_store, name_of, point, unit
from services.query.common_words import COMMON_IDF, IDF_KEPT_S, CommonWords
from services.query.search import Searcher, SearchMode, SearchQuery

COLLECTION = "books"
# Ten passages: "the" in all ten, "sea" in six, "ship" in three, "whale" in one.
TEXTS = [
    "the whale and the sea",
    *["the sea is grey"] * 5,
    *["the ship sails"] * 3,
    "the end",
]


def bm25_idf(holding: int, passages: int = len(TEXTS)) -> float:
    return math.log(1 + (passages - holding + 0.5) / (holding + 0.5))


def word(text: str) -> int:
    (index,) = encode_query(text).indices
    return index


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path) -> RecordingStore:
    s = embedded_store(tmp_path)
    s.add_collection(COLLECTION)
    s.upsert(COLLECTION, [point(f"p{i}", text, unit(1, 0, 0, 0), sequence_index=i) for i, text in enumerate(TEXTS)])
    s.calls.clear()
    yield s
    s.store.close()


def test_a_words_idf_is_the_engines(store) -> None:
    common = CommonWords(store)
    for text, holding in (("the", 10), ("sea", 6), ("ship", 3), ("whale", 1)):
        assert common.idf(COLLECTION, word(text)) == pytest.approx(bm25_idf(holding), rel=1e-3), text
    assert common.idf(COLLECTION, word("narwhal")) == math.inf


def test_the_words_in_more_than_half_the_passages_are_left_out(store) -> None:
    common = CommonWords(store)
    assert bm25_idf(6) < COMMON_IDF < bm25_idf(3)
    searched = common.without_common(COLLECTION, encode_query("the ship and the sea"))
    assert searched == SparseVector(indices=[word("ship"), word("and")], values=[1.0, 1.0])
    # Only common words: the rarest of them is searched, so a lexical search still finds something.
    assert common.without_common(COLLECTION, encode_query("the sea")).indices == [word("sea")]
    assert common.without_common(COLLECTION, SparseVector(indices=[], values=[])).indices == []


def test_an_idf_is_read_once_and_again_after_it_is_kept_no_longer(store) -> None:
    clock = Clock()
    common = CommonWords(store, clock)
    common.without_common(COLLECTION, encode_query("the sea"))
    assert store.calls == ["query_sparse", "query_sparse"]
    clock.now = IDF_KEPT_S - 1
    common.without_common(COLLECTION, encode_query("the sea"))
    assert store.calls == ["query_sparse", "query_sparse"]

    # Ten passages without "sea" written meanwhile: read again once the kept IDF has aged, it follows them.
    store.upsert(COLLECTION, [point(f"q{i}", "the ship sails", unit(1, 0, 0, 0)) for i in range(10)])
    assert common.idf(COLLECTION, word("sea")) == pytest.approx(bm25_idf(6), rel=1e-3)
    clock.now = IDF_KEPT_S + 1
    assert common.idf(COLLECTION, word("sea")) == pytest.approx(bm25_idf(6, passages=20), rel=1e-3)
    assert store.calls.count("query_sparse") == 3


@pytest.mark.asyncio
async def test_a_search_of_common_words_still_answers(store) -> None:
    searcher = Searcher(store, FakeEncoder({"the sea": unit(1, 0, 0, 0)}))
    outcome = await searcher.search(
        SearchQuery("the sea", COLLECTION, search_mode=SearchMode.LEXICAL, threshold=0.0, limit=10), 80_000)
    assert {name_of(p.chunk_id) for p in outcome.results} == {f"p{i}" for i in range(6)}  # those with "sea"
