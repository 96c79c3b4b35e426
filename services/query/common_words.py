"""Which of a query's words are common in a collection, so that the first stage's lexical search skips them.

A word found in most passages weighs almost nothing in BM25: the IDF of a word in half the passages is ln 2, of a
word in one passage in a thousand about 7. Yet its list of passages is the longest the lexical search reads, and it
grows with the library: at 3 million points the lexical half of the first stage took 23.7 ms (issue 26's note).
No stop-word list does this job (every list is one language's: German "die" is English "die"); the collection's own
statistics do.

A word's IDF is the engine's own, read the first time a search has the word and then kept for IDF_KEPT_S: the score
that a one-word query gives the passage it ranks first, over that passage's weight for the word (the ingest's lexical
encoder, which is deterministic). So nothing is stored beside the collection to keep in step with ingest, remove, sync
and reindex: the IDF is the one the engine's BM25 scores use at that moment (which counts a removed passage until its
segment is vacuumed), at most IDF_KEPT_S old. The one read costs what one lexical query with the word costs.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from alexandria.store import Filter, SparseVector, Store
from alexandria.store import schema as f
from alexandria.store.lexical import encode_document

# BM25's IDF, ln(1 + (N - n + 0.5) / (n + 0.5)), of a word in n = N / 2 of the N passages, whatever N: the words
# above that share of the passages are left out of the first stage.
COMMON_IDF = math.log(2.0)
IDF_KEPT_S = 600.0
MAX_KEPT_WORDS = 100_000
# The passages: the points whose lexical vectors were encoded from their text alone.
PASSAGES = Filter(must={f.LEVEL: f.PASSAGE_LEVELS})


class CommonWords:
    """The IDF of each word a search met, by collection, read from the engine and kept for IDF_KEPT_S."""

    def __init__(self, store: Store, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.clock = clock
        self._idf: dict[tuple[str, int], tuple[float, float]] = {}  # (collection, word) -> (IDF, when read)
        self._lock = threading.Lock()

    def without_common(self, collection: str, terms: SparseVector) -> SparseVector:
        """`terms` without the words in more than half of the collection's passages (the rarest one when all are).
        Blocking: it may query the store (see the module docstring)."""
        if not terms.indices:
            return terms
        idfs = {word: self.idf(collection, word) for word in terms.indices}
        kept = [word for word in terms.indices if idfs[word] >= COMMON_IDF] or [max(idfs, key=idfs.__getitem__)]
        return SparseVector(indices=kept, values=[1.0] * len(kept))

    def idf(self, collection: str, word: int) -> float:
        """The word's IDF in the collection (infinite for a word no passage holds)."""
        now = self.clock()
        with self._lock:
            known = self._idf.get((collection, word))
        if known is not None and now - known[1] < IDF_KEPT_S:
            return known[0]
        idf = self._read_idf(collection, word)
        with self._lock:
            if len(self._idf) >= MAX_KEPT_WORDS:
                self._idf.clear()
            self._idf[(collection, word)] = (idf, now)
        return idf

    def _read_idf(self, collection: str, word: int) -> float:
        hits = self.store.query_sparse(collection, SparseVector(indices=[word], values=[1.0]), PASSAGES, 1)
        if not hits:
            return math.inf
        stored = encode_document(str(hits[0].payload.get(f.TEXT, "")))
        weight = dict(zip(stored.indices, stored.values, strict=True)).get(word)
        return hits[0].score / weight if weight else math.inf
