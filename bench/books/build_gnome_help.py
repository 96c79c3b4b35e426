"""Build the Japanese and Croatian books of the retrieval bench from GNOME's user help.

The books are translations of GNOME Help (Debian's `gnome-user-docs`, CC BY-SA 3.0), each topic
page a chapter. The Japanese translation covers about a third of the pages: its book holds the
pages translated into Japanese (untranslated English paragraphs dropped), the Croatian book holds
the remaining pages, so that no passage of one book is a translation of a passage of the other
and a question in one language has a single book that answers it. Each language's pages are split
in two books by topic (the page name's first word: `files`, `net`, `power`...), about even in length,
one for the bench's tuning half and one for its check half.

    apt-get download gnome-user-docs && dpkg -x gnome-user-docs_*.deb /tmp/gud
    .venv/bin/python bench/books/build_gnome_help.py /tmp/gud/usr/share/help

writes bench/books/gnome_help_{ja,hr}_{1,2}.epub (ebooklib, EPUB 3 with dc:language set, which
ingest records as the book's language).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from dataclasses import dataclass
from html import escape
from pathlib import Path

from ebooklib import epub
from lxml import etree

HERE = Path(__file__).resolve().parent
MALLARD = "{http://projectmallard.org/1.0/}"
SOURCE = "Debian gnome-user-docs 43.0-2 (GNOME Help, https://gitlab.gnome.org/GNOME/gnome-user-docs)"
RIGHTS = "CC BY-SA 3.0 (https://creativecommons.org/licenses/by-sa/3.0/), the GNOME Documentation Project"
# Elements with no prose a reader sees as text: page metadata, icons, link lists, editors' notes.
SKIPPED = {"info", "media", "links", "comment", "credit", "revision", "include"}
# Elements whose text is one paragraph of the book.
PARAGRAPHS = {"p", "code", "screen", "desc", "subtitle"}
_JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
_LATIN_WORD = re.compile(r"[A-Za-z]{2,}")
_ENGLISH = frozenset(("the", "and", "you", "your", "to", "of", "is", "are", "with", "for", "this", "that"))


@dataclass(frozen=True)
class Page:
    name: str
    title: str
    blocks: tuple[tuple[str, str], ...]  # (html tag, text)


def text_of(element: etree._Element) -> str:
    """The element's text as a reader sees it, icons and comments left out."""
    parts = [element.text or ""]
    for child in element:
        if isinstance(child.tag, str) and child.tag.removeprefix(MALLARD) not in SKIPPED:
            parts.append(text_of(child))
        parts.append(child.tail or "")
    return " ".join("".join(parts).split())


def blocks_of(element: etree._Element, depth: int) -> Iterator[tuple[str, str]]:
    for child in element:
        if not isinstance(child.tag, str):
            continue
        tag = child.tag.removeprefix(MALLARD)
        if tag in SKIPPED:
            continue
        if tag == "title":
            yield f"h{min(depth, 4)}", text_of(child)
        elif tag in PARAGRAPHS:
            yield "p", text_of(child)
        elif tag == "section":
            yield from blocks_of(child, depth + 1)
        else:  # lists, steps, terms, tables, notes, figures: their paragraphs in order
            yield from blocks_of(child, depth + 1 if tag == "figure" else depth)


def read_page(path: Path) -> Page:
    root = etree.parse(str(path)).getroot()
    info = root.find(f"{MALLARD}info")
    desc = info.find(f"{MALLARD}desc") if info is not None else None
    blocks = [b for b in blocks_of(root, 1) if b[1]]
    title = next(text for tag, text in blocks if tag == "h1")
    intro = [("p", text_of(desc))] if desc is not None and text_of(desc) else []
    return Page(path.stem, title, (("h1", title), *intro, *(b for b in blocks if b != ("h1", title))))


def japanese_share(text: str) -> float:
    return len(_JAPANESE.findall(text)) / max(1, len("".join(text.split())))


def is_japanese(page: Page) -> bool:
    """A page translated into Japanese, at least in part (a tenth of its letters kana and kanji, English GUI names and
    untranslated paragraphs the rest)."""
    return japanese_share(" ".join(text for _, text in page.blocks)) >= 0.1


def is_croatian(page: Page) -> bool:
    """A page with (almost) no English sentence left untranslated."""
    words = " ".join(text for _, text in page.blocks).lower().split()
    return sum(w in _ENGLISH for w in words) < 0.02 * max(1, len(words))


def japanese_blocks(page: Page) -> Page:
    """The page without the paragraphs its translation left in English (a GUI label or a key name kept)."""
    kept = tuple(b for b in page.blocks if _JAPANESE.search(b[1]) or len(_LATIN_WORD.findall(b[1])) <= 3)
    return Page(page.name, page.title, kept)


def length(pages: list[Page]) -> int:
    return sum(len(text) for page in pages for _, text in page.blocks)


def topics(pages: list[Page]) -> dict[str, list[Page]]:
    by_topic: dict[str, list[Page]] = {}
    for page in pages:
        by_topic.setdefault(page.name.split("-")[0], []).append(page)
    return by_topic


def halves(pages: list[Page]) -> tuple[list[Page], list[Page]]:
    """The pages in two books of whole topics, about even in length: each topic, longest first, to the shorter."""
    first: list[Page] = []
    second: list[Page] = []
    for _, topic in sorted(topics(pages).items(), key=lambda item: (-length(item[1]), item[0])):
        (first if length(first) <= length(second) else second).extend(topic)
    return sorted(first, key=lambda p: p.name), sorted(second, key=lambda p: p.name)


def write_epub(pages: list[Page], language: str, title: str, identifier: str, target: Path) -> None:
    book = epub.EpubBook()
    book.set_identifier(identifier)
    book.set_title(title)
    book.set_language(language)
    book.add_author("GNOME Documentation Project")
    book.add_metadata("DC", "rights", RIGHTS)
    book.add_metadata("DC", "source", SOURCE)
    chapters = []
    for page in pages:
        chapter = epub.EpubHtml(title=page.title, file_name=f"{page.name}.xhtml", lang=language)
        body = "\n".join(f"<{tag}>{escape(text)}</{tag}>" for tag, text in page.blocks)
        chapter.content = f"<html><head><title>{escape(page.title)}</title></head><body>{body}</body></html>"
        book.add_item(chapter)
        chapters.append(chapter)
    book.toc = chapters
    book.spine = chapters
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    epub.write_epub(str(target), book)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("help_dir", type=Path, help="usr/share/help of the extracted gnome-user-docs package")
    args = parser.parse_args()
    names = sorted(p.name for p in (args.help_dir / "C" / "gnome-help").glob("*.page"))
    japanese, croatian = [], []
    for name in names:
        ja = read_page(args.help_dir / "ja" / "gnome-help" / name)
        if is_japanese(ja):
            japanese.append(japanese_blocks(ja))
            continue
        hr = read_page(args.help_dir / "hr" / "gnome-help" / name)
        if is_croatian(hr):
            croatian.append(hr)
    titles = {"ja": ("GNOME ヘルプ 第1部", "GNOME ヘルプ 第2部"), "hr": ("GNOME pomoć, 1. dio", "GNOME pomoć, 2. dio")}
    for language, pages in (("ja", japanese), ("hr", croatian)):
        for part, (title, half) in enumerate(zip(titles[language], halves(pages), strict=True), start=1):
            write_epub(half, language, title, f"gnome-help-43-{language}-{part}", HERE / f"gnome_help_{language}_{part}.epub")
            print(f"{language} {part}: {len(half)} pages, {length(half)} characters, topics {sorted(topics(half))}")


if __name__ == "__main__":
    main()
