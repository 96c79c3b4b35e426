"""Pick the store backend from the settings: the one place that decides."""

from __future__ import annotations

from alexandria.settings import StoreSettings
from alexandria.store.model import Store


def open_store(settings: StoreSettings) -> Store:
    """A Qdrant server (or qdrant-client's local mode) when one is configured, else the embedded engine."""
    # Imported here: qdrant_client alone takes about a second to import, and the embedded
    # default never needs it.
    if settings.backend == "server":
        from alexandria.store.server import ServerStore

        return ServerStore.connect(settings)
    from alexandria.store.embedded import EmbeddedStore

    return EmbeddedStore.open(settings.embedded_path, settings.search_threads)
