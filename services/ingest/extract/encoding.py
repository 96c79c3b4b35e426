"""Bytes to text for files that do not say their encoding reliably (TXT, Markdown, HTML).

Order of trust: a byte-order mark, then an encoding the document declares (XML
declaration or `<meta charset>`) when the bytes decode with it, then strict UTF-8,
then a legacy 8-bit encoding. For the last, charset-normalizer's own ranking is not
enough: it reads a Croatian ISO-8859-2 text as cp1257 ("¹etao" for "šetao"), since
its coherence score hardly weighs the accented letters that tell code pages apart.
So its candidates, plus the common legacy code pages, are ranked by how well the
text fits the language that fits it best: +1 for each character that is a common
letter of that language, -1 for each other non-ASCII letter and each odd symbol
(¹, ¾, ©: what a wrong code page makes of letters); punctuation and currency
signs count for nothing. Nothing here raises on odd bytes.
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from collections import Counter

from charset_normalizer import from_bytes
from charset_normalizer.constant import FREQUENCIES

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_LEGACY_ENCODINGS = ("cp1252", "iso8859_2", "cp1250", "iso8859_15", "cp1251", "koi8_r", "cp1257", "mac_roman")
_ALPHABETS = [frozenset(letters) for letters in FREQUENCIES.values()]
_DECLARED = re.compile(rb"""(?:encoding|charset)\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)


def looks_binary(data: bytes) -> bool:
    """NUL bytes near the start, which no text file has unless it is UTF-16/32 with a BOM."""
    return b"\x00" in data[:4096] and not any(data.startswith(bom) for bom, _ in _BOMS)


def _declared_encoding(head: bytes) -> str | None:
    match = _DECLARED.search(head)
    if match is None:
        return None
    name = match.group(1).decode("ascii")
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def decode_text(data: bytes, markup: bool = False) -> str:
    """Decode a text file's bytes; with `markup`, an encoding declared in the first 2 KB is tried first."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data.decode(encoding, errors="replace")
    candidates = []
    if markup and (declared := _declared_encoding(data[:2048])):
        candidates.append(declared)
    candidates.append("utf-8")
    for encoding in candidates:
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return _decode_legacy(data)


def _letter_score(text: str) -> int:
    counts = Counter(text.lower())
    neutral = {
        c
        for c in counts
        if c.isascii() or unicodedata.category(c)[0] in "PZ" or unicodedata.category(c) == "Sc"
    }
    return max(
        sum(
            count if char in alphabet else -count
            for char, count in counts.items()
            if char in alphabet or char not in neutral
        )
        for alphabet in _ALPHABETS
    )


def _decode_legacy(data: bytes) -> str:
    # ties go to the first: the common code pages, then charset-normalizer's candidates in its order
    candidates = dict.fromkeys(list(_LEGACY_ENCODINGS) + [match.encoding for match in from_bytes(data)])
    best_text, best_score = None, float("-inf")
    for encoding in candidates:
        try:
            text = data.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            continue
        if (score := _letter_score(text)) > best_score:
            best_text, best_score = text, score
    return best_text if best_text is not None else data.decode("utf-8", errors="replace")
