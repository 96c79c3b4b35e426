"""What each QDRANT_QUANTIZATION keeps of a search's dense candidates, on a collection's own vectors.

    .venv/bin/python bench/store_layout.py [--store bench/out/retrieval/store] [--collection retrieval_bench]
                                           [--queries 200] [--scratch bench/out/store-layout]

Reads the dense vectors of an embedded collection that bench/retrieval.py made (real passages, its model's),
writes them into a scratch collection under each layout, and indexes it: the engine's indexing threshold is
lowered so that these few thousand points are indexed and quantised as a library's segments are. Then it
searches each with window vectors of the same passages as queries and counts how many of the exact cosine
top 10 and top 50 (the first stage's candidates) come back: 1.0 is what the originals alone find. Also the
bytes each collection takes on disk. The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np

from alexandria.settings import StoreSettings
from alexandria.store import StoredPoint, lexical
from alexandria.store.embedded import EmbeddedStore, tuning
from alexandria.store.model import CollectionLayout

LAYOUTS = (("none", 2.0), ("int8", 1.0), ("int8", 2.0), ("binary", 2.0), ("binary", 4.0))
DEPTHS = (10, 50)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=ROOT / "bench" / "out" / "retrieval" / "store")
    parser.add_argument("--collection", default="retrieval_bench")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--scratch", type=Path, default=ROOT / "bench" / "out" / "store-layout")
    args = parser.parse_args()

    segment_kb = StoreSettings().embedded_max_segment_kb
    source = EmbeddedStore.open(args.store, 2, CollectionLayout(), segment_kb)
    try:
        records = source.scroll(args.collection, None, limit=10_000_000, with_vectors=True)
    finally:
        source.close()
    ids = [r.id for r in records]
    dense = np.array([r.dense for r in records])
    windows = np.concatenate([r.windows for r in records if r.windows is not None])
    queries = windows[np.random.default_rng(0).choice(len(windows), args.queries, replace=False)]
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    exact = {depth: [{ids[i] for i in np.argsort(-(dense @ q))[:depth]} for q in queries] for depth in DEPTHS}

    tuning.INDEXING_THRESHOLD_KB = 1
    shutil.rmtree(args.scratch, ignore_errors=True)
    rows = []
    print(f"{len(ids)} points of {args.collection}, {args.queries} window vectors as queries")
    print(f"{'quantization':<13}{'oversampling':>13}{'recall@10':>11}{'recall@50':>11}{'disk MB':>9}")
    for quantization, oversampling in LAYOUTS:
        layout = CollectionLayout(quantization=quantization, oversampling=oversampling)  # type: ignore[arg-type]
        store = EmbeddedStore.open(args.scratch / f"{quantization}-{oversampling:g}", 2, layout, segment_kb)
        try:
            store.ensure_collection("layout", dense.shape[1], {"model": "bench", "dimension": dense.shape[1]})
            points = [StoredPoint(i, v, lexical.encode_document(""), {}) for i, v in zip(ids, dense, strict=True)]
            for start in range(0, len(points), 500):
                store.upsert("layout", points[start : start + 500])
            store.optimize("layout")
            recall = {
                depth: float(np.mean([
                    len({h.id for h in store.query_dense("layout", q, None, depth)} & truth) / depth
                    for q, truth in zip(queries, exact[depth], strict=True)
                ]))
                for depth in DEPTHS
            }
            disk = store.collection_storage("layout").disk_bytes or 0
        finally:
            store.close()
        rows.append({"quantization": quantization, "oversampling": oversampling,
                     **{f"recall_at_{d}": round(r, 3) for d, r in recall.items()}, "disk_bytes": disk})
        print(f"{quantization:<13}{oversampling:>13g}{recall[10]:>11.3f}{recall[50]:>11.3f}{disk / 1e6:>9.1f}")
    print(json.dumps({"points": len(ids), "queries": args.queries, "layouts": rows}))


if __name__ == "__main__":
    main()
