"""The embedder's Rerank RPC over a real cross-encoder.

No reranker model ships in a package here, so the tests build a small one (`tiny_cross_encoder`,
tests/conftest.py) and load it back by path, as EMBEDDER_RERANKER_MODEL would. Its scores mean
nothing about relevance; what is checked is that the service returns exactly what that model
computes, in the request's order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from sentence_transformers import CrossEncoder

from alexandria.errors import FailedPrecondition, InvalidArgument
from services.embedder.model_folder import resolve_model_source
from services.embedder.reranker import load_reranker

QUERY = "Why does Elizabeth refuse Mr. Darcy?"
PASSAGES = [
    "She refused him because of his pride and his part in separating Jane and Bingley.",
    "The weather at Netherfield was fine for the ball.",
    "Mr. Collins read from Fordyce's Sermons.",
    "",
]


def expected_scores(folder: Path) -> np.ndarray:
    model = CrossEncoder(str(folder), device="cpu", local_files_only=True)
    return model.predict([(QUERY, p) for p in PASSAGES], activation_fn=torch.nn.Sigmoid())


async def test_rerank_returns_the_cross_encoders_scores_in_request_order(start_embedder, tiny_cross_encoder) -> None:
    embedder = await start_embedder(embedder_reranker_model=str(tiny_cross_encoder))
    info = await embedder.client.wait_until_ready()
    assert info.reranker == "tiny-cross-encoder"
    scores = await embedder.client.rerank(QUERY, PASSAGES)
    np.testing.assert_allclose(scores, expected_scores(tiny_cross_encoder), rtol=1e-5, atol=1e-6)
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert len(set(np.round(scores, 6))) > 1  # a real model tells the passages apart
    reversed_scores = await embedder.client.rerank(QUERY, PASSAGES[::-1])
    np.testing.assert_allclose(reversed_scores, scores[::-1], rtol=1e-5, atol=1e-6)


async def test_without_a_reranker_rerank_says_how_to_configure_one(embedder) -> None:
    info = await embedder.client.wait_until_ready()
    assert info.reranker == ""
    with pytest.raises(FailedPrecondition, match="EMBEDDER_RERANKER_MODEL"):
        await embedder.client.rerank(QUERY, PASSAGES)


async def test_rerank_refuses_an_empty_query(start_embedder, tiny_cross_encoder) -> None:
    embedder = await start_embedder(embedder_reranker_model=str(tiny_cross_encoder))
    await embedder.client.wait_until_ready()
    with pytest.raises(InvalidArgument, match="needs a query"):
        await embedder.client.rerank("  ", PASSAGES)


def test_a_missing_or_multi_label_reranker_is_refused_naming_the_variable(tmp_path, tiny_cross_encoder) -> None:
    with pytest.raises(FailedPrecondition, match="EMBEDDER_RERANKER_MODEL"):
        resolve_model_source(str(tmp_path / "absent"), "EMBEDDER_RERANKER_MODEL")
    two_labels = tmp_path / "two-labels"
    model = transformers.BertForSequenceClassification.from_pretrained(tiny_cross_encoder, num_labels=2,
                                                                        ignore_mismatched_sizes=True)
    model.save_pretrained(two_labels)
    transformers.AutoTokenizer.from_pretrained(tiny_cross_encoder).save_pretrained(two_labels)
    with pytest.raises(FailedPrecondition, match="one"):
        load_reranker(resolve_model_source(str(two_labels)), "cpu")
