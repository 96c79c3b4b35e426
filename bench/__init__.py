"""Alexandria's benchmarks: scripts that print a table and end with one JSON line (bench/README.md lists them).

Each runs from the repository root as `.venv/bin/python -m bench.NAME`; what two of them share is in
bench/common.py.
"""

import os

# The benches read models prepared beforehand (`make models`), never the hub. huggingface_hub reads this once,
# when it is first imported, so it is set here, before any bench module imports it.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
