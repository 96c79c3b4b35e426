"""The retrieval question set is sound: large, split by book, asked in other words than the books.

Each phrase is checked against the text ingest extracts from the book's file (the text chunks are
cut from), with the same case-and-spacing comparison bench.retrieval scores with.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bench import questions

BOOKS = questions.load_books()
QUESTIONS = [q for book in BOOKS for q in book.questions]


def test_the_question_set_is_large_and_spread_over_books() -> None:
    assert len(QUESTIONS) >= 200
    assert len(BOOKS) >= 10
    per_book = Counter(q.book for q in QUESTIONS)
    assert max(per_book.values()) <= len(QUESTIONS) // 8
    assert len({q.question for q in QUESTIONS}) == len(QUESTIONS)


def test_halves_are_split_by_book_and_both_hold_every_kind_of_book() -> None:
    halves = {split: [b for b in BOOKS if b.split == split] for split in questions.SPLITS}
    books = [{b.book for b in halves[split]} for split in questions.SPLITS]
    assert all(a.isdisjoint(b) for i, a in enumerate(books) for b in books[i + 1:])
    for split, held in halves.items():
        assert sum(len(b.questions) for b in held) >= 80, split
    # The widened set: 150 English questions or more over books neither half holds, to choose the default on.
    assert {b.language for b in halves["widened"]} == {"en"} and sum(len(b.questions) for b in halves["widened"]) >= 150
    # Calibre id 4 (Persuasion) and 6 (Macbeth) exist only as PDFs; 8 and 9 are the German and French guides.
    assert {4, 8} <= {b.book for b in halves["tuning"]} and {6, 9} <= {b.book for b in halves["check"]}


def test_no_question_comes_from_a_held_out_book() -> None:
    assert not [b.title for b in BOOKS if questions.held_out(b.title)]
    assert questions.held_out("Moby-Dick; or, The Whale") and not questions.held_out("Hamlet")


def test_the_checks_catch_copied_words_and_ambiguous_phrases() -> None:
    text = questions.normalise("It is a truth universally acknowledged, that a single man must be in want of a wife. "
                               "A wife, a wife.")
    copied = questions.Question(1, "tuning", "Is a truth universally acknowledged?", "in want of a wife")
    assert any("shares" in p for p in questions.problems(copied, text))
    ambiguous = questions.Question(1, "tuning", "What must he have?", "a wife")
    assert any("occurs 3 times" in p for p in questions.problems(ambiguous, text))
    sound = questions.Question(1, "tuning", "What does a rich bachelor lack, as everyone agrees?", "in want of a wife")
    assert list(questions.problems(sound, text)) == []


def test_every_language_has_a_book_in_each_half_and_japanese_and_croatian_25_questions() -> None:
    for language in {b.language for b in BOOKS}:
        assert {b.split for b in BOOKS if b.language == language} <= set(questions.SPLITS)
    for language in ("ja", "hr"):
        assert {b.split for b in BOOKS if b.language == language} == {"tuning", "check"}, language
        assert sum(len(b.questions) for b in BOOKS if b.language == language) >= 25, language


def test_japanese_words_are_runs_of_kanji_or_katakana_between_hiragana() -> None:
    assert questions.content_words("GNOMEのファイルを削除すると何が起きますか", "ja") == [
        "gnome", "ファイル", "削除", "起"]
    text = questions.normalise("ファイルを完全に削除し、ディスクスペースを解放するには、ゴミ箱を空にします。")
    copied = questions.Question("b", "check", "ファイルを完全に削除するには？", "ゴミ箱を空にします", "ja")
    assert any("shares ['ファイル 完全 削除']" in p for p in questions.problems(copied, text))
    # the same words, asked in others: 消去 for 削除, 永久 for 完全
    sound = questions.Question("b", "check", "ファイルを永久に消去するには？", "ゴミ箱を空にします", "ja")
    assert list(questions.problems(sound, text)) == []
    short = questions.Question("b", "check", "何を空にしますか", "ゴミ箱を空に", "ja")
    assert any("fewer than 8 characters" in p for p in questions.problems(short, text))


def test_croatian_stop_words_count_for_croatian_questions_only() -> None:
    text = questions.normalise("Kako se kalibrira skener za ispis boja? Skener treba kalibrirati rijetko.")
    asked = "Kako se kalibrira skener?"
    assert list(questions.problems(questions.Question("b", "check", asked, "Skener treba kalibrirati", "hr"), text)) == []
    # in an English file "kako" is a content word, as before: the run kako-kalibrira-skener is shared
    assert any("shares" in p for p in questions.problems(questions.Question("b", "check", asked, "Skener treba kalibrirati"), text))


@pytest.mark.parametrize("book", BOOKS, ids=lambda b: b.source.stem)
def test_each_question_is_sound_against_its_book(book, shared_corpus: Path) -> None:
    assert questions.check_files([book.source], shared_corpus) == []


def test_every_hint_answers_a_question_of_the_set_and_every_check_question_has_one() -> None:
    asked = {q.question for q in QUESTIONS}
    for name in ("llm", "blind"):
        hints = questions.load_hints(name)
        assert set(hints) <= asked, name
        assert {q.question for q in QUESTIONS if q.split != "widened"} <= set(hints), name
        assert all(0 < len(passage) <= 1000 for passage in hints.values()), name


def test_every_bench_language_has_forty_off_topic_questions_of_each_kind() -> None:
    off_topic = questions.load_off_topic()
    languages = {q.language for q in QUESTIONS}
    per_language = Counter(o.language for o in off_topic)
    assert set(per_language) == languages and min(per_language.values()) >= 40
    for language in languages:
        kinds = Counter(o.kind for o in off_topic if o.language == language)
        assert set(kinds) == set(questions.OFF_TOPIC_KINDS), language
    assert all(o.passage.strip() for o in off_topic)
    assert len({o.question for o in off_topic}) == len(off_topic)


def test_an_off_topic_question_of_an_unknown_kind_is_named(tmp_path: Path) -> None:
    (tmp_path / "en.yaml").write_text(
        "language: en\nquestions:\n  - question: How tall is Everest?\n    kind: trivia\n    passage: It is 8849 m.\n",
        encoding="utf-8")
    with pytest.raises(ValueError, match="How tall is Everest.*trivia"):
        questions.load_off_topic(tmp_path)
