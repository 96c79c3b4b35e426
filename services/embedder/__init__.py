"""embedder

The embedder loads models offline, from folders on this machine (a model named by its hub id is fetched
before, by `alexandria models pull` or `alexandria up`: hub.py, which speaks HTTP itself). huggingface_hub
reads HF_HUB_OFFLINE once, when it is first imported, so it is set here, before any embedder module imports
it. Loading also passes `local_files_only`, in case something imported the hub earlier.

GOMP_SPINCOUNT is read once too, when torch loads its OpenMP runtime. By default the runtime's
threads spin for about 3 ms after each forward pass, waiting for more work: on a small machine
that is CPU taken from the services waiting for the vector (the store query right after it).
10,000 spins (~0.1 ms) still bridge the gaps between the operations of one pass. Measured on 2
cores, a search through the query service: p50 17.9 ms, p95 21 ms, against 20.3 ms and 33.6 ms
with the default.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("GOMP_SPINCOUNT", "10000")
