"""Queries under load: many MCP clients asking at once while a batch ingest runs.

    .venv/bin/python -m bench.load [--clients 30] [--queries 10] [--batch 1 2 3 | --sync]

Starts `alexandria up` on a scratch data directory with the shared library, ingests Hamlet so
that there is something to find, then starts a batch ingest of other books (or, with --sync,
`alexandria sync` of the whole library) and, while it runs, has each of `--clients` MCP clients
(each its own connection) ask `--queries` questions one after another through `alexandria_query`
at the tool's defaults. Reports errors, p50/p95/max latency of the queries that ran during the
batch or sync, and the same queries with the stack idle as the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client

from bench.common import CALIBRE_LIBRARY, percentile_ms
from tests.e2e.stack import HAMLET, start_stack

QUESTIONS = [
    "Why does Hamlet pretend to be mad?",
    "the ghost of the dead king on the castle walls",
    "Ophelia's death by drowning",
    "a play staged to catch the conscience of the king",
    "the gravedigger and the skull of the jester",
    "what Polonius advises his son before he leaves",
    "poisoned sword in the final duel",
    "the queen drinks from the poisoned cup",
    "to be or not to be",
    "Rosencrantz and Guildenstern sent to England",
]


async def ask(url: str, queries: int, offset: int, during: asyncio.Event | None) -> list[tuple[float, bool, bool]]:
    """(latency s, is_error, ran while the batch ran) of each query of one client."""
    samples = []
    async with Client(url) as client:
        await client.list_tools()
        for n in range(queries):
            question = QUESTIONS[(offset + n) % len(QUESTIONS)]
            started = time.perf_counter()
            result = await client.call_tool("alexandria_query", {"query": question})
            elapsed = time.perf_counter() - started
            samples.append((elapsed, bool(result.is_error), during is None or not during.is_set()))
    return samples


def summary(samples: list[tuple[float, bool, bool]]) -> dict:
    seconds = [s for s, _, _ in samples]
    return {
        "queries": len(samples),
        "errors": sum(1 for _, error, _ in samples if error),
        "p50_ms": round(percentile_ms(seconds, 50), 1),
        "p95_ms": round(percentile_ms(seconds, 95), 1),
        "max_ms": round(percentile_ms(seconds, 100), 1),
    }


async def measure(url: str, env: dict[str, str], clients: int, queries: int, batch: list[int] | None) -> dict:
    async with Client(url) as client:
        seeded = await client.call_tool("alexandria_ingest", {"book_id": HAMLET})
        assert not seeded.is_error, seeded.structured_content
    idle = [s for group in await asyncio.gather(*(ask(url, queries, n, None) for n in range(clients))) for s in group]

    batch_done = asyncio.Event()

    async def run_batch() -> dict:
        if batch is None:
            sync = await asyncio.create_subprocess_exec(
                str(Path(sys.executable).with_name("alexandria")), "sync", env=env,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
            out, _ = await sync.communicate()
            batch_done.set()
            return {"sync": out.decode().strip().splitlines()[-1], "exit": sync.returncode}
        async with Client(url) as client:
            result = await client.call_tool("alexandria_batch_ingest", {"book_ids": batch})
        batch_done.set()
        return {k: result.structured_content.get(k) for k in ("total", "succeeded", "skipped", "failed")}

    batch_task = asyncio.ensure_future(run_batch())
    await asyncio.sleep(2)  # the batch is reading and embedding its first book
    loaded = await asyncio.gather(*(ask(url, queries, n, batch_done) for n in range(clients)))
    during = [s for group in loaded for s in group if s[2]]
    batch_result = await batch_task
    return {
        "clients": clients,
        "queries_per_client": queries,
        "idle": summary(idle),
        "during_batch": summary(during),
        "all_under_load": summary([s for group in loaded for s in group]),
        "batch": batch_result,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=30)
    parser.add_argument("--queries", type=int, default=10)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--sync", action="store_true", help="load during `alexandria sync` of the whole library")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="alexandria-load-") as scratch:
        stack = start_stack(Path(scratch) / "var", CALIBRE_LIBRARY)
        try:
            figures = asyncio.run(measure(stack.mcp_url, stack.env, args.clients, args.queries,
                                          None if args.sync else args.batch))
        finally:
            stack.stop()
    print(f"{'':<16} {'queries':>8} {'errors':>7} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for name in ("idle", "during_batch", "all_under_load"):
        row = figures[name]
        print(f"{name:<16} {row['queries']:>8} {row['errors']:>7} {row['p50_ms']:>8} {row['p95_ms']:>8} "
              f"{row['max_ms']:>8}")
    print(f"batch: {figures['batch']}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
