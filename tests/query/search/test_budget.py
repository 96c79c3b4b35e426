"""Chapter windows and the response budget: a search's whole response stays under it, and says so."""

from __future__ import annotations

import json

import pytest
from google.protobuf.json_format import MessageToDict

from alexandria.settings import QuerySettings
from alexandria.store import schema as f
from query.fakes import embedded_store, point, unit
from query.search.library import BUDGET, COLLECTION, run_search, search_query, vector_with_cosine
from services.query.budget import fit_to_budget, json_size, truncate_text, water_level
from services.query.context import chapter_window, results_sharing_a_parent
from services.query.guardians import PromptLibrary
from services.query.outcome import ContextMode, SearchMode, SearchOutcome
from services.query.search import passage_from_payload
from services.query.server import instruction_size, search_response


def _passage(text: str, sequence_index: int = 0, sibling_count: int = 0):
    payload = {f.TEXT: text, f.PARENT_ID: "p", f.SEQUENCE_INDEX: sequence_index, f.SIBLING_COUNT: sibling_count}
    return passage_from_payload("id", 0.5, payload, matched_lexically=False, link_paths={})


def test_a_chapter_window_keeps_the_hits_with_margins_and_marks_the_cuts() -> None:
    words = [f"w{i}" for i in range(3000)]
    chapter = " ".join(words)
    early, late = " ".join(words[100:140]), " ".join(words[2500:2540])
    text, trimmed = chapter_window(chapter, [_passage(early), _passage(late)], margin=200)
    assert trimmed and early in text and late in text
    assert text.startswith("… ") and text.endswith(" …") and " … " in text.strip("… ")
    assert len(text) < len(chapter) // 3
    assert all(token.startswith("w") or token == "…" for token in text.split())  # no word cut in half
    whole, whole_trimmed = chapter_window("short chapter text", [_passage("chapter")], margin=200)
    assert (whole, whole_trimmed) == ("short chapter text", False)


def test_a_hit_not_found_verbatim_is_placed_by_its_sequence_index() -> None:
    chapter = " ".join(f"w{i}" for i in range(2000))
    text, _ = chapter_window(chapter, [_passage("reworded text", sequence_index=3, sibling_count=4)], margin=100)
    assert "w1550" in text and "w1000" not in text


def test_water_level_and_truncation() -> None:
    assert water_level([10, 20, 30], 100) is None
    assert water_level([10, 20, 30], 40) == 15
    cap = water_level([100, 5000, 7000], 3000)
    assert sum(min(s, cap) for s in [100, 5000, 7000]) <= 3000
    text = "naïve \"quoted\" words\nand more " * 50
    for cap in (3, 10, 57, 400):
        cut = truncate_text(text, cap)
        assert json_size(cut) <= cap and (cut == "" or cut.endswith("…"))
    assert truncate_text("short", 100) == "short"


def _rendered_size(outcome: SearchOutcome, library: PromptLibrary) -> int:
    """The tool response as the gateway renders it: proto field names, JSON with non-ASCII kept."""
    response = search_response(outcome, library.compose("", ""))
    rendered = MessageToDict(response, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    return len(json.dumps(rendered, ensure_ascii=False))


@pytest.mark.asyncio
@pytest.mark.parametrize("budget", [2_000, 2_500, 5_000, 12_000, 40_000])
@pytest.mark.parametrize("mode", [ContextMode.PRECISE, ContextMode.COMPREHENSIVE])
async def test_the_whole_response_stays_under_the_budget_and_says_so(tmp_path, encoder, budget, mode) -> None:
    settings = QuerySettings()
    library = PromptLibrary.load(settings.guardians_dir, settings.response_patterns_file, settings.default_guardian)
    store = embedded_store(tmp_path)
    store.add_collection(COLLECTION)
    big = " ".join(["A long passage about “daughters” and their prospects."] * 120)
    children = [point(f"b{i}", f"{i} {big}", vector_with_cosine(0.9 - i / 100), sequence_index=i, sibling_count=40)
                for i in range(40)]
    chapter = "\n\n".join(p.payload[f.TEXT] for p in children)
    store.upsert(COLLECTION, [*children, point("chapter-1", chapter, unit(0, 1, 0, 0), level=f.Level.PARENT, parent_id=None)])
    query = search_query(limit=20, context_mode=mode, threshold=0.0)
    full = await run_search(store, encoder, query, budget=10**9)
    assert not full.trimmed and _rendered_size(full, library) > budget
    outcome = await run_search(store, encoder, query, budget, reserved=instruction_size(library.compose("", "")))
    assert _rendered_size(outcome, library) <= budget
    assert outcome.trimmed and f"{budget:,}-character response budget" in outcome.notice
    if outcome.hierarchy_stats is not None:  # the counts are of what the response holds
        stats = outcome.hierarchy_stats
        assert (stats.results, stats.parents_fetched, stats.siblings_fetched) == (
            len(outcome.results), len(outcome.parents), len(outcome.siblings))
        assert stats.results_sharing_a_parent == results_sharing_a_parent(outcome.parents)
    # The smallest budgets are mostly the default guardian's instruction: with real (UUID) ids there is
    # no room for a result's citation and a readable part of its text.
    assert len(outcome.results) >= (1 if budget > 2_500 else 0)


def test_an_outcome_within_the_budget_is_untouched() -> None:
    outcome = SearchOutcome("q", ContextMode.PRECISE, SearchMode.HYBRID, (_passage("small text"),))
    assert fit_to_budget(outcome, BUDGET) is outcome
