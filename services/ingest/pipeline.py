"""Ingest as explicit stages: extract -> segment -> embed sentences -> chunk -> embed windows -> embed
parents -> write.

Sentences are embedded first: the neighbour similarities that place the chunk breaks (measured from
the model's similarity floor) and each chunk's dense vector (the normalised mean of its sentences'
vectors, which covers the whole chunk where a direct embedding would stop at the model's window) come
from them. Each passage is then embedded again as windows that fit the model, each starting with the
book's title and the passage's chapter (the embedder cuts them in its own tokens): its window vectors,
which ranking compares with the question, see the whole passage in context, where a sentence alone has
lost it (the windows bench, bench/windows.py in git history, measured both). The chapter parents are embedded from a bounded opening.

`BookIngestor` runs them for one book and reports progress through a `Report`
callback; the servicer turns reports into a stream. Blocking work (reading files,
the store) runs in worker threads so the service keeps answering while a book is
ingested. The model lives in the embedder service: this module only sends it texts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from alexandria.book_formats import BookFormat
from alexandria.book_identity import FileVersion
from alexandria.clients import EmbedderClient
from alexandria.errors import AlexandriaError, AlreadyExists, InvalidArgument
from alexandria.languages import language_code
from alexandria.progress import progress_bar
from alexandria.store import Store, finish_before_cancel
from alexandria.store.records import BookRecord
from alexandria.v1 import catalog_pb2
from services.ingest.chunking import chunk_book, compare_thresholds, sample_chunks, validate_params
from services.ingest.documents import (
    Chunk,
    ChunkingParams,
    ChunkingPreview,
    ExtractedBook,
    Sentence,
    ThresholdReport,
    window_header,
)
from services.ingest.extract import extract_book
from services.ingest.extract.ocr import NO_OPTIONS, OcrOptions, missing_language_notice
from services.ingest.highlights import HighlightSync
from services.ingest.locations import viewer_locations
from services.ingest.progress import Report
from services.ingest.segment import segment, sentence_texts
from services.ingest.writer import BookWriter, build_points

log = logging.getLogger(__name__)

# Texts per embedder call while embedding a book: big enough to keep the model's batches
# full, small enough that progress moves every second or two on a CPU.
EMBED_SLICE = 1024
BYTES_PER_MB = 1024 * 1024
# A write may wait for the embedded store's background merge of the collection's segments (minutes on a large
# library, once more than EMBEDDED_MAX_SEGMENT_MB of vectors were written during it: alexandria/store/merging.py).
# Saying so this often keeps the caller's progress moving meanwhile.
WAITING_NOTE_S = 10.0


@dataclass(frozen=True)
class BookToIngest:
    """A book to ingest: its file, the version of the file read, and what is known of it before reading it."""

    path: Path
    file_version: FileVersion
    book_key: str
    title: str | None = None
    authors: tuple[str, ...] = ()
    language: str | None = None
    calibre_id: int | None = None
    extracted: ExtractedBook | None = None  # already read (local files are read once for their metadata)
    highlights: tuple[catalog_pb2.Highlight, ...] = ()  # a Calibre book's, made in Calibre's viewer

    @property
    def format(self) -> str:
        """The file's format as its stamp names it (Calibre's name, which extraction parses)."""
        return self.file_version.stamp.format

    @property
    def size_mb(self) -> float:
        return round(self.file_version.stamp.size / BYTES_PER_MB, 2)


@dataclass(frozen=True)
class PreparedBook:
    """A book read and split into sentences, with the similarity of each sentence to the next."""

    book: ExtractedBook
    sentences: list[Sentence]
    vectors: np.ndarray  # one L2-normalised row per sentence
    similarities: np.ndarray


@dataclass
class IngestOutcome:
    """What one ingest did, in the contract's terms."""

    title: str
    author: str
    language: str
    format: str
    book_key: str
    collection: str
    params: ChunkingParams
    hierarchical: bool
    file_size_mb: float
    calibre_id: int | None
    file_path: str
    chunks: int = 0
    parents: int = 0
    highlights: int = 0  # the reader's, written with the book
    truncated: int = 0
    seconds: float = 0.0
    steps: list[str] = field(default_factory=list)

    @property
    def progress(self) -> str:
        return progress_bar(1.0)


def ocr_options(report: Report, language: str | None, configured: OcrOptions) -> OcrOptions:
    """How to OCR a book's scanned pages, each page read reported as progress ("ocr 12/240 pages") from the
    worker thread that extraction runs in."""
    loop = asyncio.get_running_loop()

    def progress(done: int, total: int) -> None:
        loop.call_soon_threadsafe(report, "ocr", done, total, f"ocr {done}/{total} pages")

    return replace(configured, language=language, progress=progress)


class BookIngestor:
    def __init__(self, store: Store, embedder: EmbedderClient, on_written: Callable[[str], None],
                 ocr: OcrOptions = NO_OPTIONS) -> None:
        self.store = store
        self.embedder = embedder
        self.ocr = ocr
        # Called with the collection after each book is written (index maintenance).
        self.on_written = on_written
        self._in_progress: set[tuple[str, str]] = set()

    def claim(self, collection: str, book_key: str) -> bool:
        """Hold the book for one change at a time, whatever asks it (an ingest from any entry point, a removal, the
        sync's repair); False when another holds it. Taken without an await, it is never checked and taken apart."""
        key = (collection, book_key)
        if key in self._in_progress:
            return False
        self._in_progress.add(key)
        return True

    def is_claimed(self, collection: str, book_key: str) -> bool:
        return (collection, book_key) in self._in_progress

    def release(self, collection: str, book_key: str) -> None:
        self._in_progress.discard((collection, book_key))

    @contextmanager
    def claimed(self, collection: str, book_key: str, busy: AlexandriaError) -> Iterator[None]:
        """The book's claim (`claim`) held through the block; `busy` is raised when another holds it."""
        if not self.claim(collection, book_key):
            raise busy
        try:
            yield
        finally:
            self.release(collection, book_key)

    async def _embed(self, texts: Sequence[str], stage: str, report: Report) -> tuple[np.ndarray, int]:
        """Vectors of `texts` in slices, reporting progress after each slice."""
        parts, truncated = [], 0
        for start in range(0, len(texts), EMBED_SLICE):
            embedded = await self.embedder.embed_many(texts[start : start + EMBED_SLICE])
            parts.append(embedded.vectors)
            truncated += embedded.truncated
            done = min(start + EMBED_SLICE, len(texts))
            report(stage, done, len(texts), f"embedded {done:,} of {len(texts):,} {stage.removeprefix('embed ')}")
        if not parts:
            return np.zeros((0, 0), dtype=np.float32), 0
        return np.concatenate(parts), truncated

    async def _embed_windows(self, title: str, chunks: Sequence[Chunk], report: Report) -> list[np.ndarray]:
        """Each passage's window vectors (the embedder cuts them to fit its model), a slice at a time."""
        passages = [(window_header(title, chunk.locator.chapter_title), chunk.text) for chunk in chunks]
        vectors: list[np.ndarray] = []
        done = 0

        def embedded(count: int) -> None:
            nonlocal done
            done += count
            report("embed windows", done, len(passages), f"embedded the windows of {done:,} of {len(passages):,} passages")

        report("embed windows", 0, len(passages), f"embedding the windows of {len(passages):,} passages")
        for start in range(0, len(passages), EMBED_SLICE):
            vectors += await self.embedder.embed_windows(passages[start : start + EMBED_SLICE], on_embedded=embedded)
        return vectors

    async def prepare(self, source: BookToIngest, report: Report) -> PreparedBook:
        """Extract, segment and embed the sentences once: what chunking at any threshold needs."""
        report("extract", 0, 1, f"reading {source.path.name}")
        ocr = ocr_options(report, source.language, self.ocr)
        book = source.extracted
        if book is None:
            book = await asyncio.to_thread(extract_book, source.path, source.format, ocr)
        sentences = await asyncio.to_thread(segment, book, source.language)
        report("extract", 1, 1, f"{len(book.chapters)} chapters, {len(sentences):,} sentences")
        if not sentences:
            raise InvalidArgument(
                f"{source.path.name} has no text to index (no sentences were found); "
                "if it is a scanned book it needs OCR first."
            )
        floor = (await self.embedder.model_info()).similarity_floor
        vectors, _ = await self._embed(sentence_texts(sentences), "embed sentences", report)
        cosines = np.einsum("ij,ij->i", vectors[:-1], vectors[1:]) if len(vectors) > 1 else np.zeros(0)
        return PreparedBook(book, sentences, vectors, above_floor(cosines, floor).astype(np.float32))

    async def preview(self, source: BookToIngest, params: ChunkingParams, report: Report) -> tuple[PreparedBook, ChunkingPreview]:
        prepared = await self.prepare(source, report)
        chunked = chunk_book(prepared.book, prepared.sentences, prepared.similarities, params, hierarchical=True)
        return prepared, sample_chunks(chunked)

    async def compare(self, source: BookToIngest, min_size: int, max_size: int, report: Report) -> tuple[PreparedBook, ThresholdReport]:
        validate_params(None, min_size, max_size)
        prepared = await self.prepare(source, report)
        return prepared, compare_thresholds(prepared.sentences, prepared.similarities, min_size or None, max_size or None)

    async def ingest(
        self,
        source: BookToIngest,
        collection: str,
        params: ChunkingParams,
        hierarchical: bool,
        report: Report,
        replace: bool = False,
    ) -> IngestOutcome:
        """Ingest one book whole, or leave nothing of it visible. An ingested book is refused, unless
        `replace`: then the new version is written beside the old one, which goes once the new is whole."""
        started = time.perf_counter()
        writer = BookWriter(self.store, collection)
        title = source.title or source.path.stem
        # Claimed before the first await: a second call for the same book, from any entry point, must
        # find the claim (checked after an await, two calls both passed it and both wrote the book).
        busy = AlreadyExists(f"'{title}' is being ingested into '{collection}' right now; wait for it to finish.")
        with self.claimed(collection, source.book_key, busy):
            if not replace:
                await asyncio.to_thread(writer.refuse_if_ingested, source.book_key, title)
            model = await self.embedder.model_info()
            await asyncio.to_thread(writer.ensure_collection, model.dimension, model.name)
            outcome = IngestOutcome(
                title=title,
                author=" & ".join(source.authors),
                language=language_code(source.language or ""),
                format=source.format,
                book_key=source.book_key,
                collection=collection,
                params=params,
                hierarchical=hierarchical,
                file_size_mb=source.size_mb,
                calibre_id=source.calibre_id,
                file_path=str(source.path),
            )
            outcome.steps.append(f"📖 Found: '{title}' by {outcome.author or 'unknown author'} "
                                 f"({source.format}, {outcome.file_size_mb} MB)")
            prepared = await self.prepare(source, report)
            outcome.language = outcome.language or language_code(prepared.book.language or "")
            outcome.steps.append(f"📄 Extracted {len(prepared.book.chapters)} chapters "
                                 f"({prepared.book.chapter_source}), {prepared.book.word_count:,} words, "
                                 f"{len(prepared.sentences):,} sentences")
            if prepared.book.ocr_missing_language:
                outcome.steps.append("⚠️ " + missing_language_notice(prepared.book.ocr_missing_language,
                                                                      len(prepared.book.ocr_pages)))
            chunked = chunk_book(prepared.book, prepared.sentences, prepared.similarities, params, hierarchical)
            outcome.chunks, outcome.parents = len(chunked.chunks), len(chunked.parents)
            outcome.steps.append(
                f"✂️ Cut {outcome.chunks:,} chunks" + (f" under {outcome.parents} chapters" if hierarchical else "")
                + f" (threshold {params.threshold}, {params.min_chunk_size}-{params.max_chunk_size} words)"
            )
            window_vectors = await self._embed_windows(outcome.title, chunked.chunks, report)
            parent_vectors, outcome.truncated = await self._embed(
                [p.embed_text for p in chunked.parents], "embed parents", report)
            outcome.steps.append(
                f"🧠 Embedded {len(prepared.sentences):,} sentences, {sum(len(w) for w in window_vectors):,} "
                f"passage windows and {len(chunked.parents)} chapter openings with {model.name} on {model.device}"
            )
            book = BookRecord(
                book_key=source.book_key, title=outcome.title, author=outcome.author, authors=source.authors,
                language=outcome.language, file_path=str(source.path), format=prepared.book.format,
                calibre_id=source.calibre_id, model=model.name, dimension=model.dimension,
                chunking=params.to_stored(hierarchical),
                ingested_at=datetime.now(UTC).isoformat(timespec="seconds"), version=time.time_ns(),
                file_version=source.file_version,
            )
            # A PDF's passages are opened at their page; the other formats' by their first words.
            open_at = [] if book.format == BookFormat.PDF else await asyncio.to_thread(
                viewer_locations, prepared.book.viewer_text,
                [c.text for c in chunked.chunks])
            points = build_points(book, chunked, prepared.vectors, window_vectors, parent_vectors, open_at)
            await written_reporting_waits(asyncio.to_thread(writer.write, book.book_key, book.version, points),
                                          len(points), report)
            report("write", len(points), len(points), f"wrote {len(points):,} points")
            outcome.steps.append(f"💾 Wrote {len(points):,} points to '{collection}'")
            if source.highlights:
                highlights = HighlightSync(self.store, self.embedder, collection)
                await highlights.apply(highlights.plan_for(book, source.highlights))
                outcome.highlights = len(source.highlights)
                outcome.steps.append(f"🖍️ Made the reader's highlights searchable ({len(source.highlights)})")
            outcome.steps.append("✅ Successfully ingested!")
        self.on_written(collection)
        outcome.seconds = round(time.perf_counter() - started, 2)
        return outcome


async def written_reporting_waits(writing: Awaitable[int], points: int, report: Report) -> None:
    """Await `writing` (a book's `points`), reporting every WAITING_NOTE_S that it still waits."""
    report("write", 0, points, f"writing {points:,} points")
    task = asyncio.ensure_future(writing)
    started = time.monotonic()

    async def noting_waits() -> int:
        while not (await asyncio.wait({task}, timeout=WAITING_NOTE_S))[0]:
            report("write", 0, points, f"writing {points:,} points: still waiting for the store after "
                                       f"{time.monotonic() - started:.0f} s (it may be merging the collection's "
                                       "segments)")
        return task.result()

    # Cancelled (the client went away), the ingest still holds the book's claim until its write is over.
    await finish_before_cancel(noting_waits())


def above_floor(cosines: np.ndarray, floor: float) -> np.ndarray:
    """Neighbour cosines measured from the model's similarity floor (what it gives unrelated texts) up to
    1, so that a chunking threshold means the same for every model: e5 models give any two sentences
    0.75 or more, and a plain 0.55 would never break a chunk (measured: 700-word median chunks)."""
    return (cosines - floor) / (1.0 - floor)
