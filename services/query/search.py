"""alexandria_query's domain: one search from the question to the response.

One search is: validate; embed the question (the embedder); the first stage, one store query
(dense, lexical, or both fused with RRF in the engine) for a pool of candidates, without their payloads;
the second stage, ranking them by relevance (ranking.py: the engine's scores of the candidates, or a
cross-encoder when the embedder has one); the threshold and the limit, and the results' payloads read;
for contextual and comprehensive modes the chapters and neighbours around the results (context.py);
the response budget (budget.py).
What a collection records about its model is read once per collection, not on every search:
reading it counts the collection's points (~10 ms at 100,000).

A result's `score` is its relevance in [0, 1] (ranking.py says how it is made) and results are
sorted by it, highest first, in every mode. The threshold drops results scoring under it. One
exception keeps exact-name queries working where the dense model is weak ("Netherfield",
"Pemberley"): a passage that contains every lexical term of the query is kept even below the
threshold, because a literal match is relevant by definition; it is marked `matched_lexically`. A query
that a candidate holds word for word (a quote, ranking.py) puts that candidate first in the modes that match words.

Only points with `complete` true are searched or fetched, and chapters (`level` parent) are
never hits: they come back only as context (a search's candidates have their level checked with their scores:
candidate_filters). The reader's highlights (`level` highlight) are searched when the
query asks for them, ranked by the same stages as passages; they have no chapter or neighbours to add as context.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath, PurePosixPath
from typing import Any, Protocol

import numpy as np

from alexandria.contract import HYPOTHETICAL_PASSAGE_MAX_CHARS, QUERY_LIMIT, QUERY_THRESHOLD
from alexandria.errors import FailedPrecondition, InvalidArgument, NotFound
from alexandria.languages import language_spellings
from alexandria.locator import ChunkLocator
from alexandria.store import (
    WINDOWS,
    CollectionInfo,
    Filter,
    Hit,
    PointRecord,
    SparseVector,
    Store,
    call_store,
    collection_not_found,
)
from alexandria.store import schema as f
from alexandria.store.lexical import encode_query
from alexandria.store.model import SPARSE
from alexandria.store.records import BookRecord, ChunkRecord, CollectionModel, complete
from services.query.budget import fit_to_budget
from services.query.common_words import CommonWords
from services.query.context import assemble_context, neighbour_key, neighbour_positions
from services.query.links import passage_link
from services.query.outcome import ContextMode, Passage, SearchIn, SearchMode, SearchOutcome
from services.query.ranking import (
    CANDIDATE_POOL,
    DEFAULT_SCALE,
    PREFETCH,
    RERANK_DEPTH,
    UNCHECKED_MARGIN,
    PassageReranker,
    ScoreScale,
    Signals,
    best_first,
    first_stage_terms,
    hinted_floor,
    hinted_order,
    holds_quote,
    measure,
    quoted_words,
    quotes_first,
    relevance,
)

# bench/retrieval.py (222 questions over 13 books): hybrid finds more answers in the top five than
# either mode alone, on both halves; the figures are in docs/benchmarks.md.
DEFAULT_SEARCH_MODE = SearchMode.HYBRID
# A candidate deleted between the first stage and the read of its payload means a write came between them: most
# often a book re-ingested, its new version made visible and its old one deleted, where the first stage saw the old
# alone. The search then runs once more on the store as it stands, so that the book is found in its new version
# rather than missed; a second deletion in a row (a whole library reindexed) leaves the candidates gone out.
SEARCH_PASSES = 2
SEARCHED_LEVELS = {
    SearchIn.PASSAGES: f.PASSAGE_LEVELS,
    SearchIn.HIGHLIGHTS: [f.Level.HIGHLIGHT.value],
    SearchIn.BOTH: [*f.PASSAGE_LEVELS, f.Level.HIGHLIGHT.value],
}


@dataclass(frozen=True)
class QueryVector:
    """The query's dense vector, the name of the model that made it, that model's score scale, and the vector of
    the caller's hypothetical passage when it gave one."""

    vector: np.ndarray
    model: str
    scale: ScoreScale = DEFAULT_SCALE
    passage_vector: np.ndarray | None = None

    @property
    def first_stage_vector(self) -> np.ndarray:
        """What the first stage searches with: the question's vector, or its normalised mean with the
        passage's (one dense search that leans towards both)."""
        if self.passage_vector is None:
            return self.vector
        mean = self.vector + self.passage_vector
        normalised: np.ndarray = mean / max(float(np.linalg.norm(mean)), 1e-12)
        return normalised


class QueryEncoder(PassageReranker, Protocol):
    async def encode(self, text: str, passage: str | None = None) -> QueryVector:
        """Embed one query (as a query, not a passage) and, in the same call, the caller's hypothetical passage."""


@dataclass(frozen=True)
class SearchQuery:
    """One alexandria_query call, with defaults already applied by the caller."""

    text: str
    collection: str
    limit: int = int(QUERY_LIMIT.default)
    threshold: float = QUERY_THRESHOLD.default
    context_mode: ContextMode = ContextMode.PRECISE
    search_mode: SearchMode = DEFAULT_SEARCH_MODE
    book_id: int | None = None
    author: str | None = None     # whole words of an author's name, any case
    language: str | None = None
    # What the caller expects the answering passage to say, in the book's words (alexandria_query's
    # hypothetical_passage): searched beside the question, never returned.
    passage: str | None = None
    search_in: SearchIn = SearchIn.PASSAGES


@dataclass(frozen=True)
class Ranked:
    """The candidates, best first, with their relevance; `deleted_since`: whether a candidate read turned out to be
    deleted since the first stage (SEARCH_PASSES)."""

    hits: list[Hit]
    scores: list[float]
    deleted_since: bool = False


@dataclass(frozen=True)
class Selection:
    """The results, the best score among the candidates dropped (for the notice when none pass), and whether a
    candidate read on the way turned out to be deleted since the first stage."""

    results: list[Passage]
    best_dropped: float | None
    deleted_since: bool


def validate(query: SearchQuery) -> None:
    """Reject what cannot be searched, saying what is allowed."""
    if not query.text.strip():
        raise InvalidArgument("The query is empty; pass the question or words to search for.")
    QUERY_LIMIT.check(query.limit)
    QUERY_THRESHOLD.check(query.threshold, "it is the relevance a passage needs")
    if query.passage is not None and len(query.passage) > HYPOTHETICAL_PASSAGE_MAX_CHARS:
        raise InvalidArgument(
            f"hypothetical_passage has {len(query.passage)} characters; at most {HYPOTHETICAL_PASSAGE_MAX_CHARS} "
            "are searched: give one to three sentences the answering passage might contain."
        )
    if not query.collection:
        raise InvalidArgument("No collection named; pass one or set QDRANT_COLLECTION.")
    for name, value in (("author", query.author), ("language", query.language)):
        if value and not value.strip():
            raise InvalidArgument(f"The {name} filter is blank; give one, or leave it out to search every {name}.")


def check_collection(
    collection: str, info: CollectionInfo | None, query_vector: QueryVector, semantic: bool = True
) -> CollectionInfo:
    """`info`, once the collection exists, holds points, and (for a `semantic` search) was embedded by the
    model that embedded the query. A lexical search reads no vector of the model's: it answers from a
    collection of another model too (while a reindex rebuilds it, say)."""
    if info is None:
        raise collection_not_found(collection)
    if info.points_count == 0:
        raise FailedPrecondition(f"Collection '{collection}' is empty; ingest a book into it before searching.")
    if semantic:
        CollectionModel.of(info).check(collection, query_vector.model, int(query_vector.vector.shape[0]))
    return info


class Searcher:
    """Runs searches against one store with one query encoder; store calls go through `call_store`."""

    def __init__(self, store: Store, encoder: QueryEncoder,
                 link_paths: Mapping[PurePosixPath, PurePath] | None = None) -> None:
        self.store = store
        self.encoder = encoder
        self.link_paths = link_paths or {}
        self.common_words = CommonWords(store)
        self._embedded_with: dict[str, CollectionModel] = {}

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
        semantic = query.search_mode is not SearchMode.LEXICAL
        passage = (query.passage or "").strip() or None
        query_vector = await self._encode_for(query.collection, query.text, passage, semantic)
        passage_terms = encode_query(passage) if passage else None
        quote = quoted_words(query.text) if query.search_mode is not SearchMode.SEMANTIC else None
        empty = SearchOutcome(query.text, query.context_mode, query.search_mode, ())
        for passes_left in reversed(range(SEARCH_PASSES)):
            try:
                ranked = await self._rank(query, query_vector, terms, passage_terms)
            except NotFound:
                self._embedded_with.pop(query.collection, None)
                raise
            if not ranked.hits:  # an empty collection is an error, not "nothing matched"
                info = await call_store(self.store, self.store.collection_info, query.collection)
                check_collection(query.collection, info, query_vector, semantic)
            selection = await call_store(
                self.store, self._select, query.collection, ranked, terms, query.threshold, query.limit,
                passage is not None, quote,
            )
            if not selection.deleted_since or not passes_left:
                break
        if not selection.results:
            return dataclasses.replace(empty, notice=nothing_matched_notice(query, selection.best_dropped))
        outcome = dataclasses.replace(empty, results=tuple(selection.results))
        if query.context_mode is not ContextMode.PRECISE:
            parents, siblings = await call_store(
                self.store,
                self._fetch_context, query.collection, selection.results, query.context_mode is ContextMode.COMPREHENSIVE
            )
            outcome = assemble_context(outcome, parents, siblings)
        return fit_to_budget(outcome, budget_chars, reserved_chars)

    async def _encode_for(self, collection: str, text: str, passage: str | None, semantic: bool) -> QueryVector:
        """The query's vector, once the collection is known to exist, to hold points, and to have been
        embedded by the model that embedded the query. The collection's record is read again only
        when the model differs from the one remembered (the collection may have been made anew)."""
        remembered = self._embedded_with.get(collection)
        if remembered is None:
            # A thread whatever the store: the read then overlaps the wait for the embedder.
            query_vector, info = await asyncio.gather(
                self.encoder.encode(text, passage), asyncio.to_thread(self.store.collection_info, collection)
            )
        else:
            query_vector = await self.encoder.encode(text, passage)
            if remembered.matches(query_vector.model, int(query_vector.vector.shape[0])):
                return query_vector
            info = await call_store(self.store, self.store.collection_info, collection)
        self._embedded_with[collection] = CollectionModel.of(check_collection(collection, info, query_vector, semantic))
        return query_vector

    async def _rank(
        self, query: SearchQuery, query_vector: QueryVector, terms: SparseVector, passage_terms: SparseVector | None
    ) -> Ranked:
        """Both stages: the engine's candidates, then each one's relevance, best first.

        With a hypothetical passage, the first stage searches with both (ranking.first_stage_terms) and the
        candidates are ordered by their relevance to both (ranking.hinted_order); a result's score stays its
        relevance to the question."""
        hits, measured = await self.measured_candidates(query, query_vector, terms, passage_terms)
        if not hits:
            return Ranked([], [])
        semantic = query.search_mode is not SearchMode.LEXICAL
        lexical = query.search_mode is not SearchMode.SEMANTIC
        texts = [terms] if passage_terms is None else [terms, passage_terms]
        scores, *passage_scores = (
            relevance(signals, query_vector.scale, semantic=semantic, lexical=lexical and bool(words.indices))
            for signals, words in zip(measured, texts, strict=True)
        )
        order = best_first(scores)
        if passage_scores:
            order = hinted_order(scores, passage_scores[0])
        ranked = Ranked([hits[i] for i in order], [float(scores[i]) for i in order])
        if not await self.encoder.reranks():
            return ranked
        ranked = await call_store(self.store, self._read_best, query.collection, ranked, RERANK_DEPTH)
        best = ranked.hits[:RERANK_DEPTH]
        if not best:
            return ranked
        reranked = await self.encoder.rerank(query.text, [ChunkRecord.from_payload(hit.payload).text for hit in best])
        return Ranked([best[i] for i in best_first(reranked)], [float(score) for score in np.sort(reranked)[::-1]],
                      ranked.deleted_since)

    async def measured_candidates(self, query: SearchQuery, query_vector: QueryVector, terms: SparseVector,
                                  passage_terms: SparseVector | None) -> tuple[list[Hit], list[Signals]]:
        """The first stage's candidates and what the engine measured of each: for the question, and for the
        hypothetical passage when there is one (ranking.measure). bench/calibration.py fits scores on these."""
        search_vector = query_vector.first_stage_vector
        search_terms = first_stage_terms(terms, passage_terms)
        where, checked_after = candidate_filters(query)
        hits = await call_store(self.store, self._candidates, query, where, first_stage_pool(checked_after),
                                search_vector, search_terms)
        if not hits:
            return [], []
        semantic = query.search_mode is not SearchMode.LEXICAL
        multivector = self._embedded_with[query.collection].passage_vectors if semantic else WINDOWS
        texts = [(query_vector.vector if semantic else None, terms)]
        if passage_terms is not None:
            texts.append((query_vector.passage_vector if semantic else None, passage_terms))
        return await call_store(self.store, measure, self.store, query.collection, hits, texts, multivector,
                                checked_after, CANDIDATE_POOL)

    def _candidates(self, query: SearchQuery, where: Filter, pool: int, vector: np.ndarray,
                    terms: SparseVector) -> list[Hit]:
        """The first stage: `pool` candidates for the mode within `where`, whatever the limit (candidate_filters,
        first_stage_pool), without their payloads (_select reads those of the results alone); its lexical search skips
        the words most passages hold (common_words.py)."""
        if query.search_mode is SearchMode.SEMANTIC or not terms.indices:
            return self.store.query_dense(query.collection, vector, where, pool, with_payload=False)
        terms = self.common_words.without_common(query.collection, terms)
        if query.search_mode is SearchMode.LEXICAL:
            return self.store.query_sparse(query.collection, terms, where, pool, with_payload=False)
        return self.store.query_hybrid(query.collection, vector, terms, where, pool, PREFETCH, with_payload=False)

    def _select(self, collection: str, ranked: Ranked, terms: SparseVector, threshold: float, limit: int,
                hinted: bool, quote: str | None) -> Selection:
        """The results (select_passages), those that hold the `quote` first (_quotes_first), the payloads of those
        picked read then: on a collection larger than the page cache, each candidate's payload is a read from disk
        (at 1,000,000 passages, reading all 50 cost the first stage about 4 ms of its 28 right after a restart), and a
        response shows five. A pick whose book turns out to have a newer version among those read, or that is gone
        from the store since, makes room for the next candidate (and a deletion since the first stage has `search`
        run once more: SEARCH_PASSES)."""
        if quote is not None:
            ranked = self._quotes_first(collection, ranked, terms, quote)
        while True:
            if unread := terms_to_read(ranked, terms, threshold, limit, hinted):
                ranked = self._read_terms(collection, ranked, unread, terms)
            picked, best_dropped = select_passages(ranked, terms, threshold, limit, hinted)
            unread = [ranked.hits[i] for i, _ in picked if not ranked.hits[i].payload]
            if not unread:
                results = [passage_from_payload(ranked.hits[i].id, ranked.scores[i], ranked.hits[i].payload, matched,
                                                self.link_paths) for i, matched in picked]
                return Selection(results, best_dropped, ranked.deleted_since)
            ranked = self._read(collection, ranked, unread)

    def _quotes_first(self, collection: str, ranked: Ranked, terms: SparseVector, quote: str) -> Ranked:
        """`ranked` with the candidates whose text holds `quote` first (ranking.quotes_first). Only a candidate that
        holds every query term can: the terms of all are read (one engine call), then the texts of those alone."""
        if unread := [hit for hit in ranked.hits if hit.terms_held is None]:
            ranked = self._read_terms(collection, ranked, unread, terms)
        if holders := [hit for hit in ranked.hits if contains_every_term(terms, hit) and not hit.payload]:
            ranked = self._read(collection, ranked, holders)
        quoting = [contains_every_term(terms, hit) and holds_quote(ChunkRecord.from_payload(hit.payload).text, quote)
                   for hit in ranked.hits]
        if not any(quoting):
            return ranked
        order, scores = quotes_first(ranked.scores, quoting)
        return Ranked([ranked.hits[i] for i in order], scores, ranked.deleted_since)

    def _read_terms(self, collection: str, ranked: Ranked, hits: Sequence[Hit], terms: SparseVector) -> Ranked:
        """`ranked` with the query terms each of `hits` holds (none for a candidate no longer stored: its payload's
        read finds it gone), from one engine call that scores them for each term alone: a passage holds a term when
        it scores for it. Reading their lexical vectors instead (a few hundred term ids each) took 4.7 ms for 55
        candidates at 10,000 books, this 1.0, to the same answer for each of 200 questions (CHANGELOG.md)."""
        ids = [hit.id for hit in hits]
        answers = self.store.similarities(collection, ids,
                                          [(SparseVector([term], [1.0]), SPARSE) for term in terms.indices])
        held = {id_: frozenset(term for term, scores in zip(terms.indices, answers, strict=True)
                               if scores.get(id_, 0.0) > 0)
                for id_ in ids}
        return dataclasses.replace(ranked, hits=[
            dataclasses.replace(hit, terms_held=held[hit.id]) if hit.id in held else hit for hit in ranked.hits
        ])

    def _read_best(self, collection: str, ranked: Ranked, count: int) -> Ranked:
        """`ranked` with the payloads of its first `count` candidates read, each one gone or of an older version
        making room for the next (a cross-encoder reads them)."""
        while unread := [hit for hit in ranked.hits[:count] if not hit.payload]:
            ranked = self._read(collection, ranked, unread)
        return ranked

    def _read(self, collection: str, ranked: Ranked, hits: Sequence[Hit]) -> Ranked:
        """`ranked` with the payloads of `hits` read, less those no longer stored (or stored without one: a candidate
        counts as read by its payload) and those of a book's older version than another candidate read
        (newest_versions); it records whether any of `hits` was deleted since the first stage."""
        payloads = {record.id: record.payload
                    for record in self.store.retrieve(collection, [hit.id for hit in hits]) if record.payload}
        asked = {hit.id for hit in hits}
        kept = [(dataclasses.replace(hit, payload=payloads[hit.id]) if hit.id in payloads else hit, score)
                for hit, score in zip(ranked.hits, ranked.scores, strict=True)
                if hit.id not in asked or hit.id in payloads]
        newest = {hit.id for hit in newest_versions([hit for hit, _ in kept if hit.payload])}
        kept = [(hit, score) for hit, score in kept if not hit.payload or hit.id in newest]
        return Ranked([hit for hit, _ in kept], [score for _, score in kept],
                      ranked.deleted_since or len(payloads) < len(asked))

    def _fetch_context(
        self, collection: str, results: Sequence[Passage], with_siblings: bool
    ) -> tuple[list[PointRecord], list[PointRecord]]:
        """The results' chapters in one retrieve and, if asked, their neighbours in one scroll."""
        parent_ids = list(dict.fromkeys(p.parent_id for p in results if p.parent_id))
        if not parent_ids:
            return [], []
        parents = [
            r for r in self.store.retrieve(collection, parent_ids)
            if (chunk := ChunkRecord.from_payload(r.payload)).book.complete and chunk.level == f.Level.PARENT
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
            complete(**{f.PARENT_ID: wanted_parents, f.SEQUENCE_INDEX: wanted_indices}),
            limit=len(wanted_parents) * len(wanted_indices),
        )
        return parents, [r for r in records if neighbour_key(ChunkRecord.from_payload(r.payload)) in wanted]


def newest_versions(hits: list[Hit]) -> list[Hit]:
    """The candidates of each book's newest version: while a re-ingest replaces a book, both versions are
    visible for a moment, and a search must return the book once, not twice."""
    versions = [(book.book_key, book.version) for book in (BookRecord.from_payload(hit.payload) for hit in hits)]
    newest: dict[str, int] = {}
    for key, version in versions:
        newest[key] = max(version, newest.get(key, version))
    return [hit for hit, (key, version) in zip(hits, versions, strict=True) if version == newest[key]]


def search_filter(query: SearchQuery) -> Filter:
    """Complete points of the levels the query searches in, narrowed by its optional filters."""
    must: dict[str, Any] = {f.LEVEL: SEARCHED_LEVELS[query.search_in]}
    if query.book_id is not None:
        must[f.CALIBRE_ID] = query.book_id
    if query.language:
        must[f.LANGUAGE] = language_spellings(query.language)
    # Whole words of the author field, any case: "austen" finds "Jane Austen".
    text = {f.AUTHOR: query.author} if query.author else {}
    return dataclasses.replace(complete(**must), text=text)


def candidate_filters(query: SearchQuery) -> tuple[Filter, Filter | None]:
    """The first stage's filter, and the one the candidates' scores then apply to them alone (None: none).

    A search of the passages leaves its level condition to the second: passages are nearly every point with vectors
    (the chapters, the only others but the few highlights, hold no lexical terms: on the retrieval bench's books 3.5
    of the first 70 candidates were chapters on average, hence UNCHECKED_MARGIN), and the engine checks a level at each
    point its searches visit, where the `complete` flag costs a fraction of that: at 10,000 books the fused first stage
    took 21.3 ms p50 with both, 15.5 with `complete` alone (CHANGELOG.md). A search of the highlights, a small share of the points, keeps it in the first stage, where the
    engine reads them from the level's index."""
    where = search_filter(query)
    if query.search_in is SearchIn.HIGHLIGHTS:
        return where, None
    levels = {f.LEVEL: where.must[f.LEVEL]}
    return dataclasses.replace(where, must={k: v for k, v in where.must.items() if k != f.LEVEL}), Filter(must=levels)


def first_stage_pool(checked_after: Filter | None) -> int:
    """How many candidates the first stage finds: CANDIDATE_POOL, and UNCHECKED_MARGIN more where their level is
    checked with their scores (`checked_after`, from candidate_filters), so that a pool of CANDIDATE_POOL is left."""
    return CANDIDATE_POOL if checked_after is None else CANDIDATE_POOL + UNCHECKED_MARGIN


def contains_every_term(terms: SparseVector, hit: Hit) -> bool:
    """True when the passage holds every lexical term of the query: its stored lexical vector,
    made by the same tokenizer at ingest, has them all (read beforehand: terms_to_read)."""
    if not terms.indices:
        return False
    if hit.terms_held is None:
        raise RuntimeError(f"the lexical terms of candidate {hit.id} were not read before they were needed")
    return hit.terms_held.issuperset(terms.indices)


def terms_to_read(ranked: Ranked, terms: SparseVector, threshold: float, limit: int, hinted: bool) -> list[Hit]:
    """The candidates whose lexical terms select_passages may look at and that are not read yet: those under the
    threshold, unless enough reach it. A question answered by `limit` passages over the threshold needs none of them
    (reading every candidate's whole lexical vector with the first stage once cost it about a third of its time)."""
    if not terms.indices or (not hinted and sum(score >= threshold for score in ranked.scores) >= limit):
        return []
    return [hit for hit, score in zip(ranked.hits, ranked.scores, strict=True)
            if score < threshold and hit.terms_held is None]


def select_passages(
    ranked: Ranked, terms: SparseVector, threshold: float, limit: int, hinted: bool = False
) -> tuple[list[tuple[int, bool]], float | None]:
    """Up to `limit` candidates, best first, that pass the threshold (or match every query term), as their places in
    `ranked` and whether each was kept for its words alone (matched_lexically).

    With a hypothetical passage (`hinted`), the threshold decides whether the question is answered at all: once
    one candidate passes it on its own relevance to the question (ranking.hinted_floor), the passage's order
    picks among the candidates that reach part of it.
    Returns them with the best score among the candidates dropped, for the notice when none pass.
    """
    if hinted and any(score >= threshold or contains_every_term(terms, hit)
                      for hit, score in zip(ranked.hits, ranked.scores, strict=True)):
        threshold = hinted_floor(threshold)
    selected: list[tuple[int, bool]] = []
    best_dropped: float | None = None
    for place, (hit, score) in enumerate(zip(ranked.hits, ranked.scores, strict=True)):
        if len(selected) == limit:
            break
        if score >= threshold:
            selected.append((place, False))
        elif contains_every_term(terms, hit):
            selected.append((place, True))
        else:
            best_dropped = score if best_dropped is None else max(best_dropped, score)
    return selected, best_dropped


def passage_from_payload(chunk_id: str, score: float, payload: dict[str, Any], matched_lexically: bool,
                         link_paths: Mapping[PurePosixPath, PurePath]) -> Passage:
    chunk = ChunkRecord.from_payload(payload)
    book = chunk.book
    return Passage(
        chunk_id=chunk_id,
        score=score,
        text=chunk.text,
        book_title=book.title,
        author=book.author,
        section_name=chunk.chapter_title,
        locator=ChunkLocator(
            chapter_title=chunk.chapter_title,
            chapter_index=chunk.chapter_index,
            position=chunk.position,
            page_start=chunk.page_start,
            page_end=chunk.page_end,
            text_source=chunk.text_source,
        ),
        book_key=book.book_key,
        calibre_id=book.calibre_id,
        file_path=book.file_path,
        language=book.language,
        parent_id=chunk.parent_id or "",
        sequence_index=chunk.sequence_index,
        sibling_count=chunk.sibling_count,
        matched_lexically=matched_lexically,
        link=passage_link(chunk, link_paths),
        kind="highlight" if chunk.level == f.Level.HIGHLIGHT else "passage",
        note=chunk.note,
    )


def nothing_matched_notice(query: SearchQuery, best_dropped: float | None) -> str:
    if best_dropped is None:
        filters = [
            f"{name} {value!r}"
            for name, value in (("book_id", query.book_id), ("author", query.author), ("language", query.language))
            if value
        ]
        narrowed = f" with the filters {', '.join(filters)}" if filters else ""
        if query.search_in is SearchIn.HIGHLIGHTS:
            return (f"No highlight matched the query{narrowed}: highlights made in Calibre's viewer become searchable "
                    "at the next sync of their book's library (automatic while the stack runs); search_in "
                    "passages searches the books' text.")
        if filters:
            return f"No passage matched the query{narrowed}; check the filters, or ingest the books you mean."
        if query.search_mode is SearchMode.LEXICAL:
            return ("No passage holds any word of the query; try other words, or search_mode hybrid to search by "
                    "meaning too.")
        return "No passage matched the query; ingest the books you mean."
    return (
        f"No passage reached the threshold {query.threshold:.2f} (the closest scored {best_dropped:.2f}); "
        "lower the threshold or rephrase the query."
    )
