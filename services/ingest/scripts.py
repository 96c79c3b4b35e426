"""Writing systems without spaces between words: Chinese, Japanese, Thai, Lao, Khmer, Burmese.

Their words and sentences come from ICU's break iterators (PyICU): a dictionary finds the words of
a run of Han, kana or Thai letters, and the sentence rules end a sentence at `。`, `！` or `？` with no
space or capital after it. ICU was chosen over per-language segmenters by measurement (one package for
every such script, ~50 MB installed; on the first chapter of 吾輩は猫である and on Lu Xun's 祝福, 1.9
and 2.8 million characters a second, against fugashi + unidic-lite's 0.39 (250 MB of dictionary) and
jieba's 0.15, with word counts within 10% of theirs).

A book's language (Calibre's, else its file's) says whether its sentences follow ICU's rules; a book
with none is judged by its letters (`detected_language`). Words follow the script, whatever the
language: `word_spans` cuts a run of these scripts by ICU's dictionary wherever it appears, so a
Japanese quotation in an English book counts its words too.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator

import icu

from alexandria.languages import language_code

# Letters of the scripts written without spaces (with Japanese's iteration marks and long vowel mark).
_UNSPACED_LETTERS = (
    "\u0e00-\u0e7f"  # Thai
    "\u0e80-\u0eff"  # Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u3005-\u3007\u303b"  # 々 〆 〇 〻
    "\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"  # hiragana, katakana, halfwidth katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff"  # Han
)
UNSPACED_LETTER = re.compile(f"[{_UNSPACED_LETTERS}]")
UNSPACED_RUN = re.compile(f"[{_UNSPACED_LETTERS}]+")
# CJK and fullwidth punctuation (、。「」！？…): no space around it either.
_UNSPACED_JOINERS = re.compile(
    f"[{_UNSPACED_LETTERS}\u3001-\u3004\u3008-\u3011\u3014-\u301f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40"
    "\uff5b-\uff65]"
)
_OPENING_QUOTES = frozenset("「『（〈《【〔［｛“‘([{")
_KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")

# ISO 639-3 codes of the languages written without spaces, and the ICU locale of each.
ICU_LOCALES = {
    "zho": "zh", "cmn": "zh", "wuu": "zh", "lzh": "zh", "yue": "yue", "jpn": "ja",
    "tha": "th", "lao": "lo", "khm": "km", "mya": "my",
}
# Codes that name no language of the text: as good as none.
_NO_LANGUAGE = frozenset({"", "und", "mul", "zxx", "mis"})
# A book is judged by its first this many characters: enough letters to tell, read in a millisecond.
DETECTION_SAMPLE_CHARS = 20_000
_SCRIPT_LANGUAGES = (("\u0e00-\u0e7f", "tha"), ("\u0e80-\u0eff", "lao"), ("\u1000-\u109f", "mya"),
                     ("\u1780-\u17ff", "khm"))


class _ThreadIterators(threading.local):
    """ICU's break iterators keep the text they walk: each thread has its own, made once."""

    def __init__(self) -> None:
        self.by_kind: dict[tuple[str, str], icu.BreakIterator] = {}


_iterators = _ThreadIterators()


def detected_language(text: str) -> str | None:
    """The language of a text written mostly in a script without spaces (kana: Japanese; Han alone:
    Chinese; Thai, Lao, Khmer, Burmese), judged by its first DETECTION_SAMPLE_CHARS characters; None for
    text written mostly in other scripts (Latin, Cyrillic, ...), whose words spaces already separate."""
    sample = text[:DETECTION_SAMPLE_CHARS]
    letters = sum(1 for char in sample if char.isalpha())
    unspaced = len(UNSPACED_LETTER.findall(sample))
    if not letters or unspaced * 2 < letters:
        return None
    if _KANA.search(sample):
        return "jpn"
    counts = {code: len(re.findall(f"[{block}]", sample)) for block, code in _SCRIPT_LANGUAGES}
    script, count = max(counts.items(), key=lambda item: item[1])
    return script if count * 2 >= unspaced else "zho"


def joins_without_space(left: str, right: str) -> bool:
    """Whether a line ending in `left` runs on into a line starting with `right` with no space between: a line
    break inside Chinese, Japanese or Thai text falls between two letters of one sentence (or a word)."""
    return bool(_UNSPACED_JOINERS.match(left[-1:]) and _UNSPACED_JOINERS.match(right[:1]))


def unspaced_locale(language: str | None, text: str) -> str | None:
    """The ICU locale whose sentence rules a book follows: its language's (Calibre's or the file's) when
    that is written without spaces, the detected one when it names none; None for every other language."""
    code = language_code(language or "")
    if code in _NO_LANGUAGE:
        code = detected_language(text) or ""
    return ICU_LOCALES.get(code)


def _iterator(kind: str, locale: str) -> icu.BreakIterator:
    key = (kind, locale)
    if key not in _iterators.by_kind:
        make = icu.BreakIterator.createWordInstance if kind == "word" else icu.BreakIterator.createSentenceInstance
        _iterators.by_kind[key] = make(icu.Locale(locale))
    return _iterators.by_kind[key]


def _boundaries(iterator: icu.BreakIterator, text: str) -> Iterator[int]:
    """The iterator's boundaries in `text` after its start, as Python string offsets (ICU counts UTF-16 units,
    which differ after a character beyond the BMP, such as the rarer kanji)."""
    iterator.setText(text)
    if max(text, default="\0") <= "\uffff":
        yield from iterator
        return
    offsets: list[int] = []  # offsets[u]: the string offset of UTF-16 unit u
    for index, char in enumerate(text):
        offsets.extend((index, index) if char > "\uffff" else (index,))
    offsets.append(len(text))
    for boundary in iterator:
        yield offsets[boundary]


def dictionary_words(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """[start, end) of each word of text[start:end], a run of letters written without spaces."""
    spans, previous = [], start
    for boundary in _boundaries(_iterator("word", "root"), text[start:end]):
        spans.append((previous, start + boundary))
        previous = start + boundary
    return spans


def icu_sentence_ends(text: str, start: int, end: int, locale: str) -> list[int]:
    """Where each sentence of text[start:end] ends by ICU's rules for `locale` (the last is `end`). Single line
    breaks read as spaces: a paragraph's lines (hard-wrapped text, PDF lines) are one run of text. ICU counts an
    opening quote as closing (`。「` or `。“` ends a sentence after the quote): it goes to the sentence it opens."""
    paragraph = text[start:end].replace("\n", " ").replace("\r", " ")
    ends: list[int] = []
    for boundary in _boundaries(_iterator("sentence", locale), paragraph):
        previous = ends[-1] - start if ends else 0
        while previous + 1 < boundary < len(paragraph) and paragraph[boundary - 1] in _OPENING_QUOTES:
            boundary -= 1
        ends.append(start + boundary)
    return ends
