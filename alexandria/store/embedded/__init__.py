"""The embedded backend: Qdrant's engine in this process (qdrant-edge), behind `EmbeddedStore`.

store.py is the API; the modules beside it each hold one part of it: tuned numbers (tuning), conversions to the
engine's types, a shard's files, the sidecars and aliases beside the shards, the store's ownership, who may use a
shard when (shard_access), search depth by segments, kept facet counts, background merges and their steps.
"""

from alexandria.store.embedded.store import EmbeddedStore

__all__ = ["EmbeddedStore"]
