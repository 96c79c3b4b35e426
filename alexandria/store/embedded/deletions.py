"""The points of a shard that match a filter: their ids, and deleting them."""

from __future__ import annotations

import qdrant_edge as edge


def matching_ids(shard: edge.EdgeShard, condition: edge.Filter) -> list[str]:
    matching = shard.count(edge.CountRequest(exact=True, filter=condition))
    if not matching:
        return []
    records, _next_offset = shard.scroll(edge.ScrollRequest(limit=matching, filter=condition, with_payload=False,
                                                            with_vector=False))
    return [str(record.id) for record in records]


def delete_matching(shard: edge.EdgeShard, condition: edge.Filter) -> int:
    """Delete the points matching `condition` from `shard`; how many there were."""
    matching = shard.count(edge.CountRequest(exact=True, filter=condition))
    if matching:
        shard.update(edge.UpdateOperation.delete_points_by_filter(condition))
    return matching
