"""`alexandria models pull|list`, and what `alexandria up` fetches before it starts an embedder whose model is
named by its hub id but not installed yet (services/embedder/hub.py does the fetching)."""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from pathlib import Path

from alexandria.errors import FailedPrecondition
from alexandria.progress import progress_bar
from alexandria.settings import EmbedderSettings, StoreSettings
from services.embedder.hub import MANIFEST, OFFLINE, Manifest, hub_folder, pull, pull_command
from services.embedder.loading import resolve_device
from services.embedder.model_folder import read_facts
from services.embedder.profiles import is_fetched, recorded_base_name, resolve_profile

REDRAW_S = 0.5


class ProgressLine:
    """A fetch's progress on one line of stderr, redrawn at most every REDRAW_S."""

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id
        self.started = time.monotonic()
        self.drawn = 0.0

    def __call__(self, done: int, total: int, name: str) -> None:
        now = time.monotonic()
        if now - self.drawn < REDRAW_S and done < total:
            return
        self.drawn = now
        rate = done / max(now - self.started, 1e-6)
        print(f"\r{self.model_id} {progress_bar(done / total if total else 1.0)} {done / 2**20:,.1f} of "
              f"{total / 2**20:,.1f} MiB, {rate / 2**20:,.1f} MiB/s  {name[-40:]:<40}", end="", file=sys.stderr,
              flush=True)

    def finish(self) -> None:
        """End the progress line, if one was drawn."""
        if self.drawn:
            print(file=sys.stderr)


def cmd_pull(model_id: str, revision: str | None) -> int:
    settings = EmbedderSettings()
    line = ProgressLine(model_id)
    try:
        folder, fetched = pull(model_id, settings.embedder_models_dir, settings.hub, revision or "main", line)
    finally:
        line.finish()
    manifest = Manifest.read(folder)
    assert manifest is not None  # pull wrote it
    said = "fetched" if fetched else "already installed and intact"
    print(f"{model_id} {said}: revision {manifest.revision} ({manifest.requested}), {len(manifest.files)} files, "
          f"{manifest.size / 2**20:,.1f} MiB in {folder}")
    return 0


def fetch_missing(settings: EmbedderSettings) -> int:
    """Fetch the models the embedder's profile (or EMBEDDER_MODEL, EMBEDDER_RERANKER_MODEL) names by hub id and
    that are not installed, when fetching is allowed; otherwise refuse, naming the command that does it."""
    choice = resolve_profile(settings, resolve_device(settings.embedder_device))
    for model_id in choice.hub_models:
        if is_fetched(model_id, settings.embedder_models_dir):
            print(f"{model_id} is installed in {settings.embedder_models_dir}", file=sys.stderr)
            continue
        if settings.hub.alexandria_offline:
            raise FailedPrecondition(OFFLINE.format(model=model_id, command=pull_command(model_id),
                                                    folder=hub_folder(settings.embedder_models_dir, model_id)))
        print(f"{model_id} is not installed yet: fetching it once into {settings.embedder_models_dir}",
              file=sys.stderr)
        cmd_pull(model_id, None)
    return 0


def embedded_collection_models(store: StoreSettings) -> dict[str, str]:
    """Collection -> the name of the model that made it, for the embedded store's collections, read from their
    metadata files (the store itself may be open in a running stack); empty for a server."""
    found: dict[str, str] = {}
    if store.backend != "embedded":
        return found
    root = Path(store.embedded_path)
    try:  # a rebuilt collection answers under the name of the one it replaced (store/embedded.py)
        named = {target: name for name, target in json.loads((root / "aliases.json").read_text()).items()}
    except (OSError, ValueError, AttributeError):
        named = {}
    for sidecar in sorted(root.glob("*.json")):
        try:
            model = json.loads(sidecar.read_text())["metadata"]["model"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(model, str):
            found[named.get(sidecar.stem, sidecar.stem)] = model
    return found


def collections_by_model(store: StoreSettings) -> dict[str, list[str]]:
    """Model name -> the collections of the embedded store made with it; a server's are listed by `alexandria
    status`."""
    found: dict[str, list[str]] = defaultdict(list)
    for collection, model in embedded_collection_models(store).items():
        found[recorded_base_name(model)].append(collection)
    return found


def recorded_model(store: StoreSettings) -> str | None:
    """The model that made QDRANT_COLLECTION, as it records it; None when the collection does not exist yet."""
    if store.backend == "embedded":
        return embedded_collection_models(store).get(store.qdrant_collection)
    from alexandria.store import open_store
    from alexandria.store.records import CollectionModel

    server = open_store(store)
    try:
        info = server.collection_info(store.qdrant_collection)
    finally:
        server.close()
    return None if info is None else CollectionModel.of(info).name


def cmd_list() -> int:
    settings = EmbedderSettings()
    models_dir = settings.embedder_models_dir
    used = collections_by_model(StoreSettings())
    rows = []
    for folder in sorted(p for p in models_dir.glob("*") if (p / MANIFEST).is_file()):
        manifest = Manifest.read(folder)
        assert manifest is not None
        facts = read_facts(folder)
        rows.append((manifest.model_id, facts.kind, f"{manifest.size / 2**20:,.0f} MiB", manifest.revision[:12],
                     str(facts.dimensions or "-"), str(facts.max_tokens or "-"),
                     ", ".join(used.get(manifest.model_id, [])) or "-"))
    if not rows:
        print(f"No model fetched by name in {models_dir} yet: `alexandria models pull BAAI/bge-m3` fetches one.")
        return 0
    header = ("model", "kind", "size", "revision", "dims", "max tokens", "collections")
    widths = [max(len(row[n]) for row in [header, *rows]) for n in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0
