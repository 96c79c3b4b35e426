"""What a Filter and a collection name may hold, checked before any backend sees them."""

from __future__ import annotations

import pytest

from alexandria.errors import InvalidArgument
from alexandria.store import Filter
from alexandria.store.model import check_collection_name, check_facet_key


@pytest.mark.parametrize("value", ["moby", 7, True, ["a", "b"], [1, 2], []])
def test_exact_values_and_lists_are_accepted(value: object) -> None:
    Filter(must={"key": value}, must_not={"key": value})


@pytest.mark.parametrize("value", [None, 1.5, {"a": 1}, [True], [1.5], ("a", "b")])
def test_other_values_are_refused(value: object) -> None:
    with pytest.raises(InvalidArgument, match="'key'"):
        Filter(must={"key": value})
    with pytest.raises(InvalidArgument, match="'key'"):
        Filter(must_not={"key": value})


@pytest.mark.parametrize("words", ["", "   ", 3])
def test_text_match_needs_words(words: object) -> None:
    with pytest.raises(InvalidArgument, match="needs some words"):
        Filter(text={"author": words})


@pytest.mark.parametrize("name", ["alexandria", "my_books-2", "A"])
def test_collection_names_that_work_everywhere(name: str) -> None:
    assert check_collection_name(name) == name


@pytest.mark.parametrize("name", ["", "..", "../x", "a/b", "a.b", "-x", "x" * 65, "naïve"])
def test_collection_names_that_could_escape_or_clash(name: str) -> None:
    with pytest.raises(InvalidArgument, match="Invalid collection name"):
        check_collection_name(name)


def test_only_keyword_indexed_fields_have_facets() -> None:
    assert check_facet_key("authors") == "authors"
    with pytest.raises(InvalidArgument, match="facets work on"):
        check_facet_key("text")
