"""Real embedder servers, on the real small model, reached over real channels."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from alexandria.clients import EmbedderClient
from alexandria.settings import ClientSettings, EmbedderSettings
from embedder.support import RunningEmbedder, StartEmbedder
from services.embedder.loading import load_model
from services.embedder.model import EmbeddingModel
from services.embedder.model_folder import resolve_model_source
from services.embedder.server import create_server


@pytest.fixture(scope="session")
def embedding_model() -> EmbeddingModel:
    """The default model (all-MiniLM-L6-v2 from its package), loaded once for the whole session."""
    return load_model(resolve_model_source(None), "cpu", threads=0)


@pytest.fixture(scope="session")
def onnx_models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where this session's ONNX exports go (EMBEDDER_MODELS_DIR): each model is exported once a session."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def onnx_model(onnx_models_dir: Path) -> EmbeddingModel:
    """The default model on the onnx backend at fp32, loaded once for the whole session."""
    return load_model(resolve_model_source(None), "cpu", threads=0, backend="onnx", models_dir=onnx_models_dir)


@pytest.fixture
async def start_embedder(
    tmp_path_factory: pytest.TempPathFactory, embedding_model: EmbeddingModel
) -> AsyncIterator[StartEmbedder]:
    """Start embedder servers (unix socket unless `embedder_listen` is given) and a client for each;
    all are stopped at the end of the test."""
    running: list[RunningEmbedder] = []

    async def start(
        model: EmbeddingModel | None = embedding_model, stream_chunk: int = 512, **settings: Any
    ) -> RunningEmbedder:
        socket = tmp_path_factory.mktemp("emb") / "e.sock"
        settings.setdefault("embedder_listen", f"unix://{socket}")
        server = create_server(EmbedderSettings(**settings), model=model)
        await server.start()
        embedder = RunningEmbedder(
            server, EmbedderClient(server.address, ClientSettings(embed_stream_chunk=stream_chunk))
        )
        running.append(embedder)
        return embedder

    yield start
    for embedder in running:
        await embedder.client.close()
        await embedder.server.stop()


@pytest.fixture
async def embedder(start_embedder: StartEmbedder) -> RunningEmbedder:
    """One embedder server with default settings and the session's model."""
    return await start_embedder()
