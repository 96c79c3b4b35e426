"""The last facet counts read, each kept until its collection is written again (tuning.KEPT_FACETS says why)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from alexandria.store.embedded import tuning

# A facet asked of a collection: its key, its filter (repr) and its limit.
FacetAsked = tuple[str, str, int]


class KeptFacets:
    """Facet counts by the collection's own name and what was asked of it."""

    def __init__(self) -> None:
        # By own name: a number drawn anew at each write (and when dropped); facets read at the number they hold.
        self._changes = itertools.count(1)
        self._written: dict[str, int] = {}
        self._kept: dict[tuple[str, FacetAsked], tuple[int, dict[Any, int]]] = {}
        self._lock = threading.Lock()

    def written(self, target: str) -> None:
        """`target` was written (or dropped): what was read of it before is stale."""
        self._written[target] = next(self._changes)

    def counts(self, target: str, asked: FacetAsked, read: Callable[[], dict[Any, int]]) -> dict[Any, int]:
        """The counts `asked` of `target`: kept ones while it was not written since, else `read` again."""
        kept_as = (target, asked)
        # Drawn before the read: a write during it leaves what it read stale, and this number with it.
        written = self._written.get(target, 0)
        with self._lock:
            kept = self._kept.get(kept_as)
        if kept is not None and kept[0] == written:
            return dict(kept[1])
        counts = read()
        with self._lock:
            self._kept.pop(kept_as, None)
            self._kept[kept_as] = (written, counts)
            while len(self._kept) > tuning.KEPT_FACETS:
                del self._kept[next(iter(self._kept))]
        return dict(counts)
