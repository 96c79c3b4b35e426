"""Guardians (personas) and response patterns: prompt text kept as data, validated at start-up.

A guardian is one Markdown file in the guardians folder whose YAML front matter holds an
`alexandria:` map (id, name, emoji, role, greeting, personality_prompt, specialties, quirks);
its body is prose for humans. A malformed file is logged by name and skipped, so one bad file
does not take the service down, but a missing default guardian does. The response patterns
live in one YAML file; it is all or nothing, because a broken pattern set cannot answer anyone.

`PromptLibrary.compose` turns a guardian id and a pattern id (or category name) into the
`response_instruction` that alexandria_query returns.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from alexandria.errors import FailedPrecondition, InvalidArgument

log = logging.getLogger(__name__)

FRONT_MATTER_FENCE = "---"
# The categories the alexandria_query contract names; each must exist and have a default.
REQUIRED_CATEGORIES = ("free", "direct", "synthesis", "extraction", "critical")
DEFAULT_PATTERN_ARGUMENT = "free"
IDENTIFIER = r"^[a-z][a-z0-9_]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class Guardian(_Strict):
    """A persona: the `alexandria:` map of one guardians/<id>.md file."""

    id: str = Field(pattern=IDENTIFIER)
    name: str = Field(min_length=1)
    emoji: str = Field(min_length=1)
    role: str = Field(min_length=1)
    greeting: str = Field(min_length=1)
    personality_prompt: str = Field(description="Empty for plain Alexandria (the `none` guardian).")
    specialties: tuple[str, ...] = ()
    quirks: tuple[str, ...] = ()


class GuardianFrontMatter(BaseModel):
    """A guardian file's front matter: the `alexandria:` map, beside whatever else other tools keep there."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    alexandria: Guardian


class ResponsePattern(_Strict):
    """How to shape an answer from the returned passages."""

    id: str = Field(pattern=IDENTIFIER)
    category: str
    name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    instruction: str = Field(min_length=1)


class PatternCategory(_Strict):
    description: str = Field(min_length=1)
    default: str


class ResponsePatternSet(_Strict):
    """The whole response_patterns.yaml, checked for internal consistency."""

    citation_rule: str = Field(min_length=1)
    categories: dict[str, PatternCategory]
    patterns: tuple[ResponsePattern, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> ResponsePatternSet:
        missing = [name for name in REQUIRED_CATEGORIES if name not in self.categories]
        if missing:
            raise ValueError(f"missing categories: {', '.join(missing)}")
        by_id: dict[str, ResponsePattern] = {}
        for pattern in self.patterns:
            if pattern.id in by_id:
                raise ValueError(f"pattern id '{pattern.id}' is used twice")
            if pattern.category not in self.categories:
                raise ValueError(
                    f"pattern '{pattern.id}' has unknown category '{pattern.category}' "
                    f"(categories: {', '.join(self.categories)})"
                )
            by_id[pattern.id] = pattern
        # A response_pattern argument may name either, so the two name spaces must not overlap.
        clashes = sorted(set(by_id) & set(self.categories))
        if clashes:
            raise ValueError(f"names used both as category and pattern id: {', '.join(clashes)}")
        for name, category in self.categories.items():
            default = by_id.get(category.default)
            if default is None or default.category != name:
                raise ValueError(f"category '{name}' has default '{category.default}', which is not one of its patterns")
        return self


@dataclass(frozen=True)
class SkippedFile:
    """A guardian file that could not be loaded, and why."""

    path: Path
    reason: str


@dataclass(frozen=True)
class GuardianFiles:
    guardians: dict[str, Guardian]
    skipped: list[SkippedFile]


@dataclass(frozen=True)
class ResponseInstruction:
    """The resolved guardian and pattern and the instruction text composed from them."""

    guardian: Guardian
    pattern: ResponsePattern
    text: str


def _front_matter(text: str) -> str:
    lines = text.splitlines()
    if not lines or lines[0].strip() != FRONT_MATTER_FENCE:
        raise ValueError(f"no YAML front matter: the file must start with a '{FRONT_MATTER_FENCE}' line")
    for number, line in enumerate(lines[1:], start=1):
        if line.strip() == FRONT_MATTER_FENCE:
            return "\n".join(lines[1:number])
    raise ValueError(f"the front matter is not closed by a '{FRONT_MATTER_FENCE}' line")


def _validation_summary(error: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'file'}: {e['msg']}" for e in error.errors())


def parse_guardian_file(path: Path) -> Guardian:
    """Read one guardian file; ValueError says what is wrong with it."""
    try:
        front = yaml.safe_load(_front_matter(path.read_text(encoding="utf-8")))
    except yaml.YAMLError as exc:
        raise ValueError(f"the front matter is not valid YAML: {exc}") from None
    except UnicodeDecodeError:
        raise ValueError("the file is not UTF-8 text") from None
    try:
        guardian = GuardianFrontMatter.model_validate(front).alexandria
    except ValidationError as exc:
        raise ValueError(_validation_summary(exc)) from None
    if guardian.id != path.stem:
        raise ValueError(f"id '{guardian.id}' does not match the file name; name the file {guardian.id}.md")
    return guardian


def load_guardians(directory: Path) -> GuardianFiles:
    """Every guardians/*.md that parses; each one that does not is logged by name and skipped."""
    if not directory.is_dir():
        raise FailedPrecondition(f"Guardians folder {directory} does not exist; set GUARDIANS_DIR.")
    guardians: dict[str, Guardian] = {}
    skipped: list[SkippedFile] = []
    for path in sorted(directory.glob("*.md")):
        try:
            guardian = parse_guardian_file(path)
        except (OSError, ValueError) as exc:
            skipped.append(SkippedFile(path, str(exc)))
            log.error("guardian file %s skipped: %s", path, exc)
            continue
        guardians[guardian.id] = guardian
    return GuardianFiles(guardians, skipped)


def load_response_patterns(path: Path) -> ResponsePatternSet:
    """The validated response patterns; FailedPrecondition names the file and the problem."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return ResponsePatternSet.model_validate(data)
    except OSError as exc:
        raise FailedPrecondition(f"Cannot read response patterns {path}: {exc.strerror}.") from None
    except yaml.YAMLError as exc:
        raise FailedPrecondition(f"Response patterns {path} are not valid YAML: {exc}") from None
    except ValidationError as exc:
        raise FailedPrecondition(f"Response patterns {path} are invalid: {_validation_summary(exc)}") from None


class PromptLibrary:
    """Guardians and response patterns, resolved by the ids callers pass, in any case (an LLM passes "Zec", the
    name a response shows, as readily as "zec"); no silent fallbacks."""

    def __init__(self, guardians: dict[str, Guardian], patterns: ResponsePatternSet, default_guardian: str) -> None:
        if default_guardian not in guardians:
            raise FailedPrecondition(
                f"The default guardian '{default_guardian}' is not loaded (loaded: {', '.join(sorted(guardians)) or 'none'}); "
                "add its .md file to the guardians folder or set DEFAULT_GUARDIAN."
            )
        self.guardians = guardians
        self.patterns = patterns
        self.default_guardian = default_guardian
        self._patterns_by_id = {p.id: p for p in patterns.patterns}

    @classmethod
    def load(cls, guardians_dir: Path, patterns_file: Path, default_guardian: str) -> PromptLibrary:
        """Load and validate both sources; raises FailedPrecondition when the service cannot run."""
        files = load_guardians(guardians_dir)
        library = cls(files.guardians, load_response_patterns(patterns_file), default_guardian)
        log.info(
            "loaded %d guardians (%d files skipped) and %d response patterns",
            len(files.guardians), len(files.skipped), len(library._patterns_by_id),
        )
        return library

    @property
    def category_defaults(self) -> dict[str, str]:
        return {name: category.default for name, category in self.patterns.categories.items()}

    def guardian(self, guardian_id: str) -> Guardian:
        """The guardian with this id; empty means the default."""
        key = _in_any_case(guardian_id.strip() or self.default_guardian, self.guardians)
        if key not in self.guardians:
            raise InvalidArgument(f"Unknown guardian '{key}'; valid guardians: {', '.join(sorted(self.guardians))}.")
        return self.guardians[key]

    def pattern(self, pattern_or_category: str) -> ResponsePattern:
        """The pattern with this id, or the default of the category with this name; empty means free."""
        key = _in_any_case(pattern_or_category.strip() or DEFAULT_PATTERN_ARGUMENT,
                           [*self.patterns.categories, *self._patterns_by_id])
        if key in self.patterns.categories:
            key = self.patterns.categories[key].default
        if key not in self._patterns_by_id:
            raise InvalidArgument(
                f"Unknown response pattern '{key}'; valid categories: {', '.join(self.patterns.categories)}; "
                f"valid pattern ids: {', '.join(sorted(self._patterns_by_id))}."
            )
        return self._patterns_by_id[key]

    def compose(self, guardian_id: str, pattern_or_category: str) -> ResponseInstruction:
        """The response instruction: the guardian's personality, the pattern, and the citation rule."""
        guardian = self.guardian(guardian_id)
        pattern = self.pattern(pattern_or_category)
        parts = [
            guardian.personality_prompt,
            f"Response pattern: {pattern.name}. {pattern.instruction}",
            f"Citations: {self.patterns.citation_rule}",
        ]
        return ResponseInstruction(guardian, pattern, "\n\n".join(p for p in parts if p))


def _in_any_case(given: str, names: Iterable[str]) -> str:
    """The one of `names` that `given` spells, case aside (itself when it is one, or none is)."""
    names = list(names)
    if given in names:
        return given
    return next((name for name in names if name.casefold() == given.casefold()), given)
