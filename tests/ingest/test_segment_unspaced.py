"""Languages written without spaces: sentences and words of real Japanese and Chinese text, the chunks made of
them, and how a book's language chooses the rules (Calibre's, the file's, else detected from its letters)."""

from __future__ import annotations

from pathlib import Path

import pytest

from alexandria.book_formats import BookFormat
from ingest.helpers import WAGAHAI, ZHUFU, fake_similarities
from services.ingest.chunking import PARENT_EMBED_WORDS, chunk_book
from services.ingest.documents import Chapter, ChunkingParams, ExtractedBook, count_words, word_spans
from services.ingest.extract import extract_book
from services.ingest.scripts import detected_language, unspaced_locale
from services.ingest.segment import MAX_SENTENCE_WORDS, segment, segment_chapter, sentence_spans

SOSEKI_OPENING = ("吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。"
                  "何でも薄暗いじめじめした所でニャーニャー泣いていた事だけは記憶している。")
SENTENCE_ENDS = tuple("。！？」”…")


def _book(text: str, language: str | None = None) -> ExtractedBook:
    chapter = Chapter(0, "一", 1, text, ("一",), 1)
    return ExtractedBook("book.txt", BookFormat.TXT, None, (), language, (chapter,), "sections")


def test_the_issues_example_is_160_sentences_of_dictionary_words() -> None:
    # Before: one 2,760-character sentence, and the four-sentence paragraph counted as 4 words.
    text = "\n\n".join([SOSEKI_OPENING] * 40)
    assert count_words(SOSEKI_OPENING) == 36
    assert [SOSEKI_OPENING[s:e] for s, e in word_spans(SOSEKI_OPENING)][:9] == [
        "吾輩", "は", "猫", "で", "ある", "名前", "は", "まだ", "無い"]
    spans = sentence_spans(text, "ja")
    assert len(spans) == 160
    assert all(text[e - 1] == "。" for _, e in spans)
    sentences = segment(_book(text, "jpn"))
    assert len(sentences) == 160 and [s.word_count for s in sentences[:4]] == [5, 4, 10, 17]


@pytest.mark.parametrize(("path", "language"), [(WAGAHAI, "jpn"), (ZHUFU, "zho"), (WAGAHAI, None), (ZHUFU, None)])
def test_real_chapters_have_bounded_sentences_that_lose_no_words(path: Path, language: str | None) -> None:
    text = path.read_text(encoding="utf-8")
    book = _book(text, language)
    sentences = segment(book)
    assert len(sentences) > 250  # a sentence is a sentence, not a paragraph
    assert max(s.word_count for s in sentences) <= MAX_SENTENCE_WORDS
    assert sum(s.word_count for s in sentences) == book.word_count == count_words(text) > 5000
    ended = sum(1 for s in sentences if s.text.endswith(SENTENCE_ENDS))
    assert ended >= 0.95 * len(sentences)  # cut where the author ended them, not at word windows
    for sentence in sentences:
        assert " ".join(text[sentence.start : sentence.end].split()) == sentence.text
        assert sentence.word_count == count_words(sentence.text)


@pytest.mark.parametrize("path", [WAGAHAI, ZHUFU])
@pytest.mark.parametrize(("low", "high"), [(200, 1200), (100, 300), (50, 150)])
def test_chunks_of_real_chapters_stay_within_the_asked_words(path: Path, low: int, high: int) -> None:
    book = extract_book(path)  # a TXT names no language: detected from its letters
    sentences = segment(book)
    chunked = chunk_book(book, sentences, fake_similarities(sentences), ChunkingParams(0.5, low, high))
    sizes = [chunk.word_count for chunk in chunked.chunks]
    assert len(sizes) > 1 and max(sizes) <= high
    last_of_chapter = {max(i for i, c in enumerate(chunked.chunks) if c.locator.chapter_index == chapter)
                       for chapter in {c.locator.chapter_index for c in chunked.chunks}}
    assert all(size >= low for i, size in enumerate(sizes) if i not in last_of_chapter)
    assert all(chunk.word_count == count_words(chunk.text) for chunk in chunked.chunks)
    assert all(count_words(parent.embed_text) <= PARENT_EMBED_WORDS + 5 for parent in chunked.parents)


@pytest.mark.parametrize(
    ("text", "language"),
    [
        (WAGAHAI.read_text(encoding="utf-8"), "jpn"),  # kana
        (ZHUFU.read_text(encoding="utf-8"), "zho"),  # Han alone
        ("ภาษาไทยเป็นภาษาที่มีระดับเสียงของคำแน่นอน", "tha"),
        ("It is a truth universally acknowledged, that a single man...", None),
        ("Ljudi su rođeni slobodni i jednaki u dostojanstvu i pravima.", None),
        ("Все люди рождаются свободными.", None),
        ("", None),
    ],
)
def test_the_language_of_a_book_without_one_is_told_by_its_letters(text: str, language: str | None) -> None:
    assert detected_language(text) == language


def test_the_books_language_chooses_the_rules_before_its_letters() -> None:
    japanese = WAGAHAI.read_text(encoding="utf-8")
    assert unspaced_locale("ja", "") == unspaced_locale("jpn", "") == "ja"  # Calibre's or the EPUB's code
    assert unspaced_locale("zh-Hant-TW", "") == "zh"
    assert unspaced_locale(None, japanese) == unspaced_locale("und", japanese) == "ja"
    assert unspaced_locale("eng", japanese) is None  # the library's word wins over a guess
    assert unspaced_locale(None, "Plain English.") is None
    # Calibre's language (segment's argument) before the file's (book.language)
    assert len(segment(_book(japanese, "en"), "jpn")) == len(segment(_book(japanese, "jpn"))) > 300
    as_english = segment(_book(japanese, "jpn"), "eng")
    assert len(as_english) < 150 and max(s.word_count for s in as_english) <= MAX_SENTENCE_WORDS


def test_an_opening_quote_begins_the_sentence_it_opens() -> None:
    text = "随分傍若無人である。「吾輩はここの教師の家にいるのだ」と答えた。他是我的本家。“四叔”是一个老监生。"
    assert [text[s:e] for s, e in sentence_spans(text, "ja")] == [
        "随分傍若無人である。", "「吾輩はここの教師の家にいるのだ」と答えた。", "他是我的本家。", "“四叔”是一个老监生。"]


def test_offsets_hold_after_characters_beyond_the_bmp() -> None:
    text = "𠮟られた子供が泣いた。𩸽を焼いて食べた。今日は晴れだ。"  # two kanji outside the BMP
    sentences = segment_chapter(Chapter(0, "t", 1, text, ("t",), 1), "ja")
    assert [text[s.start : s.end] for s in sentences] == ["𠮟られた子供が泣いた。", "𩸽を焼いて食べた。", "今日は晴れだ。"]
    assert all(text[s:e] for s, e in word_spans(text)) and "".join(text[s:e] for s, e in word_spans(text)) == \
        text.replace("。", "")


def test_a_japanese_quotation_in_an_english_book_counts_its_words() -> None:
    text = "He wrote 吾輩は猫である. Then he stopped."
    assert count_words(text) == 2 + 5 + 3
    assert [s.text for s in segment(_book(text, "eng"))] == ["He wrote 吾輩は猫である.", "Then he stopped."]
