"""A scale run's stacks: the sync that makes the source books and the embedder's memory after it, and the
figures through `alexandria up` on the bench collection (RSS, latency, many clients), in a memory cgroup
when asked."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from mcp import Client

from alexandria.clients import EmbedderClient
from alexandria.settings import ClientSettings
from alexandria_stack.layout import StackLayout
from bench.common import Latency, call_tool, corpus_stack, in_turn, query_tool, rss_mb
from bench.scale.collection import GB
from services.embedder.memory import IDLE_BEFORE_RELEASE_S
from tests.e2e.stack import RunningStack

WARM_UP_QUERIES = 20
RSS_SAMPLE_S = 0.02
CGROUP_MEMORY = Path("/sys/fs/cgroup/memory")
log = logging.getLogger("bench.scale")


@dataclass(frozen=True)
class EmbedderMemory:
    """The embedder process after the sync: resident, peak, anonymous (heap) and file-backed (libraries,
    mapped weights) memory in MB, and its threads."""

    rss_mb: float
    peak_mb: float
    anonymous_mb: float
    file_mb: float
    threads: int
    sync_s: float

    @classmethod
    def of(cls, pid: int, sync_s: float) -> EmbedderMemory:
        rollup = {}
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
            name, value, *_ = line.split()
            rollup[name.rstrip(":")] = int(value) / 1024
        threads = len(list(Path(f"/proc/{pid}/task").iterdir()))
        return cls(rss_mb(pid), rss_mb(pid, "VmHWM"), rollup["Anonymous"], rollup["Rss"] - rollup["Anonymous"],
                   threads, sync_s)


@contextmanager
def memory_group(limit_gb: float | None) -> Iterator[Path | None]:
    """A memory cgroup (v1) of `limit_gb`, page cache included, as a container's memory limit (None when no
    limit is asked). The processes this one starts while it is in the group (join) stay in it: a process
    moved in later would bring none of its pages along (this kernel moves no charges)."""
    if limit_gb is None:
        yield None
        return
    if not (CGROUP_MEMORY / "cgroup.procs").is_file():
        raise SystemExit(f"--memory-gb needs a cgroup v1 memory controller at {CGROUP_MEMORY}; run without it")
    group = CGROUP_MEMORY / f"alexandria-bench-{os.getpid()}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(int(limit_gb * GB)))
        yield group
        log.info("memory cgroup of %g GB: peak %.2f GB, limit reached %s times", limit_gb,
                 int((group / "memory.max_usage_in_bytes").read_text()) / GB,
                 (group / "memory.failcnt").read_text().strip())
    finally:
        join(CGROUP_MEMORY)
        group.rmdir()


def join(group: Path) -> None:
    """Move this process into the memory cgroup `group`."""
    (group / "cgroup.procs").write_text(str(os.getpid()))


@contextmanager
def stack_on(scratch: Path, corpus: Path, collection: str | None = None,
             memory_limit_gb: float | None = None) -> Iterator[tuple[RunningStack, float]]:
    """`alexandria up` on the scratch store (serving `collection` when given), with its start-up seconds; every
    process of it held to `memory_limit_gb` together when given."""
    with memory_group(memory_limit_gb) as group:
        if group:
            join(group)
        started = time.perf_counter()
        stack = corpus_stack(scratch, corpus, {"QDRANT_COLLECTION": collection} if collection else None)
        start_s = time.perf_counter() - started
        if group:
            join(CGROUP_MEMORY)  # the bench's own memory is not the stack's
        try:
            yield stack, start_s
        finally:
            stack.stop()


def embedder_pid(stack: RunningStack) -> int:
    return next(pid for pid, command in stack.children().items() if command.endswith("services embedder"))


async def embed_questions(scratch: Path, questions: list[str]) -> np.ndarray:
    embedder = EmbedderClient(StackLayout(scratch).socket("embedder"), ClientSettings())
    try:
        return np.stack([await embedder.embed_query(question) for question in questions])
    finally:
        await embedder.close()


def sync_source(scratch: Path, corpus: Path, questions: list[str]) -> EmbedderMemory:
    """The shared library synced into the scratch store by a stack; the embedder's memory after; the
    questions' vectors saved beside the store."""
    with stack_on(scratch, corpus) as (stack, _):
        started = time.perf_counter()
        done = stack.cli("sync")
        if done.returncode != 0:
            raise SystemExit(f"alexandria sync failed:\n{done.stdout}\n{done.stderr}")
        sync_s = time.perf_counter() - started
        # Read at idle: once the embedder's bulk lane has given back what its batches freed.
        time.sleep(2 * IDLE_BEFORE_RELEASE_S)
        memory = EmbedderMemory.of(embedder_pid(stack), sync_s)
        log.info("synced the shared library in %.0f s: %s", memory.sync_s, done.stdout.strip().splitlines()[-1])
        np.save(scratch / "questions.npy", asyncio.run(embed_questions(scratch, questions)))
    return memory


class RssPeak:
    """The highest RSS of a process, and of its anonymous part, sampled while the `sampling` block runs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_mb = self.anon_peak_mb = 0.0

    def _read(self) -> None:
        self.peak_mb = max(self.peak_mb, rss_mb(self.pid))
        self.anon_peak_mb = max(self.anon_peak_mb, rss_mb(self.pid, "RssAnon"))

    async def _sample(self) -> None:
        while True:
            self._read()
            await asyncio.sleep(RSS_SAMPLE_S)

    @contextmanager
    def sampling(self) -> Iterator[None]:
        task = asyncio.get_running_loop().create_task(self._sample())
        try:
            yield
        finally:
            task.cancel()
            self._read()


async def concurrent_queries(url: str, questions: list[str], clients: int) -> Latency:
    """`clients` MCP clients, each on its own connection, asking their share of `questions` at once."""
    async def one_client(share: list[str]) -> list[float]:
        seconds = []
        async with Client(url) as client:
            for question in share:
                started = time.perf_counter()
                await call_tool(client, "alexandria_query", {"query": question})
                seconds.append(time.perf_counter() - started)
        return seconds

    shares = await asyncio.gather(*(one_client(questions[i::clients]) for i in range(clients)))
    return Latency.of([s for share in shares for s in share])


@dataclass(frozen=True)
class StackFigures:
    start_s: float
    rss_start_mb: float
    rss_idle_mb: float
    rss_load_mb: float
    anon_idle_mb: float
    anon_load_mb: float
    precise: Latency
    contextual: Latency
    under_load: Latency


async def through_stack(stack: RunningStack, start_s: float, questions: list[str], loaded: list[str],
                        clients: int) -> StackFigures:
    services = stack.services_pid()
    rss_start = rss_mb(services)
    async with Client(stack.mcp_url) as client:
        precise = query_tool(client, "precise")
        for question in questions[:WARM_UP_QUERIES]:
            await precise(question)
        measured = questions[WARM_UP_QUERIES:]
        modes = await in_turn({"precise": precise, "contextual": query_tool(client, "contextual")}, measured)
    rss_idle, anon_idle = rss_mb(services), rss_mb(services, "RssAnon")
    peak = RssPeak(services)
    with peak.sampling():
        under_load = await concurrent_queries(stack.mcp_url, loaded, clients)
    return StackFigures(start_s, rss_start, rss_idle, peak.peak_mb, anon_idle, peak.anon_peak_mb, modes["precise"],
                        modes["contextual"], under_load)
