"""The lexical encoder: ingest and query must tokenise alike, today and after every upgrade."""

from __future__ import annotations

import pytest

from alexandria.store import lexical


def test_token_ids_are_pinned() -> None:
    # Stored vectors keep these ids forever: a change here silently breaks lexical search
    # over every collection already ingested, so it must be a deliberate, re-ingesting one.
    assert lexical.encode_query("whale").indices == [1156501721]


def test_query_gives_each_distinct_word_weight_one() -> None:
    query = lexical.encode_query("Whale WHALE whale ship")
    assert len(query.indices) == 2 and query.values == [1.0, 1.0]


def test_document_weights_grow_with_repetition() -> None:
    document = lexical.encode_document("whale whale ship")
    weights = dict(zip(document.indices, document.values, strict=True))
    assert (
        weights[lexical.encode_query("whale").indices[0]] > weights[lexical.encode_query("ship").indices[0]]
    )


@pytest.mark.parametrize(
    ("typed", "written"),
    [("covjek", "Čovjek"), ("CAFE", "café"), ("zola", "Émile Zola"), ("running", "running")],
)
def test_case_and_accents_do_not_matter(typed: str, written: str) -> None:
    assert set(lexical.encode_query(typed).indices) <= set(lexical.encode_document(written).indices)


def test_no_stemming_keeps_word_forms_apart() -> None:
    assert lexical.encode_query("runs").indices != lexical.encode_query("running").indices


def test_text_without_spaces_is_segmented() -> None:
    assert len(lexical.encode_query("東京は日本の首都です").indices) > 1


def test_no_words_give_an_empty_vector() -> None:
    for text in ("", "   ", "?! ..."):
        assert lexical.encode_query(text).indices == []


def test_overlong_tokens_are_dropped() -> None:
    assert lexical.encode_document("x" * 41).indices == []
    assert lexical.encode_document("x" * 40).indices != []
