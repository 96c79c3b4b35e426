"""The embedding model: encoding one batch into L2-normalised float32 vectors with a count of the inputs
that were cut to the model's maximum sequence length, what a forward pass costs, and what it gives
score_scale's probe. Where a model comes from and how it is loaded is loading.py."""

from __future__ import annotations

import enum
import logging
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
from sentence_transformers.util import batch_to_device
from transformers import PreTrainedModel

from alexandria.errors import FailedPrecondition
from services.embedder.batcher import EncodedBatch, Prepared
from services.embedder.score_scale import PROBE_PASSAGES, PROBE_QUESTIONS, ProbedSimilarity
from services.embedder.windows import TokenizedText, window_texts

log = logging.getLogger(__name__)


# One tokenizer pass per batch: the overflow rows it adds show which inputs were longer than the
# model's maximum sequence length, so truncation is counted without tokenizing twice.
_COUNT_OVERFLOW = {"text": {"return_overflowing_tokens": True, "stride": 0}}
_OVERFLOW_KEY = "overflow_to_sample_mapping"

# Short, empty and over-long inputs, so the first real request takes no path for the first time.
WARM_UP_TEXTS = [
    "",
    "A short warm-up sentence.",
    "A long warm-up passage that fills the model's window. " * 64,
]

def probe_similarity(model: EmbeddingModel) -> ProbedSimilarity:
    """What the model gives score_scale's probe: each PROBE_QUESTIONS against each PROBE_PASSAGES."""
    questions, passages = (
        model.encoder_for(kind)(model.with_prefix(texts, kind)).vectors
        for kind, texts in ((EmbedKind.QUERY, PROBE_QUESTIONS), (EmbedKind.PASSAGE, PROBE_PASSAGES))
    )
    return ProbedSimilarity.of(questions @ passages.T)


# Forward passes timed to learn what a pass costs beyond its tokens: (rows, tokens per row).
CALIBRATION_SHORT = (1, 16)
CALIBRATION_LONG = (8, 128)
CALIBRATION_REPEATS = 3
# The most a pass may be taken to cost beyond its tokens: on a GPU the long calibration pass
# barely costs more than the short one, which would otherwise read as "never split a batch",
# however long its longest rows.
MAX_PASS_OVERHEAD_TOKENS = 1024.0


@dataclass(frozen=True)
class PassCost:
    """What one forward pass costs: a fixed part (weights streamed through memory on a CPU, kernel
    launches on a GPU) plus a part per token it runs."""

    fixed_s: float
    per_token_s: float

    @property
    def overhead_tokens(self) -> float:
        """The fixed part, in tokens: what a pass costs beyond the tokens it runs."""
        if self.per_token_s <= 0:
            return MAX_PASS_OVERHEAD_TOKENS
        return min(self.fixed_s / self.per_token_s, MAX_PASS_OVERHEAD_TOKENS)


# Until `calibrate` measures it: about what a small model costs on a CPU.
UNCALIBRATED_PASS_COST = PassCost(fixed_s=0.008, per_token_s=0.00015)


# Texts of different lengths, so that the traced graph is checked on padded rows of a shape it
# was not traced with.
TRACE_EXAMPLE_TEXTS = ["A short sentence.", "A somewhat longer sentence, to pad the first one."]
TRACE_CHECK_TEXTS = ["Who?", "Where did she walk that morning, and why?", "Netherfield " * 40]


# What runs a model's transformer, when not its eager module: (input_ids, attention_mask) -> token
# embeddings. A traced TorchScript graph (below) or an ONNX Runtime session (onnx_backend.py).
TokenEmbeddings = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@runtime_checkable
class KeepsPassMemory(Protocol):
    """Token embeddings that keep memory between passes, for each thread count apart (OpenVINO's compiled
    models, onnx_backend.py), and can drop it."""

    def release(self, threads: int) -> None: ...


class TokenEmbeddingsModule(torch.nn.Module):
    """A transformer as a function of (input_ids, attention_mask) to its last hidden states: what is
    traced, or exported to ONNX."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        if isinstance(model, PreTrainedModel):
            # Tracing and the ONNX export read every attribute of the module (for @torch.jit.export methods), and
            # transformers' `loss_function` warns when read on a model it knows no loss for ("`loss_type=None` was
            # set in the config but it is unrecognized"), as on every encoder, at every start. Run for its
            # embeddings, it has no loss: said so, which is what that property returns from then on.
            model.loss_function = None
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden_states: torch.Tensor = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                                 return_dict=False)[0]
        return hidden_states


def trace_token_embeddings(sentence_transformer: SentenceTransformer) -> torch.jit.ScriptModule | None:
    """The model's transformer as one frozen TorchScript graph, when the model is a plain text
    Transformer -> Pooling [-> Normalize] pipeline on the CPU and the graph gives exactly what the
    transformer gives; else None (and the eager modules run).

    A forward pass of a small model on a CPU spends a fifth of its time in Python between the
    operations (6.7 against 8.2 ms for one query with all-MiniLM-L6-v2 on 2 cores); the graph runs
    them without Python, and without the GIL, which the query lane and the bulk workers share.
    torch.jit is deprecated in favour of torch.compile and torch.export, which need a C++ compiler
    at start-up; when torch drops it, tracing fails here and the eager path is used.
    """
    modules = list(sentence_transformer)
    if (
        sentence_transformer.device.type != "cpu"
        or not 2 <= len(modules) <= 3
        or not isinstance(modules[0], Transformer)
        or not isinstance(modules[1], Pooling)
        or not modules[1].include_prompt
        or not all(isinstance(m, Normalize) for m in modules[2:])
    ):
        return None
    token_embeddings = TokenEmbeddingsModule(modules[0].auto_model).eval()
    tokenize = partial(
        sentence_transformer.tokenizer, return_tensors="pt", padding=True, truncation=True,
        max_length=sentence_transformer.max_seq_length,
    )
    example, check = tokenize(TRACE_EXAMPLE_TEXTS), tokenize(TRACE_CHECK_TEXTS)
    try:
        with warnings.catch_warnings(), torch.inference_mode():
            warnings.simplefilter("ignore")  # the deprecation, and the tracer's notes on Python branches
            traced = torch.jit.freeze(
                torch.jit.trace(token_embeddings, (example["input_ids"], example["attention_mask"]))
            )
            exact = torch.equal(
                traced(check["input_ids"], check["attention_mask"]),
                token_embeddings(check["input_ids"], check["attention_mask"]),
            )
    except (RuntimeError, TypeError, ValueError, AttributeError) as exc:  # torch.jit's failures, or its absence
        log.info("the model's transformer did not trace (%s); running it eagerly", exc)
        return None
    if not exact:
        log.info("the model's traced transformer differs from the eager one; running it eagerly")
        return None
    graph: torch.jit.ScriptModule = traced
    return graph


@dataclass(frozen=True)
class Tokens:
    """One text as the model reads it: each model input's values for its tokens (special tokens included,
    cut to the model's maximum length, no padding), and whether it was cut."""

    features: dict[str, np.ndarray]  # input name -> (tokens,) int64
    truncated: bool

    @property
    def length(self) -> int:
        return len(self.features["attention_mask"])


# Texts a tokenizer call takes at most: a bulk request is tokenized in calls this size, each holding the
# tokenizer (shared by the lanes) for a few milliseconds on a CPU, so a query's turn comes soon.
TOKENIZE_CHUNK = 256


class EmbedKind(enum.Enum):
    """What a text is for: models trained with prefixes embed questions and passages differently."""

    QUERY = "query"
    PASSAGE = "passage"


@dataclass(frozen=True)
class Prefixes:
    """Text put before every query or passage, as the model was trained."""

    query: str = ""
    passage: str = ""


def neighbour_similarities(vectors: np.ndarray) -> np.ndarray:
    """Cosine similarity of each L2-normalised row to the next: len(vectors) - 1 values."""
    return np.einsum("ij,ij->i", vectors[:-1], vectors[1:]) if len(vectors) > 1 else np.empty(0, np.float32)


class EmbeddingModel:
    """A loaded sentence-transformers model; `encode` runs one batch, from any number of threads at once."""

    def __init__(
        self,
        sentence_transformer: SentenceTransformer,
        name: str,
        prefixes: Prefixes,
        token_embeddings: TokenEmbeddings | None = None,
        backend: str = "torch",
    ) -> None:
        self.sentence_transformer = sentence_transformer
        self._token_embeddings = token_embeddings
        self.backend = backend
        self.name = name
        self.prefixes = prefixes
        dimension = sentence_transformer.get_embedding_dimension()
        max_seq_length = sentence_transformer.max_seq_length
        if dimension is None or max_seq_length is None:
            raise FailedPrecondition(
                f"The model {name} does not declare its embedding dimension and maximum sequence length; "
                "use a sentence-transformers text embedding model."
            )
        self.dimension: int = dimension
        self.max_seq_length: int = max_seq_length
        self.device = str(sentence_transformer.device)
        self.dtype = str(sentence_transformer.dtype).removeprefix("torch.")
        self.cpu_threads = torch.get_num_threads()  # of the thread that loaded it (see threads.py)
        tokenizer = sentence_transformer.tokenizer
        self._pads_right = tokenizer.padding_side == "right"
        self._pad_values = {"input_ids": tokenizer.pad_token_id or 0,
                            "token_type_ids": getattr(tokenizer, "pad_token_type_id", 0), "attention_mask": 0}
        # What the tokenizer returns besides one row a text (a "modality" tag), passed on with every batch.
        self._extra_features: dict[str, Any] = {}
        # A fast tokenizer is one Rust object that a call may reconfigure (padding, truncation):
        # concurrent calls can fail with "Already borrowed".
        self._tokenizer_lock = threading.Lock()
        self.pass_cost = UNCALIBRATED_PASS_COST

    def with_prefix(self, texts: Sequence[str], kind: EmbedKind) -> list[str]:
        """The texts as the model expects them for `kind` (unchanged when it needs no prefix)."""
        prefix = self.prefixes.query if kind is EmbedKind.QUERY else self.prefixes.passage
        return [prefix + text for text in texts] if prefix else list(texts)

    def encoder_for(self, kind: EmbedKind) -> Callable[[list[str]], EncodedBatch]:
        """What encodes one batch of `kind` texts, once `with_prefix` has prepared them."""
        return self.encode

    def windows(self, header: str, text: str, overlap: int) -> list[str]:
        """The passage texts `text` is embedded from, each fitting this model with `header` before it and
        the passage prefix and special tokens counted (windows.py)."""
        tokenizer = self.sentence_transformer.tokenizer
        with self._tokenizer_lock:
            fixed = tokenizer.num_special_tokens_to_add() + len(tokenizer.tokenize(self.prefixes.passage + header))
            encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        words: dict[int, list[tuple[int, int]]] = {}
        for word, offsets in zip(encoding.word_ids(), encoding["offset_mapping"], strict=True):
            if word is not None:
                words.setdefault(word, []).append(offsets)
        budget = max(1, self.max_seq_length - fixed)
        spans: list[tuple[int, int]] = []
        tokens: list[int] = []
        for pieces in words.values():
            if len(pieces) > budget:
                # A run without spaces longer than a window (Japanese or Chinese under a SentencePiece tokenizer,
                # which reads a whole unspaced run as one word) is cut between its tokens, not truncated.
                spans.extend(pieces)
                tokens.extend([1] * len(pieces))
            else:
                spans.append((pieces[0][0], pieces[-1][1]))
                tokens.append(len(pieces))
        return window_texts(header, text, TokenizedText(spans, tokens), budget, overlap)

    def encode(self, texts: list[str]) -> EncodedBatch:
        """One batch: float32 unit vectors in input order, and which inputs were truncated (`tokenize`,
        then `encode_tokens`)."""
        return self.encode_tokens(list(self.tokenize(texts).items))

    def tokenize(self, texts: Sequence[str]) -> Prepared[Tokens]:
        """The texts as the model reads them, and their lengths in tokens, so that a lane tokenizes a
        request in a thread of its own while its workers run the passes of the one before. The fast
        tokenizer's batch call runs without the GIL; it is called on TOKENIZE_CHUNK texts at a time,
        each call padded only to its own longest text, and a query waits for the tokenizer (one object,
        behind a lock) at most one chunk of a bulk request."""
        items: list[Tokens] = []
        for start in range(0, len(texts), TOKENIZE_CHUNK):
            items += self._tokenize_chunk(texts[start : start + TOKENIZE_CHUNK])
        return Prepared(items, np.fromiter((text.length for text in items), dtype=np.int64, count=len(items)))

    def _tokenize_chunk(self, texts: Sequence[str]) -> list[Tokens]:
        with self._tokenizer_lock:
            features = self.sentence_transformer.preprocess(list(texts), processing_kwargs=_COUNT_OVERFLOW)
        sample_of_row = features.pop(_OVERFLOW_KEY).numpy()
        truncated = np.bincount(sample_of_row, minlength=len(texts)) > 1
        # Each input's first window is what truncation keeps; its overflow rows are dropped.
        first_rows = np.flatnonzero(np.diff(sample_of_row, prepend=-1))
        lengths = features["attention_mask"].numpy()[first_rows].sum(axis=1)
        rows = {key: value.numpy() for key, value in features.items()
                if isinstance(value, torch.Tensor) and value.shape[:1] == sample_of_row.shape}
        self._extra_features = {key: value for key, value in features.items() if key not in rows}
        width = features["attention_mask"].shape[1]
        items = []
        for row, length, cut in zip(first_rows, lengths, truncated, strict=True):
            columns = slice(0, length) if self._pads_right else slice(width - length, width)
            items.append(Tokens({key: values[row, columns] for key, values in rows.items()}, bool(cut)))
        return items

    @torch.inference_mode()
    def encode_tokens(self, texts: list[Tokens]) -> EncodedBatch:
        """One batch of tokenized texts: float32 unit vectors in input order, and which were truncated.

        Its rows run in the groups of similar token length that cost least (`length_groups`), each
        padded only to its own longest row: a merged batch of short queries and one long passage does
        not make every query pay for the passage's length, and a batch of short queries stays one pass.
        """
        lengths = np.fromiter((text.length for text in texts), dtype=np.int64, count=len(texts))
        longest_first = np.argsort(-lengths, kind="stable")
        vectors = np.empty((len(texts), self.dimension), np.float32)
        for group in length_groups(lengths[longest_first], self.pass_cost.overhead_tokens):
            members = longest_first[group]
            part = batch_to_device(self._padded([texts[i] for i in members]), self.sentence_transformer.device)
            embeddings = self._sentence_embeddings(part).float()
            vectors[members] = torch.nn.functional.normalize(embeddings, p=2, dim=1).cpu().numpy()
        return EncodedBatch(vectors=vectors, truncated=np.array([text.truncated for text in texts], dtype=bool))

    @torch.inference_mode()
    def calibrate(self) -> PassCost:
        """Measure what a forward pass costs (`PassCost`) from two timed passes, a short and a long one.

        On a CPU a pass streams every weight through memory whatever its size (a one-row pass of
        a small model costs as much as ~50 tokens); on a GPU it is mostly launch latency. Splitting a
        batch is worth it only when the padding it saves costs more than that, and waiting for
        more callers to share a pass only for as long as the pass's fixed part.
        """
        short, long = (self._time_pass(rows, tokens) for rows, tokens in (CALIBRATION_SHORT, CALIBRATION_LONG))
        short_tokens, long_tokens = (rows * tokens for rows, tokens in (CALIBRATION_SHORT, CALIBRATION_LONG))
        per_token = max(0.0, (long - short) / (long_tokens - short_tokens))
        self.pass_cost = PassCost(fixed_s=max(0.0, short - short_tokens * per_token), per_token_s=per_token)
        return self.pass_cost

    def _time_pass(self, rows: int, tokens: int) -> float:
        """Seconds of the fastest of a few forward passes over `rows` rows of `tokens` tokens."""
        ids = torch.full((rows, tokens), self.sentence_transformer.tokenizer.unk_token_id or 0)
        features = batch_to_device(
            {"input_ids": ids, "attention_mask": torch.ones_like(ids)}, self.sentence_transformer.device
        )
        seconds = []
        for _ in range(CALIBRATION_REPEATS):
            started = time.perf_counter()
            self._sentence_embeddings(dict(features)).cpu()
            seconds.append(time.perf_counter() - started)
        return min(seconds)

    def release_pass_memory(self, threads: int) -> None:
        """Drop what the passes run at `threads` threads keep between them, where the backend keeps any."""
        if isinstance(self._token_embeddings, KeepsPassMemory):
            self._token_embeddings.release(threads)

    @property
    def traced(self) -> bool:
        """Whether the transformer runs as a traced graph (`trace_token_embeddings`)."""
        return isinstance(self._token_embeddings, torch.jit.ScriptModule)

    def _sentence_embeddings(self, features: dict[str, Any]) -> torch.Tensor:
        if self._token_embeddings is None:
            embeddings: torch.Tensor = self.sentence_transformer(features)["sentence_embedding"]
            return embeddings
        features = {
            "attention_mask": features["attention_mask"],
            "token_embeddings": self._token_embeddings(features["input_ids"], features["attention_mask"]),
        }
        for module in list(self.sentence_transformer)[1:]:  # pooling, then normalisation if any
            features = module(features)
        pooled: torch.Tensor = features["sentence_embedding"]
        return pooled

    def _padded(self, texts: list[Tokens]) -> dict[str, Any]:
        """Tokenized texts as one batch, padded to its longest text as the tokenizer pads (its side,
        its pad values); at least one column: a tokenizer without special tokens gives an empty text
        no tokens."""
        width = max(1, max(text.length for text in texts))
        batch: dict[str, Any] = {}
        for key in texts[0].features:
            padded = np.full((len(texts), width), self._pad_values.get(key, 0), dtype=np.int64)
            for row, text in enumerate(texts):
                values = text.features[key]
                if self._pads_right:
                    padded[row, : len(values)] = values
                else:
                    padded[row, width - len(values) :] = values
            batch[key] = torch.from_numpy(padded)
        return {**batch, **self._extra_features}


def length_groups(lengths_longest_first: np.ndarray, pass_overhead_tokens: float) -> list[slice]:
    """Cut token lengths sorted longest first into the runs that are cheapest to encode, one forward
    pass each, where a pass costs `pass_overhead_tokens` plus its rows padded to its longest row."""
    lengths = np.asarray(lengths_longest_first, dtype=np.float64)
    count = len(lengths)
    cheapest = np.zeros(count + 1)  # cheapest[end]: the first `end` rows, cut at best
    cut = np.zeros(count + 1, dtype=np.int64)  # where the last run of that best cut starts
    for end in range(1, count + 1):
        starts = np.arange(end)
        costs = cheapest[:end] + pass_overhead_tokens + (end - starts) * lengths[:end]
        cut[end] = int(np.argmin(costs))
        cheapest[end] = costs[cut[end]]
    groups = []
    end = count
    while end > 0:
        groups.append(slice(int(cut[end]), end))
        end = int(cut[end])
    return groups[::-1]


