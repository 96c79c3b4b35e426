"""Catalog search latency on a 10,000-book Calibre library, in process and through gRPC.

    .venv/bin/python -m bench.catalog [--books 10000] [--rounds 30] [--scratch bench/out/catalog]

Builds a scratch library: a copy of ../shared/corpus/calibre-library's metadata.db (the
fixture library when ../shared is missing) with its books copied, links and all, until it
holds --books books. Every copy gets its own numbered authors and titles ("Jane Austen 17",
"Emma 17"), so a search may match one book, a few, thousands, or none. Then it times a
mix of author, title, tag and language searches (limit 20, the contract's default):
- baseline: the way the original system searched, one SQL query per search on a fresh
  read-only connection (LIKE filters, GROUP_CONCAT for the lists);
- in process: CalibreLibrary.snapshot().search (the in-memory index);
- gRPC: SearchBooks through a real server on a unix socket, with the project's client.
The last line is one JSON object: books, search_p50_ms_inproc, search_p50_ms_grpc,
search_p95_ms_grpc (target: p50 <= 5 ms through gRPC), and the baseline's p50.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import sqlite3
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

from alexandria.clients import ServiceClient
from alexandria.contract import BOOK_SEARCH_LIMIT
from alexandria.settings import CatalogSettings, ClientSettings
from alexandria.v1 import catalog_pb2, catalog_pb2_grpc
from alexandria_stack.layout import SAMPLE_LIBRARY
from bench.basics import OUT
from bench.common import CALIBRE_LIBRARY, percentile_ms
from services.catalog.calibre_db import CalibreLibrary
from services.catalog.library import BookQuery
from services.catalog.server import create_server

SOURCES = (CALIBRE_LIBRARY, SAMPLE_LIBRARY)
LIMIT = BOOK_SEARCH_LIMIT.default
QUERIES: dict[str, BookQuery] = {
    "author, many books": BookQuery(author="austen"),
    "author, a few books": BookQuery(author="shakespeare 12"),
    "author, no book": BookQuery(author="nobody at all"),
    "title, many books": BookQuery(title="guide"),
    "title, a few books": BookQuery(title="macbeth 43"),
    "title, no book": BookQuery(title="no such title"),
    "tag": BookQuery(tags=("Comedy of Manners",)),
    "two tags": BookQuery(tags=("Drama", "Plays")),
    "language": BookQuery(language="deu"),
    "language + author": BookQuery(language="fra", author="schember 99"),
    "language + tag + title": BookQuery(language="eng", tags=("Tragedy",), title="hamlet 77"),
}

# Links copied as they are: the copies share the originals' tags, languages, series...
COPIED_LINKS = (
    ("books_tags_link", "tag"),
    ("books_languages_link", "lang_code"),
    ("books_series_link", "series"),
    ("books_publishers_link", "publisher"),
    ("books_ratings_link", "rating"),
)


def build_library(source: Path, scratch: Path, books: int) -> Path:
    """A scratch library whose metadata.db holds `books` copies of the source's books."""
    library = scratch / "library"
    shutil.rmtree(library, ignore_errors=True)
    library.mkdir(parents=True)
    database = library / "metadata.db"
    shutil.copyfile(source / "metadata.db", database)
    database.chmod(0o644)
    with closing(sqlite3.connect(database)) as db, db:
        # Stand-ins for the functions Calibre registers and its triggers call.
        db.create_function("title_sort", 1, lambda title: title)
        db.create_function("uuid4", 0, lambda: str(uuid.uuid4()))
        originals = db.execute(
            "SELECT id, title, path, pubdate, series_index FROM books ORDER BY id"
        ).fetchall()
        authors = dict(db.execute("SELECT id, name FROM authors"))
        links = {
            (table, column): db.execute(f"SELECT book, {column} FROM {table} ORDER BY id").fetchall()
            for table, column in COPIED_LINKS
        }
        author_links = db.execute("SELECT book, author FROM books_authors_link ORDER BY id").fetchall()
        data = db.execute("SELECT book, format, uncompressed_size, name FROM data").fetchall()
        identifiers = db.execute("SELECT book, type, val FROM identifiers").fetchall()
        copy = 0
        total = len(originals)
        while total < books:
            copy += 1
            for book_id, title, path, pubdate, series_index in originals[: books - total]:
                new_id = db.execute(
                    "INSERT INTO books (title, path, pubdate, series_index, author_sort) VALUES (?, ?, ?, ?, '')",
                    (f"{title} {copy}", f"{path} {copy}", pubdate, series_index),
                ).lastrowid
                for linked_book, author_id in author_links:
                    if linked_book == book_id:
                        name = f"{authors[author_id]} {copy}"
                        db.execute("INSERT OR IGNORE INTO authors (name, sort) VALUES (?, ?)", (name, name))
                        (new_author,) = db.execute(
                            "SELECT id FROM authors WHERE name = ?", (name,)
                        ).fetchone()
                        db.execute(
                            "INSERT INTO books_authors_link (book, author) VALUES (?, ?)",
                            (new_id, new_author),
                        )
                for (table, column), rows in links.items():
                    db.executemany(
                        f"INSERT INTO {table} (book, {column}) VALUES (?, ?)",
                        [(new_id, value) for linked_book, value in rows if linked_book == book_id],
                    )
                db.executemany(
                    "INSERT INTO data (book, format, uncompressed_size, name) VALUES (?, ?, ?, ?)",
                    [(new_id, fmt, size, name) for b, fmt, size, name in data if b == book_id],
                )
                db.executemany(
                    "INSERT INTO identifiers (book, type, val) VALUES (?, ?, ?)",
                    [(new_id, kind, f"{value}-{copy}") for b, kind, value in identifiers if b == book_id],
                )
                total += 1
    return library


def sql_search(database: Path, query: BookQuery, limit: int) -> list[tuple]:
    """The baseline: one SQL query per search, as the original system did it."""
    clauses, parameters = [], []
    if query.author:
        clauses.append(
            "EXISTS (SELECT 1 FROM books_authors_link l JOIN authors a ON a.id = l.author "
            "WHERE l.book = b.id AND a.name LIKE ?)"
        )
        parameters.append(f"%{query.author}%")
    if query.title:
        clauses.append("b.title LIKE ?")
        parameters.append(f"%{query.title}%")
    if query.language:
        clauses.append(
            "EXISTS (SELECT 1 FROM books_languages_link l JOIN languages g ON g.id = l.lang_code "
            "WHERE l.book = b.id AND g.lang_code = ?)"
        )
        parameters.append(query.language)
    for tag in query.tags:
        clauses.append(
            "EXISTS (SELECT 1 FROM books_tags_link l JOIN tags t ON t.id = l.tag WHERE l.book = b.id AND t.name = ?)"
        )
        parameters.append(tag)
    where = " AND ".join(clauses) or "1"
    sql = f"""
        SELECT b.id, b.title,
            (SELECT GROUP_CONCAT(a.name, ' & ') FROM books_authors_link l JOIN authors a ON a.id = l.author
             WHERE l.book = b.id),
            (SELECT GROUP_CONCAT(t.name) FROM books_tags_link l JOIN tags t ON t.id = l.tag WHERE l.book = b.id),
            (SELECT GROUP_CONCAT(g.lang_code) FROM books_languages_link l
             JOIN languages g ON g.id = l.lang_code WHERE l.book = b.id),
            (SELECT GROUP_CONCAT(d.format) FROM data d WHERE d.book = b.id)
        FROM books b WHERE {where} ORDER BY b.id LIMIT ?"""
    with closing(sqlite3.connect(f"{database.absolute().as_uri()}?mode=ro", uri=True)) as db:
        return db.execute(sql, [*parameters, limit]).fetchall()


def time_s(call: Callable[[], object], rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return times


async def grpc_times(
    library: Path, scratch: Path, rounds: int
) -> tuple[dict[str, list[float]], dict[str, int]]:
    settings = CatalogSettings(catalog_listen=f"unix://{scratch}/catalog.sock", calibre_library_path=library)
    server = create_server(settings)
    await server.start()
    client = ServiceClient("catalog", server.address, catalog_pb2_grpc.CatalogServiceStub, ClientSettings())
    times: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    try:
        for name, query in QUERIES.items():
            request = catalog_pb2.SearchBooksRequest(
                author=query.author, title=query.title, language=query.language, tags=query.tags, limit=LIMIT
            )
            counts[name] = (await client.call("SearchBooks", request)).count  # warm-up
            times[name] = []
            for _ in range(rounds):
                started = time.perf_counter()
                await client.call("SearchBooks", request)
                times[name].append(time.perf_counter() - started)
    finally:
        await client.close()
        await server.stop(0)
    return times, counts


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--books", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=30, help="timed searches per query and mode")
    parser.add_argument("--baseline-rounds", type=int, default=5)
    parser.add_argument("--scratch", type=Path, default=OUT / "catalog")
    args = parser.parse_args()
    # Quiet: the server would warn that it runs without a store, which this benchmark means.
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    source = next(s for s in SOURCES if (s / "metadata.db").is_file())

    started = time.perf_counter()
    library = build_library(source, args.scratch, args.books)
    built_s = time.perf_counter() - started
    catalog = CalibreLibrary(library)
    started = time.perf_counter()
    books = len(catalog.snapshot().books)
    read_s = time.perf_counter() - started

    database = library / "metadata.db"
    baseline = {
        name: time_s(lambda q=q: sql_search(database, q, LIMIT), args.baseline_rounds)
        for name, q in QUERIES.items()
    }
    inproc = {
        name: time_s(lambda q=q: catalog.snapshot().search(q, LIMIT), args.rounds)
        for name, q in QUERIES.items()
    }
    remote, counts = asyncio.run(grpc_times(library, args.scratch, args.rounds))

    print(
        f"catalog search: {books:,} books from {source} (built {built_s:.1f} s, read into memory {read_s:.2f} s)"
    )
    print(
        f"limit {LIMIT}; median ms of {args.rounds} searches ({args.baseline_rounds} for the SQL baseline)\n"
    )
    header = (
        f"{'query':<26}{'found':>6}{'SQL baseline':>14}{'in process':>12}{'gRPC p50':>10}{'gRPC p95':>10}"
    )
    print(header)
    print("-" * len(header))
    for name in QUERIES:
        print(
            f"{name:<26}{counts[name]:>6}{percentile_ms(baseline[name], 50):>14.2f}"
            f"{percentile_ms(inproc[name], 50):>12.3f}{percentile_ms(remote[name], 50):>10.2f}"
            f"{percentile_ms(remote[name], 95):>10.2f}"
        )
    every = {
        mode: [t for ts in times.values() for t in ts]
        for mode, times in (("baseline", baseline), ("inproc", inproc), ("grpc", remote))
    }
    summary = {
        "books": books,
        "search_p50_ms_inproc": round(percentile_ms(every["inproc"], 50), 3),
        "search_p50_ms_grpc": round(percentile_ms(every["grpc"], 50), 3),
        "search_p95_ms_grpc": round(percentile_ms(every["grpc"], 95), 3),
        "baseline_sql_p50_ms": round(percentile_ms(every["baseline"], 50), 3),
    }
    summary["grpc_speedup_vs_sql_baseline"] = round(
        summary["baseline_sql_p50_ms"] / summary["search_p50_ms_grpc"], 1
    )
    print("-" * len(header))
    print(
        f"{'all queries':<26}{'':>6}{summary['baseline_sql_p50_ms']:>14.2f}{summary['search_p50_ms_inproc']:>12.3f}"
        f"{summary['search_p50_ms_grpc']:>10.2f}{summary['search_p95_ms_grpc']:>10.2f}"
    )
    print(
        f"\ngRPC p50 is {summary['grpc_speedup_vs_sql_baseline']}x faster than the SQL baseline; target <= 5 ms"
    )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
