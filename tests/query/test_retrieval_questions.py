"""The retrieval question set is sound: enough questions over several books, each phrase in its book.

The phrase is checked against the text ingest extracts from the book's file (the text chunks are
cut from), with the same case-and-spacing comparison bench/retrieval.py scores with.
"""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from services.ingest.extract import extract_book

ROOT = Path(__file__).resolve().parents[2]


def _load_bench():
    spec = importlib.util.spec_from_file_location("bench_retrieval", ROOT / "bench" / "retrieval.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


bench = _load_bench()
QUESTIONS = bench.load_questions()


@cache
def _book_text(path: Path) -> str:
    return "\n".join(chapter.text for chapter in extract_book(path).chapters)


def test_the_question_set_is_large_and_varied() -> None:
    assert len(QUESTIONS) >= 40
    books = Counter(q.book for q in QUESTIONS)
    assert len(books) >= 5 and max(books.values()) <= len(QUESTIONS) // 3
    kinds = Counter(q.kind for q in QUESTIONS)
    assert set(kinds) == {"name", "paraphrase"} and kinds["name"] >= 10
    assert len({q.question for q in QUESTIONS}) == len(QUESTIONS)


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: f"{q.book}:{q.phrase[:30]}")
def test_each_phrase_is_in_its_book(question, shared_corpus: Path) -> None:
    path = bench.book_file(shared_corpus, question.book)
    assert bench.contains_phrase(_book_text(path), question.phrase), f"{question.phrase!r} not in {path.name}"
