"""Where Calibre's viewer opens a book at a passage: `search:` and the passage's first words, as few as occur
nowhere else in the book (at least MIN_WORDS), computed at ingest and stored with the passage.

Calibre's viewer takes `open_at` as a CFI, a position, a table-of-contents entry or `search:<text>`, which opens
the book at the first place that text occurs (calibre/gui2/viewer/ui.py). Its search compares with ICU's root
collator at primary strength, spaces and punctuation ignored (calibre/gui2/viewer/search.py, `utils/icu.py`:
`primary_collator_without_punctuation`): case and accents aside, anywhere, even inside a word. `viewer_key` writes a
text as that collator's primary weights (through PyICU, the same ICU), so words counted once here occur once to the
viewer: "he had never seen" is found inside "she had never seen" there, and here too. The viewer shows footnote
markers that a passage's text leaves out, so the words are counted in the book as read and as shown
(documents.BookText). A passage with no such run among its first MAX_WORDS words gets no location (its link opens
the book).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

import icu

from services.ingest.documents import BookText, word_spans

log = logging.getLogger(__name__)

MIN_WORDS = 6
MAX_WORDS = 24
SEARCH = "search:"
# The words are looked for among the passage's first characters: far more than MAX_WORDS words take.
_OPENING_CHARS = 1000


@functools.cache
def _primary_collator() -> icu.Collator:
    collator = icu.Collator.createInstance(icu.Locale.getRoot())
    collator.setStrength(icu.Collator.PRIMARY)
    collator.setAttribute(icu.UCollAttribute.ALTERNATE_HANDLING, icu.UCollAttributeValue.SHIFTED)
    return collator


# Each character seen so far -> its primary weights, a byte a character ("" for one the viewer ignores).
_WEIGHTS: dict[int, str] = {}


def viewer_key(text: str) -> str:
    """`text` as the viewer's search compares it: each character's primary collation weights (its sort key's,
    less the terminator), so "É" and "e", "ß" and "ss" are equal and spaces, punctuation and soft hyphens are
    nothing. A match here at a character that begins no weight counts an extra occurrence, never loses one."""
    unseen = {ord(char) for char in set(text)}.difference(_WEIGHTS)
    for code in unseen:
        _WEIGHTS[code] = _primary_collator().getSortKey(chr(code))[:-1].decode("latin-1")
    return text.translate(_WEIGHTS)


def viewer_locations(book: BookText, passages: Sequence[str]) -> list[str]:
    """Each passage's `open_at` ("search:" and its first words, as the passage writes them), or "" where no run of
    them occurs once in the book, as read and as shown."""
    shown = viewer_key(book.shown)
    read = shown if book.read == book.shown else viewer_key(book.read)
    locations = [_location(read, shown, passage[:_OPENING_CHARS]) for passage in passages]
    missing = locations.count("")
    if missing:
        log.info("%d of %d passages open the book at its start: no run of their first %d words is unique in it",
                 missing, len(passages), MAX_WORDS)
    return locations


def _location(read: str, shown: str, opening: str) -> str:
    """"search:" and the fewest of the opening's first words (MIN_WORDS at least) found once in the book as `read`
    and once as `shown` (viewer keys): then the one place the viewer finds is the passage's own.

    Words the viewer does not find at all have a marker between them at the passage's own place: the run starts a
    word later until it is past the marker, and the link opens a few words into the passage. Found, but not once in
    both, they go on a word, as a common opening does."""
    spans = word_spans(opening)[:MAX_WORDS]
    first_word = 0
    while first_word + MIN_WORDS <= len(spans):
        start = spans[first_word][0] if first_word else 0  # from the passage's start, its opening quote too
        for last_word in range(first_word + MIN_WORDS - 1, len(spans)):
            words = opening[start:spans[last_word][1]]
            probe = viewer_key(words)
            found = shown.find(probe)
            if found < 0:
                # The gap may be anywhere in the run: what matched with a word fewer may have matched elsewhere.
                first_word += 1
                break
            if shown.find(probe, found + 1) < 0 and (read is shown or _once(read, probe)):
                return SEARCH + " ".join(words.split())
        else:
            return ""  # a common opening ("said she", a refrain) all the way: longer found nothing unique
    return ""


def _once(text: str, probe: str) -> bool:
    first = text.find(probe)
    return first >= 0 and text.find(probe, first + 1) < 0
