"""The store half of alexandria_stats: what the collection holds and how healthy it is."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from alexandria.errors import DeadlineExceeded, Unavailable
from alexandria.model_languages import coverage_note
from alexandria.store import Store
from alexandria.store.records import CollectionModel, complete_books, complete_books_by_language

log = logging.getLogger(__name__)

# Status words besides the engine's own ("green", "yellow"):
MISSING = "missing"          # the collection has not been created: nothing ingested yet
UNREACHABLE = "unreachable"  # the Qdrant server did not answer


@dataclass
class LanguageNotes:
    """The language note of each collection, read again only once it is `max_age_s` old.

    Its books of each language take a facet read of the store per language but the largest, about half of a first
    alexandria_stats (3 s of 6 at 7,500 books, before the largest was left out), and the embedded store holds the
    process's GIL through each. While a library is being written, a client that polls alexandria_stats for the sync's
    progress would have them all read again at every call; the note is advice about the library as a whole, which a
    minute does not change."""

    max_age_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _read: dict[tuple[str, str], tuple[float, str]] = field(default_factory=dict)

    def note(self, store: Store, collection: str, model: str, books_held: int) -> str:
        kept = self._read.get((collection, model))
        if kept is not None and self.clock() - kept[0] < self.max_age_s:
            return kept[1]
        note = coverage_note(model, complete_books_by_language(store, collection, books_held))
        self._read[(collection, model)] = (self.clock(), note)
        return note


@dataclass(frozen=True)
class CollectionStatistics:
    connected: bool
    collection_name: str
    points_count: int
    vector_size: int
    status: str
    books: int
    model: str
    backend: str
    disk_bytes: int | None = None  # segments and write-ahead log; None: the store cannot tell (a server)
    wal_bytes: int | None = None
    quantization: str = ""  # of the dense vectors; empty when there is no collection
    language_note: str = ""  # many books in languages the model was not trained on (model_languages.py)
    search_note: str = ""  # its size changed how its dense searches run (CollectionStorage.search_note)


def collection_stats(store: Store, collection: str, language_notes: LanguageNotes) -> CollectionStatistics:
    """Counts for one collection; a missing collection or an unreachable server is a state, not an error."""
    empty = CollectionStatistics(True, collection, 0, 0, MISSING, 0, "", store.backend)
    try:
        info = store.collection_info(collection)
        if info is None:
            return empty
        # Only complete books count: a book being written, or one whose ingest was killed half-way (its
        # points stay until it is ingested again or removed), is not in the library and no search returns it.
        points_by_book = complete_books(store, collection)
        books = len(points_by_book)
        points = sum(points_by_book.values())
        storage = store.collection_storage(collection)
        model = CollectionModel.of(info).name or ""
        language_note = language_notes.note(store, collection, model, books)
    except (Unavailable, DeadlineExceeded) as exc:
        log.warning("store unreachable for stats: %s", exc.message)
        return CollectionStatistics(False, collection, 0, 0, UNREACHABLE, 0, "", store.backend)
    return CollectionStatistics(
        connected=True,
        collection_name=info.name,
        points_count=points,
        vector_size=info.vector_size,
        status=info.status,
        books=books,
        model=model,
        backend=store.backend,
        disk_bytes=storage.disk_bytes,
        wal_bytes=storage.wal_bytes,
        quantization=storage.quantization,
        language_note=language_note,
        search_note=storage.search_note,
    )
