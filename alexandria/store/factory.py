"""Pick the store backend from the settings: the one place that decides."""

from __future__ import annotations

from alexandria.errors import FailedPrecondition
from alexandria.settings import StoreSettings
from alexandria.store.model import CollectionLayout, Store


def open_store(settings: StoreSettings) -> Store:
    """A Qdrant server (or qdrant-client's local mode) when one is configured, else the embedded engine."""
    # Imported here: qdrant_client alone takes about a second to import, and the embedded
    # default never needs it.
    if settings.backend == "server":
        from alexandria.store.server import ServerStore

        return ServerStore.connect(settings)
    if server_only := settings.server_only_settings:
        raise FailedPrecondition(
            f"{', '.join(server_only)} shape a Qdrant server's collections, but no server is configured: the "
            "embedded store keeps each collection in one shard of this process, with a write-ahead log of its "
            "own. Set QDRANT_URL (or QDRANT_HOST) to use a server or cluster, or unset them."
        )
    from alexandria.store.embedded import EmbeddedStore

    return EmbeddedStore.open(settings.embedded_path, settings.search_threads, CollectionLayout.of(settings))
