"""(X)HTML to paragraphs of plain text: the reader of EPUB content documents and of HTML files.

Block elements end paragraphs, inline elements join without adding spaces (so
`<em>You</em> want` stays "You want"), `<br>` keeps its line break, and scripts,
styles, SVG and footnote reference markers are left out so that no "word1" is
glued together (a block keeps them in its `reader_text`, as a reader's viewer shows it). Every `id` is
remembered with the paragraph it opens, so TOC entries that point at `file.xhtml#anchor` can start a chapter
mid-file.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from html import escape
from html.parser import HTMLParser

from lxml import etree, html

from services.ingest.extract.encoding import decode_text
from services.ingest.extract.structure import Block

# fmt: off
_BLOCK_TAGS = frozenset({
    "address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details", "dialog",
    "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5",
    "h6", "header", "hgroup", "hr", "html", "li", "main", "nav", "ol", "p", "pre", "section", "summary",
    "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
})
_SKIPPED_TAGS = frozenset({
    "head", "script", "style", "noscript", "template", "svg", "math", "object", "iframe", "button", "select",
})
# fmt: on
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_NOTE_TYPES = frozenset({"noteref", "doc-noteref"})
# What a footnote reference looks like when it is printed: 12, *, †, [3], (iv)... Upper-case
# Roman numerals are left alone: linked, they are chapter numbers of an in-book contents page.
_MARKER_TEXT = re.compile(r"^[\[(]?(?:\d{1,3}|[ivxlc]{1,6}|[*†‡§¶]{1,3})[\])]?$")
_SPACE = re.compile(r"[ \t\r\n\f\v]+")
_EPUB_TYPE = "{http://www.idpf.org/2007/ops}type"
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
# libxml2 stops building a tree at this nesting depth and drops the rest of the document without failing.
_TOO_DEEP = "Excessive depth"

log = logging.getLogger(__name__)


@dataclass
class HtmlDocument:
    blocks: list[Block]
    anchors: dict[str, int]  # element id -> index of the block it opens (or sits in)
    title: str | None = None
    language: str | None = None
    meta: dict[str, str] = field(default_factory=dict)  # <meta name=... content=...>, names lower-cased


def _local(tag: object) -> str:
    if not isinstance(tag, str):  # comments and processing instructions
        return ""
    return tag.rsplit("}", 1)[-1].lower()


class _Collector:
    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.anchors: dict[str, int] = {}
        self._parts: list[str] = []
        # The same as a reader sees it: the note markers `_parts` leaves out are in it, an exponent's "^" is not.
        self._shown: list[str] = []
        self._heading: int | None = None
        self._pre = 0

    def text(self, value: str | None) -> None:
        if value:
            spaced = value if self._pre else _SPACE.sub(" ", value)
            self._parts.append(spaced)
            self._shown.append(spaced)

    def line_break(self) -> None:
        self._parts.append("\n")
        self._shown.append("\n")

    def anchor(self, element_id: str) -> None:
        self.anchors.setdefault(element_id, len(self.blocks))

    def end_block(self) -> None:
        text, shown = self._lines(self._parts), self._lines(self._shown)
        self._parts, self._shown = [], []
        if text.strip():
            self.blocks.append(Block(text, heading_level=self._heading, reader_text=shown if shown != text else None))

    def _lines(self, parts: list[str]) -> str:
        lines = [line.strip() if not self._pre else line.rstrip() for line in "".join(parts).split("\n")]
        return "\n".join(line for line in lines if line.strip()) if not self._pre else "\n".join(lines).strip("\n")

    def _is_note_marker(self, element: etree._Element, tag: str) -> bool:
        """A footnote reference: typed as one, or a linked / superscript marker right after a word."""
        kinds = set((element.get("epub:type") or element.get(_EPUB_TYPE) or "").split())
        if kinds & _NOTE_TYPES or element.get("role") in _NOTE_TYPES:
            return True
        if tag not in ("a", "sup") or not _MARKER_TEXT.match("".join(element.itertext()).strip()):
            return False
        if tag == "a":
            return "#" in (element.get("href") or "")
        return element.find(".//a") is not None or not self._follows_digit()

    def _follows_digit(self) -> bool:
        return "".join(self._parts)[-1:].isdigit()

    def walk(self, element: etree._Element) -> None:
        tag = _local(element.tag)
        if tag in _SKIPPED_TAGS or not tag:
            return
        if self._is_note_marker(element, tag):
            self._shown.append(_SPACE.sub(" ", "".join(element.itertext())))
            return
        block = tag in _BLOCK_TAGS
        if block:
            self.end_block()  # first, so that this element's id names the paragraph it opens
        if (element_id := element.get("id") or (element.get("name") if tag == "a" else None)) is not None:
            self.anchor(element_id)
        if tag == "br":
            self.line_break()
            return
        if tag == "sup" and self._follows_digit() and "".join(element.itertext()).strip().isdigit():
            self._parts.append("^")  # an unlinked <sup>6</sup> after a digit is an exponent: 10^6, not 106
        if tag in _HEADINGS:
            self._heading = _HEADINGS[tag]
        if tag == "pre":
            self._pre += 1
        self.text(element.text)
        for child in element:
            self.walk(child)
            self.text(child.tail)
        if block:
            self.end_block()
        if tag == "pre":
            self._pre -= 1
        if tag in _HEADINGS:
            self._heading = None


class _Flattener(HTMLParser):
    """Markup rewritten one level deep: each block element a paragraph, inline elements dropped but their ids.

    The way through for a document nested deeper than libxml2 builds: an unclosed `<span>` or
    `<div>` a paragraph nests each paragraph inside the one before, which sloppy converters write.
    Python's tokenizer keeps no tree, so no depth stops it.
    """

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts = ["<body><p>"]
        self._open = "p"
        self._skipped = 0

    def _start_paragraph(self, tag: str, element_id: str | None) -> None:
        self.parts.append(f"</{self._open}>")
        self._open = tag
        self.parts.append(f'<{tag} id="{escape(element_id)}">' if element_id else f"<{tag}>")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "body":
            self._skipped = 0  # a <head> never closed ends here, as an HTML parser ends it
        if tag in _SKIPPED_TAGS:
            self._skipped += 1
        if self._skipped:
            return
        element_id = dict(attrs).get("id")
        if tag in _HEADINGS:
            self._start_paragraph(tag, element_id)
        elif tag in _BLOCK_TAGS:
            self._start_paragraph("p", element_id)
        elif tag == "br":
            self.parts.append("<br>")
        elif element_id:
            self.parts.append(f'<a id="{escape(element_id)}"></a>')

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED_TAGS and self._skipped:
            self._skipped -= 1
        elif not self._skipped and (tag in _BLOCK_TAGS or tag in _HEADINGS):
            self._start_paragraph("p", None)

    def handle_data(self, data: str) -> None:
        if not self._skipped:
            self.parts.append(escape(data))

    def markup(self) -> str:
        self.close()
        return "".join([*self.parts, f"</{self._open}></body>"])


def _parse(markup: str) -> tuple[etree._Element, bool]:
    """The document's tree, and whether libxml2 cut it short for its depth."""
    parser = html.HTMLParser(remove_comments=True, remove_pis=True)
    root = html.document_fromstring(markup, parser=parser)
    return root, any(_TOO_DEEP in error.message for error in parser.error_log)


def parse_html(content: bytes) -> HtmlDocument:
    """Paragraphs, anchors and head metadata of one (X)HTML document.

    The HTML parser is used even for XHTML: it never rejects a document over a
    stray `&nbsp;` or an unclosed tag, which real books contain.
    """
    markup = _XML_DECLARATION.sub("", decode_text(content, markup=True))
    if not markup.strip():
        return HtmlDocument([], {})
    root, cut_short = _parse(markup)
    body = root.find("body")
    if cut_short:
        log.warning("a document nests its elements too deep to parse whole: its paragraphs are read flat")
        flattener = _Flattener()
        flattener.feed(markup)
        body = _parse(flattener.markup())[0].find("body")
    collector = _Collector()
    collector.walk(body if body is not None else root)
    collector.end_block()
    title_element = root.find("head/title")
    title = " ".join("".join(title_element.itertext()).split()) if title_element is not None else None
    meta = {
        (m.get("name") or "").lower(): m.get("content") or ""
        for m in root.iterfind("head/meta")
        if m.get("name")
    }
    language = (
        root.get("lang") or root.get("{http://www.w3.org/XML/1998/namespace}lang") or root.get("xml:lang")
    )
    return HtmlDocument(collector.blocks, collector.anchors, title or None, language, meta)
