"""The torch model's lane as the server builds it (tokenized ahead, token-budget batches, several workers)
gives every text the vector it gets alone."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from services.embedder.batcher import MicroBatcher
from services.embedder.model import TOKENIZE_CHUNK, EmbeddingModel, Tokens
from services.embedder.server import CPU_TOKEN_BUDGET

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SENTENCE = "Elizabeth walked three miles through the mud to Netherfield, her petticoat six inches deep."


def mixed_lengths() -> list[str]:
    """Queries, sentences, passages that fill a window, passages past the model's length, an empty text and
    text in other scripts, shuffled so that a request's order is not its length order."""
    texts = ["", "Who?", "Darcy", "Où est la gare ?", "東京の天気はどうですか", "Pemberley " * 300]
    texts += [" ".join([SENTENCE] * repeat) for repeat in range(1, 14)]
    texts += [f"Question {i}: why did {name} refuse the first proposal?" for i, name in
              enumerate(["Elizabeth", "Jane", "Charlotte", "Lydia", "Kitty", "Mary"])]
    return [texts[i] for i in np.random.default_rng(5).permutation(len(texts))]


def test_vectors_batched_by_token_budget_match_each_text_encoded_alone(embedding_model: EmbeddingModel) -> None:
    texts = mixed_lengths()

    async def through_lane() -> tuple[np.ndarray, int]:
        lane: MicroBatcher[Tokens] = MicroBatcher(
            embedding_model.encode_tokens, prepare=embedding_model.tokenize, token_budget=CPU_TOKEN_BUDGET // 8,
            dimension=embedding_model.dimension, max_batch=8, wait_s=0.0, queue_limit=1000, workers=2,
        )
        lane.start()
        try:
            whole, *singles = await asyncio.gather(lane.embed(texts), *(lane.embed([text]) for text in texts[:4]))
            for single, text in zip(singles, texts[:4], strict=True):
                np.testing.assert_allclose(single.vectors[0], whole.vectors[texts.index(text)], atol=1e-5)
            return whole.vectors, whole.truncated
        finally:
            await lane.close()

    batched, truncated = asyncio.run(through_lane())
    alone = np.concatenate([
        embedding_model.sentence_transformer.encode([text], normalize_embeddings=True, convert_to_numpy=True)
        for text in texts
    ])
    cosines = np.einsum("ij,ij->i", batched, alone)
    assert cosines.min() >= 0.9999, [(text[:30], round(float(c), 6)) for text, c in zip(texts, cosines, strict=True)]
    tokenizer = embedding_model.sentence_transformer.tokenizer
    assert truncated == sum(len(tokenizer(text)["input_ids"]) > embedding_model.max_seq_length for text in texts)


def test_a_request_tokenized_in_chunks_gives_each_text_its_own_tokens(embedding_model: EmbeddingModel) -> None:
    texts = mixed_lengths() * (TOKENIZE_CHUNK // 10)  # past one chunk, its chunks of different widths
    assert len(texts) > TOKENIZE_CHUNK
    together = embedding_model.tokenize(texts)
    for text, tokens, length in zip(texts, together.items, together.lengths, strict=True):
        alone = embedding_model.sentence_transformer.tokenizer(
            text, truncation=True, max_length=embedding_model.max_seq_length)["input_ids"]
        assert tokens.features["input_ids"].tolist() == alone
        assert length == len(alone)
