"""Where Calibre's viewer opens a book at a passage: `search:` and the passage's first words, as few as occur
nowhere else in the book (at least MIN_WORDS), computed at ingest and stored with the passage.

Calibre's viewer takes `open_at` as a CFI, a position, a table-of-contents entry or `search:<text>`, which opens
the book at the first place that text occurs (calibre/gui2/viewer/main.py); words that occur once in the book
therefore land on the passage. Counted on the text ingest extracts (the passages are cut from it), case and
spacing aside, as the viewer's search compares. A passage whose first MAX_WORDS words occur elsewhere too gets
no location (its link opens the book).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence

log = logging.getLogger(__name__)

MIN_WORDS = 6
MAX_WORDS = 24
SEARCH = "search:"


def _words(text: str) -> list[str]:
    return text.casefold().replace("’", "'").split()


def viewer_locations(book_text: str, passages: Sequence[str]) -> list[str]:
    """Each passage's `open_at` ("search:" and its first words), or "" where none is unique in `book_text`."""
    words = _words(book_text)
    starts = Counter(tuple(words[i : i + MIN_WORDS]) for i in range(len(words) - MIN_WORDS + 1))
    normalised = " ".join(words)
    locations = []
    for passage in passages:
        mine = passage.split()
        found = ""
        if starts[tuple(_words(" ".join(mine[:MIN_WORDS])))] == 1:
            found = " ".join(mine[:MIN_WORDS])
        else:  # a common opening ("said she", a refrain): longer, until it is the only one
            for n in range(MIN_WORDS + 1, min(MAX_WORDS, len(mine)) + 1):
                probe = " ".join(_words(" ".join(mine[:n])))
                first = normalised.find(probe)
                if first >= 0 and normalised.find(probe, first + 1) < 0:
                    found = " ".join(mine[:n])
                    break
        locations.append(SEARCH + found if found else "")
    missing = locations.count("")
    if missing:
        log.info("%d of %d passages open the book at its start: their first %d words occur elsewhere too",
                 missing, len(passages), MAX_WORDS)
    return locations
