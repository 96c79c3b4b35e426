"""The optional cross-encoder: reads a question and a passage together and scores how well the
passage answers it, which ranks a search's candidates better than comparing two vectors can.

It lives in the embedder so that it runs, and scales, on the GPU nodes with the rest of the model
work. `EMBEDDER_RERANKER_MODEL` names a cross-encoder by its hub id (fetched once), its folder or a package
with `get_model_path()`, loaded offline like the embedding model; unset, there is no reranker (unless the
profile has one) and the query service ranks candidates by itself. Whatever range the model's own scores
have (logits, as most rerankers publish, or probabilities), a sigmoid of its logit maps them to [0, 1].
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from sentence_transformers import CrossEncoder

from services.embedder.loading import load_checked_folder
from services.embedder.model_folder import ModelSource

log = logging.getLogger(__name__)

# Pairs per forward pass: a search reranks a few dozen candidates at once.
RERANK_BATCH = 32


class Reranker:
    """A loaded cross-encoder. Its passes run one at a time on a thread of its own: torch keeps an
    OpenMP pool per thread that runs it, and pools left in other threads slow the embedder's passes."""

    def __init__(self, cross_encoder: CrossEncoder, name: str) -> None:
        self.cross_encoder = cross_encoder
        self.name = name
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reranker")

    async def rerank(self, query: str, passages: Sequence[str]) -> np.ndarray:
        return await asyncio.get_running_loop().run_in_executor(self._thread, self.score, query, passages)

    async def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)

    @torch.inference_mode()
    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """Each passage's relevance to `query` in [0, 1] (a single-label model's logit through a sigmoid)."""
        if not passages:
            return np.zeros(0, np.float32)
        scores = self.cross_encoder.predict(
            [(query, passage) for passage in passages],
            batch_size=RERANK_BATCH,
            activation_fn=torch.nn.Sigmoid(),
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(scores, dtype=np.float32).reshape(len(passages))


def load_reranker(source: ModelSource, device: str) -> Reranker:
    """Load the cross-encoder at `source` onto `device` (fp16 on CUDA), offline, once its files say it is one
    that fits there."""
    cross_encoder = load_checked_folder(
        CrossEncoder, source, device, "reranker", "EMBEDDER_RERANKER_MODEL", "reranker model"
    )
    if device == "cuda":
        cross_encoder.half()
    cross_encoder.eval()
    log.info("loaded reranker %s from %s on %s", source.name, source.path, device)
    return Reranker(cross_encoder, source.name)
