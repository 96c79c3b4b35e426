"""Where Calibre's viewer opens a book at a passage: its first words, as few as occur nowhere else."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from services.ingest.chunking import chunk_book
from services.ingest.documents import BookText, ChunkingParams
from services.ingest.extract import extract_book
from services.ingest.locations import MIN_WORDS, viewer_key, viewer_locations
from services.ingest.segment import segment

BOOK = (
    "It was a dark and stormy night; the rain fell in torrents. "
    "Said she, it was a dark and stormy night again, and the keeper lit the lamp. "
    "The keeper counted the herring boats every evening before the fog rolled in."
)


def test_a_passage_opens_at_its_first_words_that_occur_nowhere_else() -> None:
    passages = [
        "The keeper counted the herring boats every evening before the fog rolled in.",
        "It was a dark and stormy night; the rain fell in torrents.",
    ]
    found = viewer_locations(BookText(BOOK, BOOK), passages)
    assert found[0] == "search:" + " ".join(passages[0].split()[:MIN_WORDS])
    # its first six words open two places: the words go on until they are the only one
    assert found[1] == "search:It was a dark and stormy night; the"
    for location in found:
        assert viewer_key(BOOK).count(viewer_key(location.removeprefix("search:"))) == 1


def test_words_the_viewer_finds_inside_other_words_or_past_punctuation_are_not_counted_unique() -> None:
    book = ("Until then she had never seen anything like it in her life. Then he had never seen anything like "
            "it before, said the man. “Come here, now,” said the old man. “Come here now” said the old woman. "
            "He owed 500 to the bank. He owed £500 to the bank, or so he said.")
    passages = ["he had never seen anything like it before, said the man.", "“Come here now” said the old woman.",
                "He owed £500 to the bank, or so he said."]
    assert viewer_locations(BookText(book, book), passages) == [
        "search:he had never seen anything like it before",  # "she had never seen anything like it" holds its 7
        "search:“Come here now” said the old woman",
        "search:He owed £500 to the bank",  # the viewer compares symbols: "£500" is not "500"
    ]


def test_accents_and_case_aside_and_scripts_without_spaces_or_with_vowel_signs_get_a_place() -> None:
    assert viewer_key("Straße, ÉTÉ") == viewer_key("strasse ete") != viewer_key("strasse eta")
    book = ("吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。"
            "हिन्दी भाषा बहुत सुंदर है और सब लोग इसे बोलते हैं।")
    found = viewer_locations(BookText(book, book), ["吾輩は猫である。名前はまだ無い。", "हिन्दी भाषा बहुत सुंदर है और सब लोग इसे बोलते हैं।"])
    assert found[0] == "search:吾輩は猫である。名前"
    assert found[1].startswith("search:हिन्दी भाषा बह") and book.count(found[1].removeprefix("search:")) == 1


def test_a_passage_whose_first_words_hold_a_footnote_marker_opens_past_the_marker(tmp_path: Path) -> None:
    """The passage leaves the marker out and the viewer shows it ("truth1 universally"): words on both sides of it
    are never found together there."""
    from lxml import html

    paragraphs = [
        ('It is a truth<a epub:type="noteref" href="#n1">1</a> universally acknowledged that a single man in '
        "possession of a good fortune must be in want of a wife."),
        "However little known the feelings or views of such a man may be, this truth is so well fixed abroad.",
        ('This truth is so well fixed<a href="#n2">[2]</a> in the minds of the surrounding families that he is '
        "considered the rightful property of some one or other of their daughters."),
        "My dear Mr. Bennet, said his lady to him one day, have you heard that Netherfield Park is let at last?",
    ]
    markup = ('<html xmlns:epub="http://www.idpf.org/2007/ops"><body>'
              + "".join(f"<p>{p}</p>" for p in paragraphs) + "</body></html>")
    (tmp_path / "annotated.html").write_text(markup)
    extracted = extract_book(tmp_path / "annotated.html")
    passages = [block for block in extracted.chapters[0].text.split("\n\n")]
    assert passages[0].startswith("It is a truth universally")
    viewer = viewer_key(html.fromstring(markup).text_content())

    locations = viewer_locations(extracted.viewer_text, passages)
    assert locations[0] == "search:universally acknowledged that a single man"
    # its first six words occur before it too, and one more reaches the marker: the run starts again after it
    assert locations[2] == "search:in the minds of the surrounding"
    assert locations[3] == "search:My dear Mr. Bennet, said his"
    for passage, location in zip(passages, locations, strict=True):
        words = viewer_key(location.removeprefix("search:"))
        at = viewer.find(words)
        assert at >= 0 and viewer.find(words, at + 1) < 0 and words in viewer_key(passage)


def test_words_parted_by_a_marker_at_the_passage_are_not_taken_for_words_found_once_elsewhere() -> None:
    """The viewer finds "he said that the old man" once, but in the other paragraph: at the passage a marker parts the
    words. Counted as read too (twice), those words are not the passage's place; its run starts past the marker."""
    read = "He said that the old man was tired of the sea. Later he said that the old man slept until noon that day."
    shown = "He said that the old man was tired of the sea. Later he said that¹ the old man slept until noon that day."
    passage = "he said that the old man slept until noon that day."
    assert viewer_locations(BookText(read, shown), [passage]) == ["search:the old man slept until noon"]


def _viewer_text(epub: Path) -> str:
    """The book as Calibre's viewer searches it: the text of its spine's documents in reading order, read
    straight from the EPUB's XHTML (not through ingest's extractor), compared as the viewer compares."""
    import ebooklib
    from ebooklib import epub as epub_lib
    from lxml import html

    book = epub_lib.read_epub(str(epub), options={"ignore_ncx": True})
    texts = []
    for item_id, _ in book.spine:
        item = book.get_item_with_id(item_id)
        if item is not None and item.get_type() == ebooklib.ITEM_DOCUMENT:
            texts.append(html.fromstring(item.get_content()).text_content())
    return "".join(viewer_key(text) for text in texts)


def test_200_passages_of_the_shared_library_open_where_they_begin(shared_corpus: Path) -> None:
    """Each stored place, resolved in the EPUB as the viewer's `search:` does (its first occurrence), lands on
    text that begins with the passage's first words, and on no other occurrence."""
    epubs = sorted((shared_corpus / "calibre-library").rglob("*.epub"))
    checked = unplaced = 0
    rng = random.Random(7)
    for epub in epubs:
        extracted = extract_book(epub)
        sentences = segment(extracted)
        chunked = chunk_book(extracted, sentences, np.zeros(max(0, len(sentences) - 1)), ChunkingParams())
        passages = [chunk.text for chunk in chunked.chunks]
        locations = viewer_locations(extracted.viewer_text, passages)
        viewer = _viewer_text(epub)
        for n in rng.sample(range(len(passages)), min(len(passages), 40)):
            if not locations[n]:
                unplaced += 1
                continue
            words = viewer_key(locations[n].removeprefix("search:"))
            at = viewer.find(words)
            assert at >= 0 and viewer.find(words, at + 1) < 0, (epub.name, locations[n])
            opening = viewer_key(" ".join(passages[n].split()[:MIN_WORDS]))
            assert viewer[at:].startswith(opening), (epub.name, passages[n][:80], viewer[at:at + 80])
            checked += 1
    print(f"{checked} passages of {len(epubs)} EPUBs open where they begin; {unplaced} have no place")
    assert checked >= 200 and unplaced <= checked // 20
