"""A Qdrant server's first swap of a collection made under the user's name (ServerStore.replace_collection): the name is
briefly no collection's, and a create of it in this process must wait for the alias rather than take the name."""

from __future__ import annotations

import threading
from typing import Any

from qdrant_client import QdrantClient

from alexandria.store import CollectionInfo, Filter
from alexandria.store import schema as f
from alexandria.store.server import ServerStore
from store.synthetic import COLLECTION, DIMENSION, METADATA, PASSAGES, stored_point

REBUILT = "library-rebuilt"
REBUILT_METADATA = {"model": "synthetic-8+int8", "dimension": DIMENSION}
# How long the create started amid the swap is given to finish there: without the wait it takes a few ms.
CREATE_WINDOW_S = 1.0


class CreateAmidSwapClient(QdrantClient):
    """Local mode that, once the collection of the user's name is deleted, has an ingest create it again from
    another thread (as a writer's ensure_collection does) and gives it CREATE_WINDOW_S to do so."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.store: ServerStore | None = None
        self.created: list[CollectionInfo] = []
        self.ingest: threading.Thread | None = None
        self.created_amid_swap = False

    def delete_collection(self, collection_name: str, *args: Any, **kwargs: Any) -> bool:
        deleted: bool = super().delete_collection(collection_name, *args, **kwargs)
        if collection_name == COLLECTION and self.ingest is None:
            assert self.store is not None
            store = self.store
            self.ingest = threading.Thread(
                target=lambda: self.created.append(store.ensure_collection(COLLECTION, DIMENSION, REBUILT_METADATA))
            )
            self.ingest.start()
            self.ingest.join(CREATE_WINDOW_S)
            self.created_amid_swap = not self.ingest.is_alive()
        return deleted


def test_a_create_during_the_first_swap_waits_for_the_alias_and_gets_the_replacement() -> None:
    client = CreateAmidSwapClient()
    store = ServerStore(client, "Qdrant in memory", builds_indexes=False)
    client.store = store
    try:
        store.ensure_collection(COLLECTION, DIMENSION, METADATA)
        store.upsert(COLLECTION, [stored_point(p) for p in PASSAGES])
        store.ensure_collection(REBUILT, DIMENSION, REBUILT_METADATA)
        store.upsert(REBUILT, [stored_point(p) for p in PASSAGES[:2]])
        store.set_payload(REBUILT, Filter(), {f.COMPLETE: True})

        store.replace_collection(COLLECTION, REBUILT)
        assert client.ingest is not None
        client.ingest.join()

        assert not client.created_amid_swap, "the create went ahead while the name was no collection's"
        assert [(info.points_count, info.metadata) for info in client.created] == [(2, REBUILT_METADATA)]
        assert store.collection_target(COLLECTION) == REBUILT
        assert store.count(COLLECTION) == 2
    finally:
        store.close()
