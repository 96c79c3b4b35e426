"""The words a search's lexical stage skips: those in more than half of a sample of the collection's passages."""

from __future__ import annotations

import pytest

from alexandria.store import SparseVector
from alexandria.store.lexical import encode_query
from query.fakes import FakeEncoder, RecordingStore, embedded_store, name_of, point, unit
from services.query.common_words import MIN_SAMPLE, SAMPLE_KEPT_S, SAMPLE_PASSAGES, CommonWords
from services.query.search import Searcher, SearchMode, SearchQuery

COLLECTION = "books"
# 120 passages: "the" in all, "sea" in 70, "ship" in 40, "whale" in one.
TEXTS = ["the whale and the sea", *["the sea"] * 69, *["the ship sails"] * 40, *["the end"] * 10]


def word(text: str) -> int:
    (index,) = encode_query(text).indices
    return index


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def passages(texts: list[str], prefix: str = "p") -> list:
    return [point(f"{prefix}{i}", text, unit(1, 0, 0, 0), sequence_index=i) for i, text in enumerate(texts)]


@pytest.fixture
def store(tmp_path) -> RecordingStore:
    s = embedded_store(tmp_path)
    s.add_collection(COLLECTION)
    s.upsert(COLLECTION, passages(TEXTS))
    s.calls.clear()
    yield s
    s.store.close()


def test_the_words_in_more_than_half_the_passages_are_common(store) -> None:
    assert len(TEXTS) <= SAMPLE_PASSAGES
    assert CommonWords(store).common(COLLECTION) == pytest.approx({word("the"): 1.0, word("sea"): 70 / 120})


def test_a_search_leaves_the_common_words_out_or_keeps_the_least_common(store) -> None:
    common = CommonWords(store)
    assert common.without_common(COLLECTION, encode_query("the ship and the sea")) == SparseVector(
        indices=[word("ship"), word("and")], values=[1.0, 1.0])
    assert common.without_common(COLLECTION, encode_query("the sea")).indices == [word("sea")]
    narwhal = encode_query("narwhal")
    assert common.without_common(COLLECTION, narwhal) is narwhal
    assert common.without_common(COLLECTION, SparseVector(indices=[], values=[])).indices == []


def test_a_small_collection_has_no_common_words(tmp_path) -> None:
    small = embedded_store(tmp_path)
    small.add_collection(COLLECTION)
    small.upsert(COLLECTION, passages(["the sea"] * (MIN_SAMPLE - 1)))
    assert CommonWords(small).common(COLLECTION) == {}
    small.store.close()


def test_the_sample_is_drawn_once_and_again_when_it_is_kept_no_longer(store) -> None:
    clock = Clock()
    common = CommonWords(store, clock)
    assert word("sea") in common.common(COLLECTION)
    clock.now = SAMPLE_KEPT_S - 1
    store.upsert(COLLECTION, passages(["the end"] * 100, prefix="q"))
    assert word("sea") in common.common(COLLECTION) and store.calls == ["scroll", "upsert"]

    clock.now = SAMPLE_KEPT_S + 1
    assert common.common(COLLECTION) == pytest.approx({word("the"): 1.0})  # "sea": 70 of 220, "end": 110
    assert store.calls == ["scroll", "upsert", "scroll"]


@pytest.mark.asyncio
async def test_a_search_of_common_words_still_answers(store) -> None:
    searcher = Searcher(store, FakeEncoder({"the sea": unit(1, 0, 0, 0)}))
    outcome = await searcher.search(
        SearchQuery("the sea", COLLECTION, search_mode=SearchMode.LEXICAL, threshold=0.0, limit=20), 80_000)
    assert {name_of(p.chunk_id) for p in outcome.results} <= {f"p{i}" for i in range(70)}  # those with "sea"
    assert len(outcome.results) == 20
