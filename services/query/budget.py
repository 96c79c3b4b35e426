"""The response budget: a search's whole response, measured as the JSON an MCP client receives,
fitted under QUERY_RESPONSE_BUDGET_CHARS by cutting context first and result texts last."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import TypeVar

from services.query.context import ELLIPSIS, results_sharing_a_parent
from services.query.outcome import ChapterContext, NeighbourChunk, Passage, SearchOutcome


def json_size(text: str) -> int:
    """Characters `text` takes as a JSON string value (non-ASCII kept as is, as MCP clients receive it)."""
    return len(json.dumps(text, ensure_ascii=False))


# Response budget. Sizes are JSON characters: each string's escaped length plus a fixed allowance
# for the field names, numbers and punctuation of its record (measured on responses rendered with
# proto field names, every field present, then rounded up).
ENVELOPE_CHARS = 450
RESULT_FIXED_CHARS = 390
PARENT_FIXED_CHARS = 170
PARENT_CHARS_PER_RESULT_INDEX = 4
SIBLING_FIXED_CHARS = 130
# Room kept for the note that says what was trimmed.
TRIM_NOTE_CHARS = 200
# A text cut below this many characters is not worth showing: its result, window or neighbour goes.
MIN_USEFUL_TEXT_CHARS = 200


ContextT = TypeVar("ContextT", ChapterContext, NeighbourChunk)


def _result_fixed(p: Passage) -> int:
    strings = (p.book_title, p.author, p.section_name, p.locator.chapter_title, p.file_path, p.book_key, p.chunk_id,
               p.parent_id, p.language, p.link, p.kind, p.note)
    return RESULT_FIXED_CHARS + sum(json_size(s) for s in strings)


def _parent_fixed(c: ChapterContext) -> int:
    strings = (c.parent_id, c.book_title, c.author, c.section_name)
    return PARENT_FIXED_CHARS + PARENT_CHARS_PER_RESULT_INDEX * len(c.result_indices) + sum(map(json_size, strings))


def _sibling_fixed(n: NeighbourChunk) -> int:
    return SIBLING_FIXED_CHARS + json_size(n.chunk_id) + json_size(n.section_name)


def water_level(sizes: Sequence[int], allowance: int) -> int | None:
    """The largest cap c with sum(min(size, c)) <= allowance; None when nothing needs cutting."""
    if sum(sizes) <= allowance:
        return None
    remaining = allowance
    ordered = sorted(sizes)
    for position, size in enumerate(ordered):
        share = remaining // (len(ordered) - position)
        if size > share:
            return max(0, share)
        remaining -= size
    return max(0, remaining)


def truncate_text(text: str, cap: int) -> str:
    """`text` cut at a word boundary so that its JSON size, ellipsis included, stays within `cap`."""
    if json_size(text) <= cap:
        return text
    # Every character takes at least one JSON character, so this first guess can only be too long.
    keep = cap - json_size(ELLIPSIS)
    while keep > 0:
        space = text.rfind(" ", 0, keep)
        candidate = text[: space if space > keep * 0.8 else keep].rstrip() + ELLIPSIS
        excess = json_size(candidate) - cap
        if excess <= 0:
            return candidate
        keep -= excess
    return ""


def fit_to_budget(outcome: SearchOutcome, budget_chars: int, reserved_chars: int = 0) -> SearchOutcome:
    """Cut the response to `budget_chars`, of which `reserved_chars` go to fields the caller adds.

    Neighbours go first, then chapter windows, then result texts. Results keep priority: their texts
    are shortened (fairly, longest first) only when the results alone exceed the budget, and whole
    results are dropped, last first, only when their citations and a readable part of their texts
    do not fit.
    """
    results = list(outcome.results)
    notes: list[str] = []
    available = (
        budget_chars - reserved_chars - ENVELOPE_CHARS - TRIM_NOTE_CHARS
        - json_size(outcome.query) - json_size(outcome.notice)
    )
    fixed = [_result_fixed(p) for p in results]
    # Each result kept must keep a readable part of its text, so fewer results beat many stubs.
    least = [size + min(json_size(p.text), MIN_USEFUL_TEXT_CHARS) for size, p in zip(fixed, results, strict=True)]
    while results and sum(least) > available:
        results.pop()
        fixed.pop()
        least.pop()
    if len(results) < len(outcome.results):
        notes.append(f"{len(outcome.results) - len(results)} result(s) dropped")
    available -= sum(fixed)
    cap = water_level([json_size(p.text) for p in results], max(0, available))
    if cap is not None:
        shortened = [dataclasses.replace(p, text=truncate_text(p.text, cap)) for p in results]
        notes.append(f"{sum(a.text != b.text for a, b in zip(results, shortened))} result text(s) shortened")
        results = shortened
    available -= sum(json_size(p.text) for p in results)

    kept = set(range(len(results)))
    parents = [
        dataclasses.replace(c, result_indices=tuple(i for i in c.result_indices if i in kept))
        for c in outcome.parents
    ]
    parents = [c for c in parents if c.result_indices]
    parents, available = _fit_tier(parents, _parent_fixed, _shorten_chapter, available, "chapter window", notes)
    siblings = [n for n in outcome.siblings if n.result_index in kept]
    siblings, _ = _fit_tier(siblings, _sibling_fixed, _shorten_neighbour, available, "neighbour chunk", notes)
    if not notes:
        return outcome
    budget_note = f"Trimmed to the {budget_chars:,}-character response budget: {'; '.join(notes)}."
    stats = outcome.hierarchy_stats
    if stats is not None:
        stats = dataclasses.replace(
            stats, results=len(results), parents_fetched=len(parents), siblings_fetched=len(siblings),
            results_sharing_a_parent=results_sharing_a_parent(parents),
        )
    return dataclasses.replace(
        outcome,
        results=tuple(results),
        parents=tuple(parents),
        siblings=tuple(siblings),
        hierarchy_stats=stats,
        trimmed=True,
        notice=" ".join(n for n in (outcome.notice, budget_note) if n),
    )


def _fit_tier(
    items: list[ContextT],
    fixed_size: Callable[[ContextT], int],
    shorten: Callable[[ContextT, int], ContextT],
    available: int,
    name: str,
    notes: list[str],
) -> tuple[list[ContextT], int]:
    """Fit one tier of context into what the tiers before it left: shorten fairly, or drop it whole."""
    if not items:
        return items, available
    fixed = sum(fixed_size(item) for item in items)
    sizes = [json_size(item.text) for item in items]
    cap = water_level(sizes, max(0, available - fixed))
    if cap is None:
        return items, available - fixed - sum(sizes)
    if cap < MIN_USEFUL_TEXT_CHARS:
        notes.append(f"{len(items)} {name}(s) dropped")
        return [], available
    cut = [shorten(item, cap) if size > cap else item for item, size in zip(items, sizes, strict=True)]
    notes.append(f"{sum(size > cap for size in sizes)} {name}(s) shortened")
    return cut, available - fixed - sum(json_size(item.text) for item in cut)


def _shorten_chapter(chapter: ChapterContext, cap: int) -> ChapterContext:
    return dataclasses.replace(chapter, text=truncate_text(chapter.text, cap), trimmed=True)


def _shorten_neighbour(neighbour: NeighbourChunk, cap: int) -> NeighbourChunk:
    return dataclasses.replace(neighbour, text=truncate_text(neighbour.text, cap))
