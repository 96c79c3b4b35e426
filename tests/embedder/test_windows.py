"""Passage windows: cut in the model's own tokens, each fitting the model with its header, and embedded."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from embedder.support import RunningEmbedder
from services.embedder.model import EmbeddingModel
from services.embedder.windows import TokenizedText, window_spans, window_texts

HEADER = "Pride and Prejudice, Chapter 1\n"
# Numbered, so that every run of it is found once in it.
PASSAGE = " ".join(
    f"On the {n}th evening, a single man in possession of a good fortune was thought to be in want of a wife."
    for n in range(1, 40)
)


def test_windows_take_whole_words_up_to_the_budget_and_share_the_overlap() -> None:
    ten_words = TokenizedText([(2 * n, 2 * n + 1) for n in range(10)], [3] * 10)
    assert window_spans(ten_words, budget=9, overlap=3) == [(0, 3), (2, 5), (4, 7), (6, 9), (8, 10)]
    assert window_spans(ten_words, budget=9, overlap=0) == [(0, 3), (3, 6), (6, 9), (9, 10)]
    assert window_spans(ten_words, budget=30, overlap=3) == [(0, 10)]  # it fits: one window


def test_a_word_longer_than_the_budget_is_a_window_of_its_own_and_the_cutting_ends() -> None:
    assert window_spans(TokenizedText([(0, 1), (2, 3), (4, 5)], [20, 1, 1]), budget=9, overlap=3) == [(0, 1), (1, 3)]


def test_window_texts_keep_the_passages_own_spacing_under_the_header() -> None:
    text = "One  two,\nthree four"
    words = TokenizedText([(0, 3), (5, 9), (10, 15), (16, 20)], [1, 2, 1, 1])
    assert window_texts("H: ", text, words, budget=3, overlap=1) == ["H: One  two,", "H: two,\nthree", "H: three four"]
    assert window_texts("H: ", "", TokenizedText([], []), budget=3, overlap=1) == ["H: "]


def test_the_models_windows_fit_it_start_on_words_and_cover_the_passage(embedding_model: EmbeddingModel) -> None:
    windows = embedding_model.windows(HEADER, PASSAGE, overlap=64)
    tokenizer = embedding_model.sentence_transformer.tokenizer
    lengths = [len(tokenizer(text)["input_ids"]) for text in windows]
    assert len(windows) > 1 and max(lengths) <= embedding_model.max_seq_length
    assert all(text.startswith(HEADER) for text in windows)
    bodies = [text.removeprefix(HEADER) for text in windows]
    assert all(body in PASSAGE for body in bodies)  # runs of the passage, never beyond it
    assert PASSAGE.startswith(bodies[0]) and PASSAGE.endswith(bodies[-1])
    for before, after in itertools.pairwise(bodies):
        assert after.split()[0] in before.split()  # each window starts inside the last: they overlap
        shared = PASSAGE.index(before) + len(before) - PASSAGE.index(after)
        assert len(tokenizer.tokenize(PASSAGE[PASSAGE.index(after) :][:shared])) >= 64


def test_a_short_passage_is_one_window(embedding_model: EmbeddingModel) -> None:
    assert embedding_model.windows(HEADER, "Mr. Darcy danced only once.", overlap=64) == [
        HEADER + "Mr. Darcy danced only once."
    ]


@pytest.mark.asyncio
async def test_embed_windows_returns_each_passages_window_vectors(
    embedder: RunningEmbedder, embedding_model: EmbeddingModel
) -> None:
    passages = [(HEADER, PASSAGE), ("Emma, Volume I\n", "Emma Woodhouse, handsome, clever, and rich."), (HEADER, "")]
    vectors = await embedder.client.embed_windows(passages, overlap_tokens=64)
    answered: list[int] = []
    await embedder.client.embed_windows(passages * 30, overlap_tokens=64, on_embedded=answered.append)
    assert sorted(answered) == [26, 32, 32]  # each slice as it is answered
    windows = [embedding_model.windows(header, text, overlap=64) for header, text in passages]
    assert [len(v) for v in vectors] == [len(w) for w in windows] and len(windows[0]) > 1
    expected = embedding_model.sentence_transformer.encode(
        [text for passage in windows for text in passage], normalize_embeddings=True, show_progress_bar=False
    )
    np.testing.assert_allclose(np.concatenate(vectors), expected, atol=1e-5)
