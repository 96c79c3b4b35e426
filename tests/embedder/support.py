"""What the embedder's integration tests share besides fixtures: a running server's handle and a
spy around the real model."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from alexandria.clients import EmbedderClient
from alexandria.grpc_server import ServiceServer
from services.embedder.batcher import EncodedBatch
from services.embedder.model import EmbeddingModel


@dataclass
class RunningEmbedder:
    server: ServiceServer
    client: EmbedderClient


StartEmbedder = Callable[..., Awaitable[RunningEmbedder]]


class SpyModel:
    """The real model, recording the batches it encodes; after `hold()`, batches wait for `release()`."""

    def __init__(self, model: EmbeddingModel) -> None:
        self._model = model
        self.batches: list[list[str]] = []
        self._entered = threading.Semaphore(0)
        self._gate: threading.Event | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def encode(self, texts: list[str]) -> EncodedBatch:
        self.batches.append(texts)
        self._entered.release()
        if self._gate is not None:
            self._gate.wait()
        return self._model.encode(texts)

    def hold(self) -> None:
        self._entered = threading.Semaphore(0)
        self._gate = threading.Event()

    def release(self) -> None:
        assert self._gate is not None
        self._gate.set()

    async def wait_until_busy(self) -> None:
        """Until a batch has entered the model since `hold()`."""
        await asyncio.to_thread(self._entered.acquire)
