"""Context around the results: a window of each result's chapter (contextual mode) and the chunks
just before and after each result (comprehensive mode), assembled from one batch fetch of the
chapters and one scroll for the neighbours."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from alexandria.store import PointRecord
from alexandria.store.records import ChunkRecord
from services.query.outcome import ChapterContext, HierarchyStats, NeighbourChunk, Passage, SearchOutcome

# Chapter text kept on each side of a hit in contextual mode (~200 words).
CONTEXT_MARGIN_CHARS = 1200
ELLIPSIS = "…"
WINDOW_SEPARATOR = f" {ELLIPSIS} "
# Words of a hit used to find it in its chapter's text.
LOCATE_WORDS = 12
_WHITESPACE = re.compile(r"\s")


def neighbour_key(chunk: ChunkRecord) -> tuple[str, int]:
    """Where a chunk sits among its siblings: (its parent's id, its index)."""
    return chunk.parent_id or "", chunk.sequence_index


def neighbour_positions(results: Sequence[Passage]) -> dict[tuple[str, int], tuple[int, str]]:
    """(parent id, sequence index) of each result's previous and next chunk -> (result index, relation).

    A neighbour that is itself a result, or neighbours two results, is listed once.
    """
    taken = {(p.parent_id, p.sequence_index) for p in results}
    wanted: dict[tuple[str, int], tuple[int, str]] = {}
    for index, passage in enumerate(results):
        if not passage.parent_id:
            continue
        for offset, relation in ((-1, "previous"), (1, "next")):
            position = (passage.parent_id, passage.sequence_index + offset)
            in_chapter = 0 <= position[1] and (passage.sibling_count == 0 or position[1] < passage.sibling_count)
            if in_chapter and position not in taken and position not in wanted:
                wanted[position] = (index, relation)
    return wanted


def _locate(chapter: str, passage: Passage) -> tuple[int, int]:
    """Where the passage's text sits in its chapter's text; estimated from its index when not found."""
    words = passage.text.split()[:LOCATE_WORDS]
    if words:
        match = re.search(r"\s+".join(map(re.escape, words)), chapter)
        if match:
            return match.start(), min(len(chapter), match.start() + len(passage.text))
    share = passage.sequence_index / passage.sibling_count if passage.sibling_count else 0.0
    start = int(len(chapter) * share)
    return start, min(len(chapter), start + len(passage.text))


def _word_boundary(text: str, index: int, forward: bool) -> int:
    """Move `index` to the nearest whitespace (after it, or before it) so that a window never cuts a word."""
    if index <= 0 or index >= len(text):
        return max(0, min(index, len(text)))
    if forward:
        after = _WHITESPACE.search(text, index)
        return after.start() if after else len(text)
    return max(text.rfind(" ", 0, index), text.rfind("\n", 0, index), 0)


def chapter_window(chapter: str, hits: Sequence[Passage], margin: int = CONTEXT_MARGIN_CHARS) -> tuple[str, bool]:
    """The chapter text around its hits (merged where they overlap); (text, whether it was cut)."""
    spans = sorted((max(0, s - margin), min(len(chapter), e + margin)) for s, e in (_locate(chapter, p) for p in hits))
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    if merged[0][0] == 0 and merged[-1][1] == len(chapter) and len(merged) == 1:
        return chapter, False
    pieces = [
        chapter[_word_boundary(chapter, s, forward=False) : _word_boundary(chapter, e, forward=True)].strip()
        for s, e in merged
    ]
    text = WINDOW_SEPARATOR.join(pieces)
    if merged[0][0] > 0:
        text = f"{ELLIPSIS} {text}"
    if merged[-1][1] < len(chapter):
        text = f"{text} {ELLIPSIS}"
    return text, True


def assemble_context(
    outcome: SearchOutcome, parents: Sequence[PointRecord], siblings: Sequence[PointRecord]
) -> SearchOutcome:
    """Chapter windows (one per chapter, however many results it holds) and neighbour chunks."""
    by_parent: dict[str, list[int]] = {}
    for index, passage in enumerate(outcome.results):
        if passage.parent_id:
            by_parent.setdefault(passage.parent_id, []).append(index)
    chapters: list[ChapterContext] = []
    for record in parents:
        indices = by_parent.get(record.id, [])
        if not indices:
            continue
        chapter = ChunkRecord.from_payload(record.payload)
        text, cut = chapter_window(chapter.text, [outcome.results[i] for i in indices])
        chapters.append(
            ChapterContext(
                parent_id=record.id,
                book_title=chapter.book.title,
                author=chapter.book.author,
                section_name=chapter.chapter_title,
                text=text,
                trimmed=cut,
                chapter_words=chapter.word_count,
                result_indices=tuple(indices),
            )
        )
    chapters.sort(key=lambda c: c.result_indices[0])
    wanted = neighbour_positions(outcome.results) if siblings else {}
    neighbours = []
    for record in siblings:
        chunk = ChunkRecord.from_payload(record.payload)
        key = neighbour_key(chunk)
        if key in wanted:
            result_index, relation = wanted[key]
            neighbours.append(
                NeighbourChunk(
                    chunk_id=record.id,
                    result_index=result_index,
                    relation=relation,
                    sequence_index=chunk.sequence_index,
                    section_name=chunk.chapter_title,
                    text=chunk.text,
                )
            )
    neighbours.sort(key=lambda n: (n.result_index, n.sequence_index))
    stats = HierarchyStats(
        results=len(outcome.results),
        parents_fetched=len(chapters),
        results_sharing_a_parent=results_sharing_a_parent(chapters),
        siblings_fetched=len(neighbours),
    )
    notice = ""
    # A highlight has no chapter by nature; a passage without one comes from a book ingested flat.
    flat = sum(1 for p in outcome.results if not p.parent_id and p.kind != "highlight")
    if flat:
        notice = f"{flat} result(s) come from books ingested without chapters (flat): no chapter context for them."
    return dataclasses.replace(
        outcome, parents=tuple(chapters), siblings=tuple(neighbours), hierarchy_stats=stats, notice=notice
    )


def results_sharing_a_parent(chapters: Sequence[ChapterContext]) -> int:
    """How many results share their chapter window with another result."""
    return sum(len(c.result_indices) for c in chapters if len(c.result_indices) > 1)
