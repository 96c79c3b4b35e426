"""EPUB 2 and 3: the package through ebooklib, the text in spine order, chapters from the TOC.

Traps of real books handled here:
- Reading order is the spine's, never the manifest's (calibre numbers `html{N}` downwards).
- A href is relative to the folder of the file it is written in: the OPF's hrefs to
  the OPF's folder, the NCX's to the NCX's, the nav document's to its own. Everything
  is resolved to a path inside the zip before it is compared.
- EPUB 3 books may have only a nav document, and it need not be in the spine.
- TOC entries may point at `#anchors` inside one file; each starts its chapter there.
- Text before the first TOC entry (title page, dramatis personae) has no entry and is
  kept as front matter; a cover page with no text gives nothing.
"""

from __future__ import annotations

import logging
import posixpath
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urldefrag

import ebooklib
from ebooklib import epub
from lxml import etree

from alexandria.book_formats import BookFormat
from alexandria.errors import FailedPrecondition, InvalidArgument
from services.ingest.documents import ExtractedBook
from services.ingest.extract.html import parse_html
from services.ingest.extract.structure import (
    Block,
    TocEntry,
    book_text,
    choose_chapters,
    clean_metadata,
    normalise_space,
)

log = logging.getLogger(__name__)

_NCX = "{http://www.daisy.org/z3986/2005/ncx/}"
_OPS_TYPE = "{http://www.idpf.org/2007/ops}type"
_ENCRYPTION = "META-INF/encryption.xml"
_FONT_SUFFIXES = (".ttf", ".otf", ".woff", ".woff2")
# Errors of a damaged archive or package as zipfile, zlib, lxml and ebooklib raise them
# (ebooklib meets a missing element of the OPF with AttributeError or IndexError).
# The largest illustrated EPUBs unpack to a few hundred MB; their images are compressed already.
MAX_UNPACKED_BYTES = 1_000_000_000
_DAMAGED = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    KeyError,
    etree.XMLSyntaxError,
    epub.EpubException,
    AttributeError,
    IndexError,
)


@dataclass
class _Flow:
    """All spine documents' paragraphs in reading order, and where each document and anchor starts."""

    blocks: list[Block]
    document_start: dict[str, int]
    anchors: dict[tuple[str, str], int]

    def locate(self, target: str) -> int | None:
        """The block a resolved `path#fragment` points at; None when it is not in the spine."""
        path, fragment = urldefrag(target)
        if fragment and (path, fragment) in self.anchors:
            return self.anchors[(path, fragment)]
        return self.document_start.get(path)


def _resolve(base_file: str, href: str) -> str:
    """`href` written in `base_file` as a normalised path inside the zip, keeping its #fragment."""
    path, fragment = urldefrag(href.strip())
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(base_file), unquote(path)))
    return f"{resolved}#{fragment}" if fragment else resolved


def _refuse_drm(archive: zipfile.ZipFile, name: str) -> None:
    if _ENCRYPTION not in archive.namelist():
        return
    tree = etree.fromstring(archive.read(_ENCRYPTION))
    encrypted = [ref.get("URI", "") for ref in tree.iter("{*}CipherReference")]
    # Font obfuscation also lives in encryption.xml and hides no text: only documents count.
    if any(not uri.lower().endswith(_FONT_SUFFIXES) for uri in encrypted):
        raise FailedPrecondition(
            f"{name} is DRM-protected (its text is encrypted); Alexandria can only read DRM-free EPUBs. "
            "Remove the protection with the tool of the shop that sold it, or use a DRM-free copy."
        )


def _refuse_bomb(archive: zipfile.ZipFile, name: str) -> None:
    """Refuse an archive whose members unpack to more than MAX_UNPACKED_BYTES (the reader holds them all in memory).
    The sizes are what the archive declares; a member that unpacks to more than it declares fails its CRC check
    (`testzip`, which reads in small blocks)."""
    unpacked = sum(member.file_size for member in archive.infolist())
    if unpacked > MAX_UNPACKED_BYTES:
        raise InvalidArgument(
            f"{name} unpacks to {unpacked / 1e9:.1f} GB, more than any book needs (at most "
            f"{MAX_UNPACKED_BYTES / 1e9:.0f} GB are read): it is not an ordinary EPUB. Convert it again with "
            "calibre, or leave it out."
        )


def _read_flow(book: epub.EpubBook, opf_dir: str) -> _Flow:
    flow = _Flow([], {}, {})
    read: set[str] = set()
    for idref, _linear in book.spine:
        item = book.get_item_with_id(idref)
        # A document the spine names twice is read once: a crafted spine naming one a million times would
        # otherwise make gigabytes of text of a small file.
        if item is None or item.get_type() != ebooklib.ITEM_DOCUMENT or idref in read:
            continue
        read.add(idref)
        path = posixpath.normpath(posixpath.join(opf_dir, item.file_name))
        document = parse_html(item.get_content())
        offset = len(flow.blocks)
        flow.document_start[path] = offset
        for anchor, block in document.anchors.items():
            flow.anchors[(path, anchor)] = offset + block
        flow.blocks.extend(document.blocks)
    return flow


def _nav_entries(nav_path: str, content: bytes) -> list[tuple[str, int, str]]:
    root = etree.fromstring(content, etree.XMLParser(recover=True))
    if root is None:
        return []
    navs = [n for n in root.iter("{*}nav") if "toc" in (n.get(_OPS_TYPE) or "").split()] or list(
        root.iter("{*}nav")
    )
    if not navs:
        return []
    entries: list[tuple[str, int, str]] = []

    def walk(ordered_list: etree._Element, level: int) -> None:
        for item in ordered_list.iterfind("{*}li"):
            label = item.find("{*}a")
            if label is None:
                label = item.find("{*}span")
            if label is not None and label.get("href"):
                entries.append(
                    (normalise_space("".join(label.itertext())), level, _resolve(nav_path, label.get("href")))
                )
            for child in item.iterfind("{*}ol"):
                walk(child, level + 1)

    for ordered in navs[0].iterfind("{*}ol"):
        walk(ordered, 1)
    return entries


def _ncx_entries(ncx_path: str, content: bytes) -> list[tuple[str, int, str]]:
    root = etree.fromstring(content, etree.XMLParser(recover=True))
    nav_map = root.find(f"{_NCX}navMap") if root is not None else None
    if nav_map is None:
        return []
    entries: list[tuple[str, int, str]] = []

    def walk(parent: etree._Element, level: int) -> None:
        for point in parent.iterfind(f"{_NCX}navPoint"):
            label = point.find(f"{_NCX}navLabel/{_NCX}text")
            content_element = point.find(f"{_NCX}content")
            if label is not None and content_element is not None and content_element.get("src"):
                title = normalise_space("".join(label.itertext()))
                entries.append((title, level, _resolve(ncx_path, content_element.get("src"))))
            walk(point, level + 1)

    walk(nav_map, 1)
    return entries


def _toc(book: epub.EpubBook, opf_dir: str, flow: _Flow) -> list[TocEntry]:
    """The nav document's TOC when it resolves into the spine, else the NCX's, else nothing."""
    navs = [i for i in book.get_items() if isinstance(i, epub.EpubNav)]
    ncxs = [i for i in book.get_items() if i.media_type == "application/x-dtbncx+xml"]
    candidates = [(_nav_entries, item) for item in navs] + [(_ncx_entries, item) for item in ncxs]
    for parse, item in candidates:
        raw = parse(posixpath.normpath(posixpath.join(opf_dir, item.file_name)), item.get_content())
        entries = [
            TocEntry(title, level, block)
            for title, level, target in raw
            if title and (block := flow.locate(target)) is not None
        ]
        if entries:
            if len(entries) < len(raw):
                log.info("%d TOC entries point outside the spine and were ignored", len(raw) - len(entries))
            return entries
    return []


def _metadata(book: epub.EpubBook) -> tuple[str | None, tuple[str, ...], str | None]:
    """Title, authors in the OPF's order (creators without a role count as authors), language."""
    titles = [clean_metadata(value) for value, _ in book.get_metadata("DC", "title")]
    creators = []
    for value, attributes in book.get_metadata("DC", "creator"):
        role = next((v for k, v in attributes.items() if k.endswith("role")), "aut")
        if role == "aut" and (author := clean_metadata(value)):
            creators.append(author)
    languages = [clean_metadata(value) for value, _ in book.get_metadata("DC", "language")]
    return next(filter(None, titles), None), tuple(creators), next(filter(None, languages), None)


def read_epub(path: Path) -> ExtractedBook:
    """Text, chapters and metadata of an EPUB file (its magic already checked)."""
    name = path.name
    try:
        with zipfile.ZipFile(path) as archive:
            _refuse_bomb(archive, name)
            if (bad := archive.testzip()) is not None:
                raise zipfile.BadZipFile(f"damaged member {bad}")
            _refuse_drm(archive, name)
        reader = epub.EpubReader(str(path), {"ignore_ncx": True})
        book = reader.load()
    except _DAMAGED as exc:
        raise InvalidArgument(
            f"{name} is a damaged EPUB ({type(exc).__name__}: {exc}); it may be truncated or corrupt. "
            "Download or export it again (calibre's 'Convert books' to EPUB can repair it)."
        ) from None
    flow = _read_flow(book, reader.opf_dir)
    if not flow.blocks:
        raise FailedPrecondition(
            f"{name} is an EPUB whose documents hold no text (only images?); "
            "it needs OCR before it can be indexed."
        )
    title, authors, language = _metadata(book)
    chapters, source = choose_chapters(flow.blocks, _toc(book, reader.opf_dir, flow), heading_max_level=2)
    return ExtractedBook(str(path), BookFormat.EPUB, title, authors, language, chapters, source,
                         paragraphs=book_text(flow.blocks))
