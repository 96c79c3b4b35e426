"""Language codes: one spelling per language wherever Alexandria stores or compares one.

Calibre records a book's languages as three-letter ISO 639 codes ("eng", "deu"); EPUB metadata
and people use two-letter codes ("en"), regional tags ("en-GB"), bibliographic codes ("ger") or
names ("English"). All of them become the ISO 639-3 code, so that a filter on "en" finds the
Calibre books ("eng") and a local EPUB tagged "en-GB" alike. A value that names no language is
kept as written, lowercased.
"""

from __future__ import annotations

import re

import pycountry
import pycountry.db

# The primary subtag of a BCP 47 / POSIX tag: "en" in "en-GB", "pt" in "pt_BR", "zh" in "zh-Hant-TW".
_PRIMARY_SUBTAG = re.compile(r"^([a-z]{2,3})[-_]")


def _find(text: str) -> pycountry.db.Data | None:
    # By field, shortest first: pycountry's lookup() would take "en" for the language named "En" (enc).
    if len(text) == 2:
        return pycountry.languages.get(alpha_2=text)
    if len(text) == 3:
        return pycountry.languages.get(alpha_3=text) or pycountry.languages.get(bibliographic=text)
    try:
        found: pycountry.db.Data = pycountry.languages.lookup(text)  # pycountry leaves its Languages untyped
    except LookupError:
        return None
    return found


def _language(value: str) -> pycountry.db.Data | None:
    text = value.strip().lower()
    if not text:
        return None
    found = _find(text)
    if found is None and (tag := _PRIMARY_SUBTAG.match(text)):
        found = _find(tag.group(1))
    return found


def language_code(value: str) -> str:
    """The ISO 639-3 code for a language code, tag or English name; unknown values lowercased as given."""
    return known_language_code(value) or value.strip().lower()


def language_name(value: str) -> str:
    """The English name of the language `value` names ("Croatian" for "hrv"), else `value` as given."""
    found = _language(value)
    return str(found.name) if found is not None else value


# ISO 639's codes for no particular language: undetermined, no linguistic content, multiple, uncoded.
_NOT_ONE_LANGUAGE = frozenset({"und", "zxx", "mul", "mis"})


def known_language_code(value: str) -> str | None:
    """The ISO 639-3 code of the one language `value` names; None when it names none (or "undetermined")."""
    found = _language(value)
    return found.alpha_3 if found is not None and found.alpha_3 not in _NOT_ONE_LANGUAGE else None


def language_spellings(value: str) -> list[str]:
    """Every code a stored book in this language may carry: the ISO 639-3 code first, then the
    two-letter and bibliographic ones (collections written before codes were made one)."""
    found = _language(value)
    if found is None:
        return [value.strip().lower()]
    spellings = [found.alpha_3, getattr(found, "alpha_2", None), getattr(found, "bibliographic", None)]
    return list(dict.fromkeys(s for s in spellings if s))
