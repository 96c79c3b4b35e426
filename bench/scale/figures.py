"""The figures of each size of the bench collection, as a table and as the last line's JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from alexandria.settings import StoreSettings
from bench.common import Latency
from bench.scale.collection import GB, AnnRecall
from bench.scale.stack import EmbedderMemory

LIBRARY_BOOKS = 10_000


@dataclass(frozen=True)
class Size:
    """The figures of one size of the bench collection."""

    books: int
    points: int
    passages: int
    write_pps: float | None  # None: not built by this run (--kept)
    upsert_pps: float | None
    segments_gb: float
    wal_gb: float
    segments: int  # every query searches each one
    reopen_cold_s: float
    reopen_warm_s: float
    ann: AnnRecall
    stack_start_s: float
    rss_start_gb: float
    rss_idle_gb: float
    rss_load_gb: float
    anon_idle_gb: float  # of the RSS: anonymous memory (the heap), the rest being mapped files (the store's)
    anon_load_gb: float
    precise: Latency
    contextual: Latency
    under_load: Latency
    compact_s: float | None = None  # the figures after `alexandria compact` (--compact-mb), which took this long
    memory_limit_gb: float | None = None  # the whole stack held to this much memory, page cache included

    @property
    def disk_gb(self) -> float:
        return self.segments_gb + self.wal_gb


def table(sizes: list[Size]) -> str:
    columns: list[tuple[str, str, Any]] = [
        ("books", "{:>9,}", lambda s: s.books),
        ("points", "{:>11,}", lambda s: s.points),
        ("write p/s", "{:>9}", lambda s: _whole(s.write_pps)),
        ("upsert p/s", "{:>10}", lambda s: _whole(s.upsert_pps)),
        ("seg GB", "{:>7.2f}", lambda s: s.segments_gb),
        ("wal GB", "{:>6.2f}", lambda s: s.wal_gb),
        ("segments", "{:>8}", lambda s: s.segments),
        ("KB/book", "{:>8.0f}", lambda s: s.disk_gb * GB / 1024 / s.books),
        ("reopen s", "{:>8.2f}", lambda s: s.reopen_cold_s),
        ("warm s", "{:>6.2f}", lambda s: s.reopen_warm_s),
        ("up s", "{:>5.1f}", lambda s: s.stack_start_s),
        ("RSS start", "{:>9.2f}", lambda s: s.rss_start_gb),
        ("RSS idle", "{:>8.2f}", lambda s: s.rss_idle_gb),
        ("RSS load", "{:>8.2f}", lambda s: s.rss_load_gb),
        ("anon idle", "{:>9.2f}", lambda s: s.anon_idle_gb),
        ("anon load", "{:>9.2f}", lambda s: s.anon_load_gb),
        ("prec p50", "{:>8.1f}", lambda s: s.precise.p50_ms),
        ("prec p95", "{:>8.1f}", lambda s: s.precise.p95_ms),
        ("ctx p50", "{:>7.1f}", lambda s: s.contextual.p50_ms),
        ("ctx p95", "{:>7.1f}", lambda s: s.contextual.p95_ms),
        ("load p50", "{:>8.1f}", lambda s: s.under_load.p50_ms),
        ("load p95", "{:>8.1f}", lambda s: s.under_load.p95_ms),
        ("ANN ms", "{:>6.2f}", lambda s: s.ann.query_ms),
        ("recall@10", "{:>9.3f}", lambda s: s.ann.exact),
        ("within eps", "{:>10.3f}", lambda s: s.ann.within_epsilon),
        ("compact s", "{:>9}", lambda s: _whole(s.compact_s)),
        ("mem cap GB", "{:>10}", lambda s: "" if s.memory_limit_gb is None else f"{s.memory_limit_gb:g}"),
    ]
    header = " ".join(f"{name:>{len(fmt.format(value(sizes[0])))}}" for name, fmt, value in columns)
    rows = [" ".join(fmt.format(value(s)) for _, fmt, value in columns) for s in sizes]
    return "\n".join([header, *rows])


def _whole(value: float | None) -> str:
    """A table cell: the value without decimals, blank for a figure this run did not measure."""
    return "" if value is None else f"{value:.0f}"


def estimate_library(size: Size) -> dict[str, float | None]:
    """10,000 books at the largest size's figures a book: points, disk, and the hours a build at its write rate
    takes (None when this run built nothing)."""
    points = size.points / size.books * LIBRARY_BOOKS
    return {"points": round(points), "disk_gb": round(size.disk_gb / size.books * LIBRARY_BOOKS, 1),
            "build_hours": round(points / size.write_pps / 3600, 2) if size.write_pps else None}


def summary(sizes: list[Size], memory: EmbedderMemory | None, settings: StoreSettings) -> dict[str, Any]:
    context = {
        "sizes": [{**asdict(s), "disk_gb": s.disk_gb} for s in sizes],
        "embedder": asdict(memory) if memory else None,
        "store": settings.model_dump(mode="json", exclude={"qdrant_api_key"}),
    }
    if not sizes:
        return context
    largest = sizes[-1]
    return {
        "books": largest.books,
        "points": largest.points,
        "disk_gb": round(largest.disk_gb, 2),
        "wal_gb": round(largest.wal_gb, 2),
        "rss_gb": round(largest.rss_load_gb, 2),
        "rss_anon_gb": round(largest.anon_load_gb, 2),
        "reopen_s": round(largest.reopen_cold_s, 2),
        "write_pps": round(largest.write_pps) if largest.write_pps else None,
        "query_p50_ms": round(largest.precise.p50_ms, 1),
        "query_p95_ms": round(largest.precise.p95_ms, 1),
        "contextual_p50_ms": round(largest.contextual.p50_ms, 1),
        "ann_recall@10": round(largest.ann.exact, 4),
        "ann_recall@10_within_epsilon": round(largest.ann.within_epsilon, 4),
        "estimate_10000_books": estimate_library(largest),
        **context,
    }
