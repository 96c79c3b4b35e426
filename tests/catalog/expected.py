"""What the catalog must answer, derived from Calibre's own `calibredb list` output.

expected_<name>_library.json (written by make_expected.py) holds, per book, what Calibre
itself reports. The functions here map those rows to the contract's fields, the way the
MCP gateway returns them (None is the contract's null), so that tests at every level
(catalog gRPC here, end to end through the gateway) check against the same truth:
`book_fields` for alexandria_book, `summary_fields` for alexandria_search,
`stats_fields` for the calibre half of alexandria_stats, `preview_fields` for
alexandria_ingest_preview. The contract's rules applied here: ratings 0-10 become
stars (rating / 2, null when unrated), Calibre's undefined date (year 101) is null,
series_index is null outside a series, authors are joined with " & " in Calibre's order.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from alexandria_stack.layout import SAMPLE_LIBRARY

HERE = Path(__file__).resolve().parent
LIBRARIES = {
    "shared": HERE.parents[2] / "shared" / "corpus" / "calibre-library",
    "fixture": SAMPLE_LIBRARY,
}
Row = dict[str, Any]


def load_rows(name: str) -> list[Row]:
    """The calibredb rows of library `name` ("shared" or "fixture"), by id."""
    return json.loads((HERE / f"expected_{name}_library.json").read_text(encoding="utf-8"))


def formats(row: Row) -> list[str]:
    """The book's formats as the contract shows them: upper case, sorted."""
    return sorted(Path(p).suffix[1:].upper() for p in row["formats"])


def file_path(row: Row, library: Path, fmt: str) -> str:
    """Where the book's file of format `fmt` is, under `library`."""
    relative = next(p for p in row["formats"] if Path(p).suffix[1:].upper() == fmt)
    return str(library / relative)


def summary_fields(row: Row) -> dict[str, Any]:
    """alexandria_search's fields of one book (the proto's BookSummary)."""
    in_series = bool(row.get("series"))
    return {
        "id": row["id"],
        "title": row["title"],
        "author": row["authors"],
        "authors": row["authors"].split(" & "),
        "language": row["languages"][0] if row["languages"] else "",
        "languages": row["languages"],
        "tags": row["tags"],
        "series": row["series"] if in_series else None,
        "series_index": row["series_index"] if in_series else None,
        "formats": formats(row),
    }


def book_fields(row: Row) -> dict[str, Any]:
    """alexandria_book's fields of one book (the proto's BookDetail), every file on disk."""
    pubdate = row.get("pubdate") or ""
    rating = row.get("rating") or 0
    return {
        **summary_fields(row),
        "isbn": row.get("isbn") or None,
        "publisher": row.get("publisher") or None,
        # calibredb prints UTC ISO timestamps; year 101 is Calibre's "undefined".
        "pubdate": pubdate[:10] if pubdate and int(pubdate[:4]) > 101 else None,
        "rating": rating / 2 if rating else None,
        "identifiers": row["identifiers"],
        "uuid": row["uuid"],
        "author_sort": row["author_sort"],
        "missing_formats": [],
        "highlights": 0,  # no reader has highlighted the corpus's books
    }


def stats_fields(rows: list[Row]) -> dict[str, Any]:
    """The calibre half of alexandria_stats."""
    return {
        "total_books": len(rows),
        "total_authors": len({a for row in rows for a in row["authors"].split(" & ")}),
        "formats": dict(Counter(f for row in rows for f in set(formats(row)))),
        "languages": dict(Counter(x for row in rows for x in set(row["languages"]))),
    }


def selected_format(row: Row, preferred: str) -> str:
    """The format ingest reads and a preview shows: the preferred one when the book has it, else EPUB, then
    PDF, then the first other ("any": no preference)."""
    available = formats(row)
    order = ([] if preferred == "any" else [preferred.upper()]) + ["EPUB", "PDF"]
    return next((fmt for fmt in order if fmt in available), available[0] if available else "")


def preview_fields(
    row: Row, library: Path, format_filter: str, already_ingested: bool = False, scanned: bool = False
) -> dict[str, Any]:
    """alexandria_ingest_preview's fields of one book (the proto's PreviewBook)."""
    fmt = selected_format(row, format_filter)
    return {
        "id": row["id"],
        "title": row["title"],
        "author": row["authors"],
        "language": row["languages"][0] if row["languages"] else "",
        "formats": formats(row),
        "selected_format": fmt,
        "file_path": file_path(row, library, fmt) if fmt else "",
        "already_ingested": already_ingested,
        "scanned": scanned,  # no book of these libraries is a scanned PDF
    }
