"""Fakes for the ingest service's unit tests: a catalog client answering from messages the test sets, and an
embedder client giving every text the same unit vector for the same words."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from google.protobuf.message import Message
from query.fakes import DIMENSION, MODEL

from alexandria.clients import WINDOW_OVERLAP_TOKENS, EmbeddedTexts
from alexandria.errors import NotFound
from alexandria.settings import ClientSettings
from alexandria.v1 import catalog_pb2, embedder_pb2


@dataclass
class FakeCatalogClient:
    """The catalog's client: each method answers the message set for it (ResolveBookFile and GetBook by book id),
    and every call is recorded."""

    library: catalog_pb2.ListLibraryFilesResponse = field(default_factory=catalog_pb2.ListLibraryFilesResponse)
    resolved: dict[int, catalog_pb2.ResolveBookFileResponse] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    settings: ClientSettings = field(default_factory=ClientSettings)

    async def call(self, method: str, request: Message, timeout: float | None = None,
                   wait_for_ready: bool = False) -> Message:
        self.calls.append(method)
        if method == "ListLibraryFiles":
            return self.library
        if method == "ResolveBookFile":
            assert isinstance(request, catalog_pb2.ResolveBookFileRequest)
            if request.book_id not in self.resolved:
                raise NotFound(f"No book with id {request.book_id} in the Calibre library.")
            return self.resolved[request.book_id]
        if method == "GetBook":
            assert isinstance(request, catalog_pb2.GetBookRequest)
            if request.book_id not in self.resolved:
                raise NotFound(f"No book with id {request.book_id} in the Calibre library.")
            return catalog_pb2.GetBookResponse(book=self.resolved[request.book_id].book)
        raise AssertionError(f"the fake catalog does not answer {method}")

    async def close(self) -> None:
        pass


class FakeEmbedderClient:
    """The embedder's client: a text's vector is seeded by its words, so equal texts get equal vectors; its
    model is named `model_name`."""

    def __init__(self, model_name: str = MODEL) -> None:
        self.model_name = model_name

    async def model_info(self, wait_for_ready: bool = False) -> embedder_pb2.ModelInfo:
        return embedder_pb2.ModelInfo(name=self.model_name, dimension=DIMENSION, device="cpu", similarity_floor=0.0)

    async def wait_until_ready(self) -> embedder_pb2.ModelInfo:
        return await self.model_info()

    async def embed_many(self, texts: Sequence[str], kind: int = embedder_pb2.EMBED_KIND_PASSAGE) -> EmbeddedTexts:
        rows = [np.random.default_rng(zlib.crc32(text.encode())).normal(size=DIMENSION) for text in texts]
        vectors = np.asarray(rows, dtype=np.float32).reshape(len(texts), DIMENSION)
        return EmbeddedTexts(vectors / np.linalg.norm(vectors, axis=1, keepdims=True), 0)

    async def embed_windows(
        self, passages: Sequence[tuple[str, str]], overlap_tokens: int = WINDOW_OVERLAP_TOKENS,
        on_embedded: Callable[[int], None] | None = None,
    ) -> list[np.ndarray]:
        """One window a passage: its header and text."""
        vectors = (await self.embed_many([header + text for header, text in passages])).vectors
        if on_embedded is not None:
            on_embedded(len(passages))
        return [vectors[n : n + 1] for n in range(len(passages))]

    async def close(self) -> None:
        pass
