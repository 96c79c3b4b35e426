"""Where Calibre's viewer opens a book at a passage: `search:` and the passage's first words, as few as occur
nowhere else in the book (at least MIN_WORDS), computed at ingest and stored with the passage.

Calibre's viewer takes `open_at` as a CFI, a position, a table-of-contents entry or `search:<text>`, which opens
the book at the first place that text occurs (calibre/gui2/viewer/ui.py). Its search compares as an ICU collator
at primary strength that ignores punctuation (calibre/gui2/viewer/search.py): case, accents, spaces and
punctuation aside, anywhere, even inside a word. `viewer_key` is that comparison, so words counted once here
occur once to the viewer: "he had never seen" is found inside "she had never seen" there, and here too.

The words are written with letters and digits alone. The viewer ignores the rest anyway, and Calibre decodes a
`calibre://` URL's query twice (calibre/gui2/ui.py: `parse_qs(unquote(query))`), so an `&` or `+` in the words
would cut or change them. A passage whose first MAX_WORDS words occur elsewhere too gets no location (its link
opens the book).
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Sequence
from itertools import islice

from services.ingest.documents import iter_words

log = logging.getLogger(__name__)

MIN_WORDS = 6
MAX_WORDS = 24
SEARCH = "search:"
_NOT_COMPARED = re.compile(r"[\W_]+")


def viewer_key(text: str) -> str:
    """`text` as the viewer's search compares it: its letters and digits, case and accents aside (NFKD parts
    ligatures and drops diacritics; soft hyphens and joiners go with the punctuation)."""
    return _NOT_COMPARED.sub("", unicodedata.normalize("NFKD", text)).casefold()


def _search_words(passage: str) -> list[str]:
    words = (_NOT_COMPARED.sub("", passage[start:end]) for start, end in iter_words(passage))
    return list(islice((word for word in words if word), MAX_WORDS))


def viewer_locations(book_text: str, passages: Sequence[str]) -> list[str]:
    """Each passage's `open_at` ("search:" and its first words), or "" where none is unique in `book_text`."""
    book = viewer_key(book_text)
    locations = []
    for passage in passages:
        words = _search_words(passage)
        found = ""
        for n in range(MIN_WORDS, len(words) + 1):  # a common opening ("said she", a refrain): longer, until unique
            probe = viewer_key("".join(words[:n]))
            first = book.find(probe)
            if first < 0:
                break
            if book.find(probe, first + 1) < 0:
                found = " ".join(words[:n])
                break
        locations.append(SEARCH + found if found else "")
    missing = locations.count("")
    if missing:
        log.info("%d of %d passages open the book at its start: their first %d words occur elsewhere too",
                 missing, len(passages), MAX_WORDS)
    return locations
