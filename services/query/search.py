"""alexandria_query's domain: retrieval, scoring, chapter context and the response budget.

One search is: validate; embed the query (the embedder); one store query (dense, sparse, or
both fused with RRF in the engine); one engine call scoring those hits by their cosine to the
query; for contextual and comprehensive modes one batch fetch of parent chapters (and one scroll
for neighbouring chunks); fit the whole to the response budget. What a collection records about
its model is read once per collection, not on every search: reading it counts the collection's
points (~10 ms at 100,000).

Scores and the threshold. A result's `score` is the cosine similarity of the passage to the query,
whatever mode found it, computed by the engine for the hits alone: the cosine of the passage's
best-matching sentence (MaxSim over its `sentences` multivector, written at ingest), or of its
chunk vector for a point stored without sentence vectors. The threshold filters on that
score. One exception keeps exact-name queries working where the dense model is weak
("Netherfield", "Pemberley"): a passage that contains every lexical term of the query is kept
even below the threshold, because a literal match is relevant by definition. Such a passage is
marked `matched_lexically`. Results keep the engine's order (fused rank in hybrid mode), so
scores need not be monotonic there.

Only points with `complete` true are searched or fetched, and chapters (`level` parent) are
never hits: they come back only as context.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, TypeVar

import numpy as np

from alexandria.errors import FailedPrecondition, InvalidArgument, NotFound
from alexandria.languages import language_spellings
from alexandria.store import (
    DENSE,
    SENTENCES,
    CollectionInfo,
    Filter,
    Hit,
    PointRecord,
    SparseVector,
    Store,
    call_store,
)
from alexandria.store import schema as f
from alexandria.store.lexical import encode_query


class ContextMode(StrEnum):
    PRECISE = "precise"              # the matched chunks only
    CONTEXTUAL = "contextual"        # plus a window of each result's chapter
    COMPREHENSIVE = "comprehensive"  # plus the previous and next chunk of each result


class SearchMode(StrEnum):
    HYBRID = "hybrid"
    SEMANTIC = "semantic"
    LEXICAL = "lexical"


# bench/retrieval.py, 55 questions over 6 corpus books (recall@5 / MRR@10 / answered at 0.5):
# semantic 0.382 / 0.261 / 0.78, lexical 0.582 / 0.448 / 0.82, hybrid 0.600 / 0.437 / 0.82.
# Hybrid finds the most answers in the top 5 and is much the best on paraphrased questions (recall@5
# 0.541 against lexical's 0.459), the way people usually ask. Reordering the fused candidates by
# their score was measured too and lowers hybrid's recall@5 to 0.49, so the engine's order is kept.
DEFAULT_SEARCH_MODE = SearchMode.HYBRID
DEFAULT_LIMIT = 5
MAX_LIMIT = 20
DEFAULT_THRESHOLD = 0.5
# Fetch more than asked so that passages below the threshold can be replaced by the next ones.
CANDIDATES_PER_RESULT = 2
# Candidates each retriever contributes to the RRF fusion.
MIN_HYBRID_PREFETCH = 40
HYBRID_PREFETCH_PER_CANDIDATE = 4
# Chapter text kept on each side of a hit in contextual mode (~200 words).
CONTEXT_MARGIN_CHARS = 1200
ELLIPSIS = "…"
WINDOW_SEPARATOR = f" {ELLIPSIS} "
# Words of a hit used to find it in its chapter's text.
LOCATE_WORDS = 12
_WHITESPACE = re.compile(r"\s")
SEARCHABLE_LEVELS = [f.Level.CHILD.value, f.Level.FLAT.value]


@dataclass(frozen=True)
class QueryVector:
    """The query's dense vector and the name of the model that made it."""

    vector: np.ndarray
    model: str


class QueryEncoder(Protocol):
    async def encode(self, text: str) -> QueryVector:
        """Embed one query (as a query, not a passage)."""


@dataclass(frozen=True)
class SearchQuery:
    """One alexandria_query call, with defaults already applied by the caller."""

    text: str
    collection: str
    limit: int = DEFAULT_LIMIT
    threshold: float = DEFAULT_THRESHOLD
    context_mode: ContextMode = ContextMode.PRECISE
    search_mode: SearchMode = DEFAULT_SEARCH_MODE
    book_id: int | None = None
    author: str | None = None     # whole words of an author's name, any case
    language: str | None = None


@dataclass(frozen=True)
class Locator:
    chapter_title: str
    chapter_index: int
    position: int
    page_start: int | None
    page_end: int | None


@dataclass(frozen=True)
class Passage:
    """A matched chunk: what a citation needs, and where it sits in its chapter."""

    chunk_id: str
    score: float
    text: str
    book_title: str
    author: str
    section_name: str
    locator: Locator
    book_key: str
    calibre_id: int | None
    file_path: str
    language: str
    parent_id: str
    sequence_index: int
    sibling_count: int
    matched_lexically: bool


@dataclass(frozen=True)
class ChapterContext:
    """A window of one chapter around the results it holds."""

    parent_id: str
    book_title: str
    author: str
    section_name: str
    text: str
    trimmed: bool
    chapter_words: int
    result_indices: tuple[int, ...]


@dataclass(frozen=True)
class NeighbourChunk:
    chunk_id: str
    result_index: int
    relation: str  # "previous" or "next"
    sequence_index: int
    section_name: str
    text: str


@dataclass(frozen=True)
class HierarchyStats:
    results: int
    parents_fetched: int
    results_sharing_a_parent: int
    siblings_fetched: int


@dataclass(frozen=True)
class SearchOutcome:
    query: str
    context_mode: ContextMode
    search_mode: SearchMode
    results: tuple[Passage, ...]
    parents: tuple[ChapterContext, ...] = ()
    siblings: tuple[NeighbourChunk, ...] = ()
    hierarchy_stats: HierarchyStats | None = None
    trimmed: bool = False
    notice: str = ""


def validate(query: SearchQuery) -> None:
    """Reject what cannot be searched, saying what is allowed."""
    if not query.text.strip():
        raise InvalidArgument("The query is empty; pass the question or words to search for.")
    if not 1 <= query.limit <= MAX_LIMIT:
        raise InvalidArgument(f"limit must be between 1 and {MAX_LIMIT} (default {DEFAULT_LIMIT}); got {query.limit}.")
    if not 0.0 <= query.threshold <= 1.0:
        raise InvalidArgument(
            f"threshold is a cosine similarity between 0.0 and 1.0 (default {DEFAULT_THRESHOLD}); got {query.threshold}."
        )
    if not query.collection:
        raise InvalidArgument("No collection named; pass one or set QDRANT_COLLECTION.")


@dataclass(frozen=True)
class EmbeddedWith:
    """The model that made a collection's vectors, as the collection records it."""

    model: str | None
    dimension: int

    @classmethod
    def of(cls, info: CollectionInfo) -> EmbeddedWith:
        return cls(info.metadata.get(f.MODEL), info.vector_size)

    def matches(self, query_vector: QueryVector) -> bool:
        return self.model == query_vector.model and self.dimension == query_vector.vector.shape[0]


def check_collection(collection: str, info: CollectionInfo | None, query_vector: QueryVector) -> None:
    """The collection exists, holds points, and was embedded by the model that embedded the query."""
    if info is None:
        raise NotFound(
            f"Collection '{collection}' does not exist; ingest a book into it first "
            "(alexandria_ingest or alexandria_ingest_file), or check the collection name."
        )
    if info.points_count == 0:
        raise FailedPrecondition(f"Collection '{collection}' is empty; ingest a book into it before searching.")
    recorded = EmbeddedWith.of(info)
    if not recorded.matches(query_vector):
        dimension = int(query_vector.vector.shape[0])
        raise FailedPrecondition(
            f"Collection '{collection}' was embedded with model {recorded.model} ({recorded.dimension} dims) but the "
            f"embedder runs {query_vector.model} ({dimension} dims); run the embedder with {recorded.model}, "
            "or search a collection ingested with the current model."
        )


def json_size(text: str) -> int:
    """Characters `text` takes as a JSON string value (non-ASCII kept as is, as MCP clients receive it)."""
    return len(json.dumps(text, ensure_ascii=False))


class Searcher:
    """Runs searches against one store with one query encoder; store calls go through `call_store`."""

    def __init__(self, store: Store, encoder: QueryEncoder) -> None:
        self.store = store
        self.encoder = encoder
        self._embedded_with: dict[str, EmbeddedWith] = {}

    async def search(self, query: SearchQuery, budget_chars: int, reserved_chars: int = 0) -> SearchOutcome:
        """Search, assemble the context the mode asks for, and fit the response in `budget_chars`.

        `reserved_chars` is what the caller adds to the response (the instruction, the guardian).
        """
        validate(query)
        terms = encode_query(query.text)
        if query.search_mode is SearchMode.LEXICAL and not terms.indices:
            raise InvalidArgument(
                f"The query '{query.text}' has no words lexical search can match; use search_mode semantic or hybrid."
            )
        query_vector = await self._encode_for(query.collection, query.text)
        empty = SearchOutcome(query.text, query.context_mode, query.search_mode, ())
        try:
            hits, cosines = await call_store(self.store, self._find, query, query_vector.vector, terms)
        except NotFound:
            self._embedded_with.pop(query.collection, None)
            raise
        if not hits:  # an empty collection is an error, not "nothing matched"
            info = await call_store(self.store, self.store.collection_info, query.collection)
            check_collection(query.collection, info, query_vector)
        results, best_dropped = select_passages(hits, cosines, terms, query.threshold, query.limit)
        if not results:
            return dataclasses.replace(empty, notice=nothing_matched_notice(query, best_dropped))
        outcome = dataclasses.replace(empty, results=tuple(results))
        if query.context_mode is not ContextMode.PRECISE:
            parents, siblings = await call_store(
                self.store,
                self._fetch_context, query.collection, results, query.context_mode is ContextMode.COMPREHENSIVE
            )
            outcome = assemble_context(outcome, parents, siblings)
        return fit_to_budget(outcome, budget_chars, reserved_chars)

    async def _encode_for(self, collection: str, text: str) -> QueryVector:
        """The query's vector, once the collection is known to exist, to hold points, and to have been
        embedded by the model that embedded the query. The collection's record is read again only
        when the model differs from the one remembered (the collection may have been made anew)."""
        remembered = self._embedded_with.get(collection)
        if remembered is None:
            # A thread whatever the store: the read then overlaps the wait for the embedder.
            query_vector, info = await asyncio.gather(
                self.encoder.encode(text), asyncio.to_thread(self.store.collection_info, collection)
            )
        else:
            query_vector = await self.encoder.encode(text)
            if remembered.matches(query_vector):
                return query_vector
            info = await call_store(self.store, self.store.collection_info, collection)
        check_collection(collection, info, query_vector)
        self._embedded_with[collection] = EmbeddedWith.of(info)
        return query_vector

    def _find(self, query: SearchQuery, vector: np.ndarray, terms: SparseVector) -> tuple[list[Hit], list[float]]:
        """The engine's candidates for the mode, and each one's cosine to the query."""
        candidates = query.limit * CANDIDATES_PER_RESULT
        collection = query.collection
        where = search_filter(query)
        if query.search_mode is SearchMode.SEMANTIC or not terms.indices:
            hits = self.store.query_dense(collection, vector, where, candidates)
        elif query.search_mode is SearchMode.LEXICAL:
            hits = self.store.query_sparse(collection, terms, where, candidates)
        else:
            prefetch = max(MIN_HYBRID_PREFETCH, HYBRID_PREFETCH_PER_CANDIDATE * candidates)
            hits = self.store.query_hybrid(collection, vector, terms, where, candidates, prefetch)
        ids = [hit.id for hit in hits]
        cosines = self.store.similarities(collection, ids, vector, SENTENCES)
        without_sentences = [i for i in ids if i not in cosines]
        if without_sentences:
            cosines |= self.store.similarities(collection, without_sentences, vector, DENSE)
        return hits, [min(1.0, max(-1.0, cosines[i])) for i in ids]

    def _fetch_context(
        self, collection: str, results: Sequence[Passage], with_siblings: bool
    ) -> tuple[list[PointRecord], list[PointRecord]]:
        """The results' chapters in one retrieve and, if asked, their neighbours in one scroll."""
        parent_ids = list(dict.fromkeys(p.parent_id for p in results if p.parent_id))
        if not parent_ids:
            return [], []
        parents = [
            r for r in self.store.retrieve(collection, parent_ids)
            if r.payload.get(f.COMPLETE) is True and r.payload.get(f.LEVEL) == f.Level.PARENT
        ]
        if not with_siblings:
            return parents, []
        wanted = neighbour_positions(results)
        if not wanted:
            return parents, []
        wanted_parents = sorted({parent for parent, _ in wanted})
        wanted_indices = sorted({index for _, index in wanted})
        # The filter is a cross product of parents and indices (Filter has no OR of conjunctions);
        # the few extra points it can match are dropped here.
        records = self.store.scroll(
            collection,
            Filter(must={f.PARENT_ID: wanted_parents, f.SEQUENCE_INDEX: wanted_indices, f.COMPLETE: True}),
            limit=len(wanted_parents) * len(wanted_indices),
        )
        return parents, [r for r in records if (r.payload.get(f.PARENT_ID), r.payload.get(f.SEQUENCE_INDEX)) in wanted]


def search_filter(query: SearchQuery) -> Filter:
    """Complete, searchable (non-chapter) points, narrowed by the query's optional filters."""
    must: dict[str, Any] = {f.COMPLETE: True, f.LEVEL: SEARCHABLE_LEVELS}
    if query.book_id is not None:
        must[f.CALIBRE_ID] = query.book_id
    if query.language:
        must[f.LANGUAGE] = language_spellings(query.language)
    # Whole words of the author field, any case: "austen" finds "Jane Austen".
    text = {f.AUTHOR: query.author} if query.author and query.author.strip() else {}
    return Filter(must=must, text=text)


def contains_every_term(terms: SparseVector, hit: Hit) -> bool:
    """True when the passage holds every lexical term of the query: its stored lexical vector,
    made by the same tokenizer at ingest, has them all."""
    return bool(terms.indices) and hit.lexical_terms.issuperset(terms.indices)


def select_passages(
    hits: Sequence[Hit], cosines: Sequence[float], terms: SparseVector, threshold: float, limit: int
) -> tuple[list[Passage], float | None]:
    """Up to `limit` hits, in engine order, that pass the threshold (or match every query term).

    Returns them with the best cosine among the hits dropped, for the notice when none pass.
    """
    selected: list[Passage] = []
    best_dropped: float | None = None
    for hit, cosine in zip(hits, cosines, strict=True):
        if len(selected) == limit:
            break
        if cosine >= threshold:
            selected.append(passage_from_payload(hit.id, cosine, hit.payload, matched_lexically=False))
        elif contains_every_term(terms, hit):
            selected.append(passage_from_payload(hit.id, cosine, hit.payload, matched_lexically=True))
        else:
            best_dropped = cosine if best_dropped is None else max(best_dropped, cosine)
    return selected, best_dropped


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def passage_from_payload(chunk_id: str, score: float, payload: dict[str, Any], matched_lexically: bool) -> Passage:
    chapter_title = str(payload.get(f.CHAPTER_TITLE, ""))
    return Passage(
        chunk_id=chunk_id,
        score=score,
        text=str(payload.get(f.TEXT, "")),
        book_title=str(payload.get(f.BOOK_TITLE, "")),
        author=str(payload.get(f.AUTHOR, "")),
        section_name=chapter_title,
        locator=Locator(
            chapter_title=chapter_title,
            chapter_index=int(payload.get(f.CHAPTER_INDEX, 0)),
            position=int(payload.get(f.POSITION, 0)),
            page_start=_optional_int(payload.get(f.PAGE_START)),
            page_end=_optional_int(payload.get(f.PAGE_END)),
        ),
        book_key=str(payload.get(f.BOOK_KEY, "")),
        calibre_id=_optional_int(payload.get(f.CALIBRE_ID)),
        file_path=str(payload.get(f.FILE_PATH, "")),
        language=str(payload.get(f.LANGUAGE, "")),
        parent_id=str(payload.get(f.PARENT_ID) or ""),
        sequence_index=int(payload.get(f.SEQUENCE_INDEX, 0)),
        sibling_count=int(payload.get(f.SIBLING_COUNT, 0)),
        matched_lexically=matched_lexically,
    )


def nothing_matched_notice(query: SearchQuery, best_dropped: float | None) -> str:
    if best_dropped is None:
        filters = [
            f"{name} {value!r}"
            for name, value in (("book_id", query.book_id), ("author", query.author), ("language", query.language))
            if value is not None
        ]
        narrowed = f" with the filters {', '.join(filters)}" if filters else ""
        return f"No passage matched the query{narrowed}; check the filters, or ingest the books you mean."
    return (
        f"No passage reached the threshold {query.threshold:.2f} (the closest scored {best_dropped:.2f}); "
        "lower the threshold or rephrase the query."
    )


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
        chapter = str(record.payload.get(f.TEXT, ""))
        text, cut = chapter_window(chapter, [outcome.results[i] for i in indices])
        chapters.append(
            ChapterContext(
                parent_id=record.id,
                book_title=str(record.payload.get(f.BOOK_TITLE, "")),
                author=str(record.payload.get(f.AUTHOR, "")),
                section_name=str(record.payload.get(f.CHAPTER_TITLE, "")),
                text=text,
                trimmed=cut,
                chapter_words=int(record.payload.get(f.WORD_COUNT) or len(chapter.split())),
                result_indices=tuple(indices),
            )
        )
    chapters.sort(key=lambda c: c.result_indices[0])
    wanted = neighbour_positions(outcome.results) if siblings else {}
    neighbours = []
    for record in siblings:
        key = (str(record.payload.get(f.PARENT_ID)), int(record.payload.get(f.SEQUENCE_INDEX, -1)))
        if key in wanted:
            result_index, relation = wanted[key]
            neighbours.append(
                NeighbourChunk(
                    chunk_id=record.id,
                    result_index=result_index,
                    relation=relation,
                    sequence_index=key[1],
                    section_name=str(record.payload.get(f.CHAPTER_TITLE, "")),
                    text=str(record.payload.get(f.TEXT, "")),
                )
            )
    neighbours.sort(key=lambda n: (n.result_index, n.sequence_index))
    stats = HierarchyStats(
        results=len(outcome.results),
        parents_fetched=len(chapters),
        results_sharing_a_parent=sum(len(c.result_indices) for c in chapters if len(c.result_indices) > 1),
        siblings_fetched=len(neighbours),
    )
    notice = ""
    flat = sum(1 for p in outcome.results if not p.parent_id)
    if flat:
        notice = f"{flat} result(s) come from books ingested without chapters (flat): no chapter context for them."
    return dataclasses.replace(
        outcome, parents=tuple(chapters), siblings=tuple(neighbours), hierarchy_stats=stats, notice=notice
    )


# Response budget. Sizes are JSON characters: each string's escaped length plus a fixed allowance
# for the field names, numbers and punctuation of its record (measured on responses rendered with
# proto field names, every field present, then rounded up).
ENVELOPE_CHARS = 450
RESULT_FIXED_CHARS = 370
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
               p.parent_id, p.language)
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
            stats, results=len(results), parents_fetched=len(parents), siblings_fetched=len(siblings)
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
