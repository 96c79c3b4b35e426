"""One code per language: what Calibre, EPUB metadata and people write all become ISO 639-3."""

from __future__ import annotations

import pytest

from alexandria.languages import known_language_code, language_code, language_name, language_spellings


@pytest.mark.parametrize(
    ("written", "code"),
    [
        ("eng", "eng"),  # Calibre
        ("en", "eng"),  # EPUB dc:language
        ("EN", "eng"),
        ("en-GB", "eng"),  # BCP 47 tag
        ("pt_BR", "por"),  # POSIX locale
        ("zh-Hant-TW", "zho"),
        ("ger", "deu"),  # ISO 639-2 bibliographic
        ("German", "deu"),  # English name
        (" croatian ", "hrv"),
        ("hr", "hrv"),
        ("grc", "grc"),  # three-letter codes with no two-letter one
    ],
)
def test_codes_tags_and_names_become_the_iso_639_3_code(written: str, code: str) -> None:
    assert language_code(written) == code


def test_two_letters_are_a_code_not_the_start_of_a_name() -> None:
    # pycountry's lookup() would answer "enc", the language named "En".
    assert language_code("en") == "eng"


def test_a_value_that_names_no_language_is_kept_lowercased() -> None:
    assert language_code(" Klingon-KL ") == "klingon-kl"
    assert language_spellings("Klingon-KL") == ["klingon-kl"]


def test_spellings_cover_what_earlier_collections_stored() -> None:
    assert language_spellings("English") == ["eng", "en"]
    assert language_spellings("de-AT") == ["deu", "de", "ger"]
    assert language_spellings("grc") == ["grc"]


def test_a_value_naming_no_one_language_has_no_known_code() -> None:
    assert [known_language_code(v) for v in ("hr", "Japanese", "und", "zxx", "mul", "", "Klingonish")] == [
        "hrv", "jpn", None, None, None, None, None
    ]
    assert language_code("und") == "und"  # kept as written, as before


def test_languages_are_named_in_english() -> None:
    assert [language_name(v) for v in ("hrv", "ja", "Klingonish")] == ["Croatian", "Japanese", "Klingonish"]
