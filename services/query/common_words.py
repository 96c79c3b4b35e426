"""Which of a query's words are common in a collection, so that the first stage's lexical search skips them.

A word found in most passages weighs almost nothing in BM25: the IDF of a word in half the passages is ln 2, of a
word in one passage in a thousand about 7. Yet its list of passages is the longest the lexical search reads, and it
grows with the library: at 3 million points the lexical half of the first stage took 23.7 ms (issue 26's note).
No stop-word list does this job (every list is one language's: German "die" is English "die"); the collection's own
passages do.

A word is common when more than COMMON_SHARE of a sample of the collection's passages hold it: the first
SAMPLE_PASSAGES by id, which are a random draw (a point's id is a hash). A word in half the passages is in about half
of a sample of 500 (give or take 2%), so the words the rule misjudges sit at the boundary, where dropping one or not
changes little. The sample is drawn again once it is SAMPLE_KEPT_S old: nothing is kept beside the collection, so
ingest, remove, sync and reindex need do nothing to keep it in step. Drawing it (a scroll and the ingest's lexical
encoder over the texts) costs tens of milliseconds, once per collection in that time; a search pays nothing else.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from alexandria.store import SparseVector, Store
from alexandria.store import schema as f
from alexandria.store.lexical import encode_document
from alexandria.store.model import Filter

COMMON_SHARE = 0.5
SAMPLE_PASSAGES = 500
# Under this many passages a sample says too little, and the lexical search is quick anyway: nothing is dropped.
MIN_SAMPLE = 100
SAMPLE_KEPT_S = 1800.0
PASSAGES = Filter(must={f.LEVEL: f.PASSAGE_LEVELS, f.COMPLETE: True})


@dataclass(frozen=True)
class Sample:
    """The common words of a collection (with the share of sampled passages holding each), and when it was drawn."""

    shares: dict[int, float]
    drawn_at: float


class CommonWords:
    """The common words of each collection a search met, drawn from a sample of its passages and kept SAMPLE_KEPT_S."""

    def __init__(self, store: Store, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.clock = clock
        self._samples: dict[str, Sample] = {}
        self._lock = threading.Lock()

    def without_common(self, collection: str, terms: SparseVector) -> SparseVector:
        """`terms` without the collection's common words (the least common of them when all are). Blocking: it draws
        the collection's sample when it has none young enough."""
        common = self.common(collection)
        if not any(word in common for word in terms.indices):
            return terms
        kept = [word for word in terms.indices if word not in common] or [min(terms.indices, key=common.__getitem__)]
        return SparseVector(indices=kept, values=[1.0] * len(kept))

    def common(self, collection: str) -> dict[int, float]:
        """The collection's common words, each with the share of sampled passages that hold it."""
        now = self.clock()
        with self._lock:
            sample = self._samples.get(collection)
        if sample is None or now - sample.drawn_at >= SAMPLE_KEPT_S:
            sample = Sample(self._draw(collection), now)
            with self._lock:
                self._samples[collection] = sample
        return sample.shares

    def _draw(self, collection: str) -> dict[int, float]:
        texts = [str(r.payload.get(f.TEXT, "")) for r in self.store.scroll(collection, PASSAGES, SAMPLE_PASSAGES)]
        if len(texts) < MIN_SAMPLE:
            return {}
        holding = Counter(word for text in texts for word in set(encode_document(text).indices))
        return {word: count / len(texts) for word, count in holding.items() if count / len(texts) > COMMON_SHARE}
