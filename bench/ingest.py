"""Ingest benchmark: Pride and Prejudice end to end through the MCP gateway, against a bare encode.

    .venv/bin/python -m bench.ingest [--no-batch] [--embedder-profile PROFILE]

In one run:
1. starts the whole stack (`alexandria up`) on an empty embedded store in a scratch folder;
2. ingests Pride and Prejudice (EPUB, ~122k words) with `alexandria_ingest` through the
   gateway, timing each stage from the progress notifications;
3. with the stack idle, the baseline: a bare encode by the configured model (EMBEDDER_PROFILE) in this process of
   everything the ingest embeds: the same sentences, the passages' windows (cut as the embedder cuts
   them) and the chapter openings;
4. unless --no-batch, `alexandria_batch_ingest` of the rest of the library in one call,
   reported as books per hour.
Prints a table; the last line is one JSON object:
wall_s, chunks, bare_encode_s, ratio (= wall_s / bare_encode_s), books_per_hour.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import numpy as np
from mcp import Client

from alexandria.clients import WINDOW_OVERLAP_TOKENS
from alexandria.settings import EmbedderSettings
from bench.common import CALIBRE_LIBRARY, PRIDE_EPUB, apply_setting_flags, setting_flags
from services.embedder.loading import load_configured_model
from services.embedder.profiles import resolve_profile
from services.ingest.chunking import chunk_book, validate_params
from services.ingest.documents import window_header
from services.ingest.extract import extract_book
from services.ingest.segment import segment, sentence_texts
from tests.e2e.stack import start_stack

PRIDE_ID = 1
BATCH_SIZE = 64


async def ingest_through_gateway(url: str) -> tuple[float, dict, dict[str, float]]:
    """Wall time of one alexandria_ingest, its result, and when each stage started (s from the call)."""
    stage_starts: dict[str, float] = {}
    started = time.perf_counter()

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        stage_starts.setdefault(stage_of(message or ""), time.perf_counter() - started)

    async with Client(url) as client:
        result = await client.call_tool("alexandria_ingest", {"book_id": PRIDE_ID}, progress_callback=on_progress)
    wall = time.perf_counter() - started
    if result.is_error:
        raise SystemExit(f"ingest failed: {result.structured_content}")
    return wall, result.structured_content, stage_starts


def stage_of(message: str) -> str:
    """The ingest stage a progress message belongs to (the gateway forwards the service's words)."""
    if message.startswith(("writing", "wrote")):
        return "write"
    if "parents" in message:
        return "embed parents"
    if "windows" in message:
        return "embed windows"
    if message.startswith("embedded") and "sentences" in message or " chapters, " in message:
        return "embed sentences"  # the extract stage's last message says it is done
    return "extract + segment"


async def batch_through_gateway(url: str) -> tuple[float, dict]:
    started = time.perf_counter()
    async with Client(url) as client:
        result = await client.call_tool("alexandria_batch_ingest", {"book_ids": list(range(2, 10))})
    return time.perf_counter() - started, result.structured_content


def bare_encode() -> tuple[float, float, int, int]:
    """Seconds to encode the book's sentences, then its passages' windows and chapter openings, with the
    model in this process."""
    settings = EmbedderSettings()
    embedding_model = load_configured_model(resolve_profile(settings, "cpu"), "cpu", 0, settings.embedder_models_dir)

    def encode(texts: list[str]) -> np.ndarray:
        return np.concatenate([embedding_model.encode(texts[i:i + BATCH_SIZE]).vectors
                               for i in range(0, len(texts), BATCH_SIZE)])

    encode(["warm up"] * BATCH_SIZE)
    book = extract_book(PRIDE_EPUB)
    sentences = segment(book)
    texts = sentence_texts(sentences)
    started = time.perf_counter()
    vectors = encode(texts)
    sentences_s = time.perf_counter() - started
    similarities = np.einsum("ij,ij->i", vectors[:-1], vectors[1:])
    chunked = chunk_book(book, sentences, similarities, validate_params())
    title = book.title or PRIDE_EPUB.stem
    chunk_texts = [window for c in chunked.chunks for window in embedding_model.windows(
        window_header(title, c.locator.chapter_title), c.text, WINDOW_OVERLAP_TOKENS)]
    chunk_texts += [p.embed_text for p in chunked.parents]
    started = time.perf_counter()
    encode(chunk_texts)
    return sentences_s, time.perf_counter() - started, len(texts), len(chunk_texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-batch", action="store_true", help="skip the whole-library batch")
    setting_flags(parser, ["EMBEDDER_PROFILE"])
    args = parser.parse_args()
    apply_setting_flags(args)
    if not PRIDE_EPUB.is_file():
        raise SystemExit(f"needs the shared corpus: {PRIDE_EPUB} is missing")
    with tempfile.TemporaryDirectory(prefix="alexandria-ingest-bench-") as scratch:
        # The profile the bare encode runs (EMBEDDER_PROFILE, auto as the embedder resolves it alone), not the one
        # `alexandria up` would choose by the library's languages: both sides of the ratio run the same model.
        profile = resolve_profile(EmbedderSettings(), "cpu").profile
        stack = start_stack(Path(scratch) / "var", CALIBRE_LIBRARY, extra_env={"EMBEDDER_PROFILE": profile})
        try:
            wall, result, stages = asyncio.run(ingest_through_gateway(stack.mcp_url))
            sentences_s, chunks_s, sentence_count, chunk_count = bare_encode()
            batch_s, batch = (0.0, {}) if args.no_batch else asyncio.run(batch_through_gateway(stack.mcp_url))
        finally:
            stack.stop()
    bare_s = sentences_s + chunks_s
    ordered = sorted(stages.items(), key=lambda kv: kv[1])
    print(f"{'stage (through the gateway)':<34} {'seconds':>8}")
    for (stage, start), nxt in zip(ordered, [*(s for _, s in ordered[1:]), wall], strict=True):
        print(f"  {stage:<32} {nxt - start:>8.1f}")
    print(f"{'ingest wall, Pride and Prejudice':<34} {wall:>8.1f}   ({result['chunks']} chunks, "
          f"{result['parent_chunks']} parents)")
    print(f"{'bare encode: sentences':<34} {sentences_s:>8.1f}   ({sentence_count} texts)")
    print(f"{'bare encode: windows + parents':<34} {chunks_s:>8.1f}   ({chunk_count} texts)")
    print(f"{'ratio wall / bare (all it embeds)':<34} {wall / bare_s:>8.2f}")
    books_per_hour = 0.0
    if batch:
        done = batch.get("succeeded", 0)
        books_per_hour = 3600 * done / batch_s if batch_s else 0.0
        print(f"{'batch: books ingested':<34} {done:>8}   in {batch_s:.0f} s -> {books_per_hour:.0f} books/hour")
    print(json.dumps({
        "wall_s": round(wall, 1),
        "chunks": result["chunks"],
        "parents": result["parent_chunks"],
        "bare_encode_s": round(bare_s, 1),
        "bare_sentences_s": round(sentences_s, 1),
        "ratio": round(wall / bare_s, 2),
        "books_per_hour": round(books_per_hour, 1),
        "batch_books": batch.get("succeeded", 0) if batch else 0,
    }))


if __name__ == "__main__":
    main()
