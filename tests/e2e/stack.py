"""A real Alexandria stack for end-to-end tests: `alexandria up` as a subprocess.

Real service processes, real gRPC over unix sockets, the real embedded store in a
temporary data directory, the real small model, the MCP gateway on HTTP.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from alexandria.settings import StoreSettings
from alexandria.store import open_store
from alexandria.store import schema as f

START_TIMEOUT_S = 240
# Calibre ids of the shared library's books the end-to-end tests ingest.
MACBETH = 6
HAMLET = 5
GUIDES = (7, 8)


@dataclass(frozen=True)
class StoredPoints:
    """What a collection holds, complete books or not: every point, and the books and book versions they
    belong to (a book written twice shows as two versions of it)."""

    points: int
    books: int
    versions: int


@dataclass
class RunningStack:
    process: subprocess.Popen
    data_dir: Path
    url: str
    env: dict[str, str]
    output: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)  # stderr lines: the launcher's and its children's logs

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"

    def children(self) -> dict[int, str]:
        """The launcher's child processes: pid -> command line."""
        found = {}
        # Threads and children come and go while we read (a restart is what some tests watch), so an
        # entry that vanished between the listing and the read is simply not there any more.
        for task in Path(f"/proc/{self.process.pid}/task").iterdir():
            try:
                pids = (task / "children").read_text().split()
            except FileNotFoundError:
                continue
            for pid in pids:
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                except FileNotFoundError:
                    continue
                found[int(pid)] = " ".join(a.decode() for a in argv if a)
        return found

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        """`alexandria ARGS...` run against this stack, as a user runs it in a terminal."""
        return subprocess.run([str(Path(sys.executable).with_name("alexandria")), *args], env=self.env,
                              capture_output=True, text=True, timeout=600, check=False)

    def services_pid(self) -> int:
        """The process that runs the ingest service (with catalog and query on the embedded default)."""
        return next(pid for pid, command in self.children().items() if "ingest" in command)

    async def until_healthy(self, timeout: float = 120) -> None:
        """Wait until the gateway's /health says every service serves (after a restart, say)."""
        async with httpx.AsyncClient() as http:
            for _ in range(int(timeout / 0.25)):
                if (await http.get(f"{self.url}/health", timeout=5)).status_code == 200:
                    return
                await asyncio.sleep(0.25)
        raise AssertionError(f"the stack was not healthy again within {timeout} s")

    def stored_points(self, collection: str = "alexandria") -> StoredPoints:
        """Every point of the collection, read from the embedded store itself once the stack has stopped (the
        stack holds the store while it runs): what searches and stats, which show complete books only, hide."""
        assert self.process.poll() is not None, "the stack holds its store until it stops"
        store = open_store(StoreSettings(alexandria_data_dir=self.data_dir, qdrant_url=None,
                                         qdrant_local_path=None))
        try:
            if store.collection_info(collection) is None:
                return StoredPoints(0, 0, 0)
            records = store.scroll(collection, None, limit=store.count(collection) + 1)
        finally:
            store.close()
        versions = {(record.payload[f.BOOK_KEY], record.payload[f.VERSION]) for record in records}
        return StoredPoints(len(records), len({key for key, _ in versions}), len(versions))

    def stop(self, sig: int = signal.SIGINT, timeout: float = 60) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout)


def start_stack(data_dir: Path, library: Path, inbox: Path | None = None, extra_env: dict | None = None,
                dispositions: dict[signal.Signals, signal.Handlers] | None = None) -> RunningStack:
    """Start `alexandria up --port 0` and return once it announces the gateway URL. The automatic sync is off
    unless `extra_env` turns it on: a test decides what its collection holds. `dispositions`: what it inherits for
    these signals, whatever the tests inherited (`nohup alexandria up &` starts it with SIGHUP ignored, and
    SIGINT too from a shell without job control; a terminal with both as they come)."""
    env = {
        **os.environ,
        "ALEXANDRIA_DATA_DIR": str(data_dir),
        "CALIBRE_LIBRARY_PATH": str(library),
        "HF_HUB_OFFLINE": "1",
        "ALEXANDRIA_LOG_LEVEL": "WARNING",
        "AUTO_SYNC": "false",
        **(extra_env or {}),
    }
    if inbox is not None:
        env["LOCAL_INGEST_PATH"] = str(inbox)
    env.pop("QDRANT_URL", None)
    alexandria = Path(sys.executable).with_name("alexandria")
    # Set here for the moment of the fork: a signal's disposition is inherited, and an ignored one kept across exec.
    inherited = {sig: signal.signal(sig, handler) for sig, handler in (dispositions or {}).items()}
    try:
        process = subprocess.Popen([str(alexandria), "up", "--port", "0"], env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
    finally:
        for sig, handler in inherited.items():
            signal.signal(sig, handler)
    announced = threading.Event()
    found: dict[str, str] = {}
    lines: list[str] = []
    log: list[str] = []

    def read_stderr() -> None:
        for line in process.stderr:
            log.append(line)
            sys.stderr.write(line)  # still shown with a failing test's output

    def read_stdout() -> None:
        for line in process.stdout:
            lines.append(line)
            match = re.search(r"MCP \(Streamable HTTP\):\s+(\S+)/mcp", line)
            if match:
                found["url"] = match.group(1)
                announced.set()
        announced.set()

    threading.Thread(target=read_stdout, daemon=True).start()
    threading.Thread(target=read_stderr, daemon=True).start()
    if not announced.wait(START_TIMEOUT_S) or "url" not in found:
        process.kill()
        raise RuntimeError(f"the stack did not come up; its output:\n{''.join(lines)}")
    return RunningStack(process, data_dir, found["url"], env, lines, log)
