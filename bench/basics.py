"""What every bench needs and nothing heavy: the checkout's root, its scratch folder and percentiles.

bench/common.py re-exports these beside what needs the whole project; a GPU node's check (bench/gpu.py)
imports only this module, so that the node needs the embedder's packages and no others.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
# Scratch folders a bench keeps between runs (ignored by git).
OUT = ROOT / "bench" / "out"


def percentile_ms(seconds: Sequence[float], q: float) -> float:
    """The `q`th percentile (0-100, interpolated between samples) of durations in seconds, in ms."""
    return float(np.percentile(np.asarray(seconds) * 1000, q))
