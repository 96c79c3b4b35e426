"""What the embedder's integration tests share besides fixtures: a running server's handle and a
spy around the real model."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from alexandria.clients import EmbedderClient
from alexandria.grpc_server import ServiceServer
from services.embedder.batcher import EncodedBatch
from services.embedder.model import EmbeddingModel, EmbedKind
from services.host import main


@dataclass
class RunningEmbedder:
    server: ServiceServer
    client: EmbedderClient


StartEmbedder = Callable[..., Awaitable[RunningEmbedder]]


class SpyModel:
    """The real model, recording the batches it encodes; after `hold()`, batches (those `which` picks,
    or all) wait for `release()`."""

    def __init__(self, model: EmbeddingModel) -> None:
        self._model = model
        self.batches: list[list[str]] = []
        self._entered = threading.Semaphore(0)
        self._gate: threading.Event | None = None
        self._which: Callable[[list[str]], bool] = lambda texts: True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def encoder_for(self, kind: EmbedKind) -> Callable[[list[str]], EncodedBatch]:
        return self.encode

    def encode(self, texts: list[str]) -> EncodedBatch:
        self.batches.append(texts)
        if self._gate is not None and self._which(texts):
            self._entered.release()
            self._gate.wait()
        return self._model.encode(texts)

    def hold(self, which: Callable[[list[str]], bool] = lambda texts: True) -> None:
        self._entered = threading.Semaphore(0)
        self._gate = threading.Event()
        self._which = which

    def release(self) -> None:
        assert self._gate is not None
        self._gate.set()

    async def wait_until_busy(self) -> None:
        """Until a held batch has entered the model since `hold()`."""
        await asyncio.to_thread(self._entered.acquire)


def embedder_refusal_at_start(capsys: pytest.CaptureFixture[str]) -> pytest.CaptureResult[str]:
    """What the embedder service, started as the launcher starts it (`python -m services embedder`, with the settings in
    the environment), writes as it refuses to start with exit status 2. main configures process-wide
    logging: it is put back as it was."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        with pytest.raises(SystemExit) as exit_:
            main(["embedder", "--listen", "embedder=127.0.0.1:0"])
    finally:
        root.handlers[:], root.level = handlers, level
    assert exit_.value.code == 2
    return capsys.readouterr()
