"""Who may use a store's shards when: many threads read and write a shard at once, one writes it at a time, and a
background merge swaps its segments only while no thread uses it."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager


class ShardAccess:
    """The uses, writes and swaps of a store's shards, by their collections' own names."""

    def __init__(self) -> None:
        self._use = threading.Condition()
        self._users: Counter[str] = Counter()
        self._being_swapped: set[str] = set()
        # Held by each write, and by a background merge from its plan to its swap.
        self._writes: dict[str, threading.Lock] = {}
        self._writes_lock = threading.Lock()

    @contextmanager
    def using(self, target: str) -> Iterator[None]:
        """Use the shard of `target`, once no swap of it is under way; none starts while the block runs."""
        with self._use:
            self._use.wait_for(lambda: target not in self._being_swapped)
            self._users[target] += 1
        try:
            yield
        finally:
            with self._use:
                self._users[target] -= 1
                self._use.notify_all()

    @contextmanager
    def swapping(self, target: str) -> Iterator[None]:
        """Wait until no thread uses the shard of `target`, and keep new ones waiting while the block runs."""
        with self._use:
            self._being_swapped.add(target)
            self._use.wait_for(lambda: self._users[target] == 0)
        try:
            yield
        finally:
            with self._use:
                self._being_swapped.discard(target)
                self._use.notify_all()

    def write_lock(self, target: str) -> threading.Lock:
        """What each write of `target` holds, and a background merge while it stages or swaps its segments."""
        with self._writes_lock:
            return self._writes.setdefault(target, threading.Lock())
