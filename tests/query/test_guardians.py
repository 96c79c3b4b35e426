"""Guardians and response patterns: loading, validation, resolution and composition."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
import yaml

from alexandria.errors import FailedPrecondition, InvalidArgument
from alexandria.settings import QuerySettings
from services.query.guardians import PromptLibrary, load_guardians, load_response_patterns

SETTINGS = QuerySettings()
REQUIRED_GUARDIANS = {"zec", "vault_e", "ariadne", "hipatija", "klepac", "lupita", "alan_kay", "none"}


@pytest.fixture
def library() -> PromptLibrary:
    return PromptLibrary.load(SETTINGS.guardians_dir, SETTINGS.response_patterns_file, SETTINGS.default_guardian)


@pytest.fixture
def guardians_copy(tmp_path: Path) -> Path:
    target = tmp_path / "guardians"
    shutil.copytree(SETTINGS.guardians_dir, target)
    return target


def _patterns_data() -> dict:
    return yaml.safe_load(SETTINGS.response_patterns_file.read_text())


def test_the_shipped_guardians_all_load(library: PromptLibrary) -> None:
    files = load_guardians(SETTINGS.guardians_dir)
    assert files.skipped == []
    assert REQUIRED_GUARDIANS <= set(library.guardians)
    assert library.default_guardian == "zec"
    assert library.guardians["none"].personality_prompt == ""
    voices = [g.personality_prompt for g in library.guardians.values() if g.id != "none"]
    assert all(voices) and len(set(voices)) == len(voices)
    assert "mljac" in library.guardians["lupita"].personality_prompt


def test_the_shipped_patterns_cover_the_contract(library: PromptLibrary) -> None:
    ids = {p.id for p in library.patterns.patterns}
    expected = {"tldr", "cross_perspective", "key_principles", "contradictions", "steel_man", "assumptions",
                "source_coverage", "retrieval_gaps"}
    assert expected <= ids
    assert set(library.category_defaults) == {"free", "direct", "synthesis", "extraction", "critical"}


def test_a_malformed_guardian_is_logged_by_name_and_skipped(
    guardians_copy: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (guardians_copy / "broken.md").write_text("---\nalexandria:\n  id: broken\n  name: [unclosed\n---\nbody\n")
    (guardians_copy / "no_front.md").write_text("Just prose, no front matter.\n")
    (guardians_copy / "wrong_id.md").write_text(
        "---\nalexandria:\n  id: other\n  name: X\n  emoji: x\n  role: r\n  greeting: g\n  personality_prompt: p\n---\n"
    )
    (guardians_copy / "missing.md").write_text("---\nalexandria:\n  id: missing\n  name: X\n---\n")
    (guardians_copy / "no_map.md").write_text("---\ntitle: A persona without its map\n---\nProse.\n")
    with caplog.at_level(logging.ERROR):
        files = load_guardians(guardians_copy)
    skipped = {s.path.name: s.reason for s in files.skipped}
    assert set(skipped) == {"broken.md", "no_front.md", "wrong_id.md", "missing.md", "no_map.md"}
    assert "alexandria" in skipped["no_map.md"]
    assert "not valid YAML" in skipped["broken.md"]
    assert "front matter" in skipped["no_front.md"]
    assert "wrong_id" in skipped["wrong_id.md"] or "other.md" in skipped["wrong_id.md"]
    assert "emoji" in skipped["missing.md"] and "personality_prompt" in skipped["missing.md"]
    for name in skipped:
        assert name in caplog.text
    assert REQUIRED_GUARDIANS <= set(files.guardians)


def test_adding_a_guardian_is_adding_a_file(guardians_copy: Path) -> None:
    (guardians_copy / "sibyl.md").write_text(
        "---\nalexandria:\n  id: sibyl\n  name: Sibyl\n  emoji: \"🔮\"\n  role: Oracle\n"
        "  greeting: Ask.\n  personality_prompt: Speak in riddles that resolve.\n---\nProse.\n"
    )
    library = PromptLibrary.load(guardians_copy, SETTINGS.response_patterns_file, "zec")
    assert library.compose("sibyl", "tldr").text.startswith("Speak in riddles that resolve.")


def test_unknown_ids_are_refused_naming_the_valid_ones(library: PromptLibrary) -> None:
    with pytest.raises(InvalidArgument) as guardian_error:
        library.guardian("gandalf")
    assert "gandalf" in guardian_error.value.message
    assert all(g in guardian_error.value.message for g in REQUIRED_GUARDIANS)
    with pytest.raises(InvalidArgument) as pattern_error:
        library.pattern("haiku")
    assert "haiku" in pattern_error.value.message
    assert "tldr" in pattern_error.value.message and "critical" in pattern_error.value.message


def test_ids_and_categories_are_found_in_any_case(library: PromptLibrary) -> None:
    assert library.guardian("Zec").id == library.guardian(" ZEC ").id == "zec"  # the name a response shows
    assert library.pattern("TLDR").id == "tldr" and library.pattern("Critical").id == "contradictions"


def test_a_category_selects_its_default_and_empty_means_defaults(library: PromptLibrary) -> None:
    assert library.pattern("critical").id == "contradictions"
    assert library.pattern("synthesis").id == "cross_perspective"
    assert library.pattern("").id == library.category_defaults["free"]
    assert library.pattern("steel_man").id == "steel_man"
    assert library.guardian("").id == "zec"


def test_composition_joins_personality_pattern_and_citation_rule(library: PromptLibrary) -> None:
    composed = library.compose("hipatija", "steel_man")
    hipatija = library.guardians["hipatija"]
    assert composed.guardian is hipatija and composed.pattern.id == "steel_man"
    personality, pattern, citation = composed.text.split("\n\n")
    assert personality == hipatija.personality_prompt
    assert composed.pattern.instruction in pattern
    assert citation == f"Citations: {library.patterns.citation_rule}"
    plain = library.compose("none", "tldr").text
    assert plain.startswith("Response pattern: TL;DR.") and "Citations:" in plain


def test_a_missing_default_guardian_stops_the_service(guardians_copy: Path) -> None:
    (guardians_copy / "zec.md").unlink()
    with pytest.raises(FailedPrecondition, match="default guardian 'zec'"):
        PromptLibrary.load(guardians_copy, SETTINGS.response_patterns_file, "zec")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d["categories"].pop("critical"), "missing categories: critical"),
        (lambda d: d["categories"]["direct"].update(default="tldr_nope"), "category 'direct' has default"),
        (lambda d: d["categories"]["direct"].update(default="contradictions"), "category 'direct' has default"),
        (lambda d: d["patterns"].append(dict(d["patterns"][0])), "used twice"),
        (lambda d: d["patterns"][0].update(category="poetry"), "unknown category 'poetry'"),
        (lambda d: d["patterns"][0].update(id="direct"), "both as category and pattern id"),
        (lambda d: d.pop("citation_rule"), "citation_rule"),
        (lambda d: d["patterns"][1].update(extra="x"), "Extra inputs"),
    ],
)
def test_an_invalid_patterns_file_stops_the_service(tmp_path: Path, change, expected: str) -> None:
    data = _patterns_data()
    change(data)
    path = tmp_path / "response_patterns.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    with pytest.raises(FailedPrecondition) as error:
        load_response_patterns(path)
    assert expected in error.value.message and str(path) in error.value.message


def test_unreadable_or_non_yaml_patterns_file_stops_the_service(tmp_path: Path) -> None:
    with pytest.raises(FailedPrecondition, match="Cannot read"):
        load_response_patterns(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("patterns: [unclosed\n")
    with pytest.raises(FailedPrecondition, match="not valid YAML"):
        load_response_patterns(bad)
