"""How deep a dense search walks each segment of a collection, by the segments it has (tuning.py says why)."""

from __future__ import annotations

import qdrant_edge as edge

from alexandria.store.embedded import tuning
from alexandria.store.embedded.shard_files import Segment
from alexandria.store.model import (
    HYBRID_PREFETCH_EF_FACTOR,
    HYBRID_PREFETCH_RESCORES,
    CollectionLayout,
    DenseSearch,
)


class SearchDepth:
    """The dense searches of a store's collections (by their own names), as their segments were last measured."""

    def __init__(self, layout: CollectionLayout) -> None:
        self._layout = layout
        # Rescoring asked for on every dense search: a collection keeps the quantisation it was made with,
        # whatever this process's settings, and an unquantised one ignores it.
        self._set_search = DenseSearch(layout.hnsw_ef, layout.oversampling)
        self._many_segments_search = DenseSearch(max(1, int(layout.hnsw_ef * tuning.MANY_SEGMENTS_EF_SHARE)), 1.0)
        self._search_params: dict[tuple[DenseSearch, bool], edge.SearchParams] = {}
        # Measured when a shard loads and after each optimize or merge: its segments, and the vectors of its
        # largest sealed one.
        self._segments: dict[str, int] = {}
        self._largest_segment: dict[str, int] = {}

    def measured(self, target: str, segments: list[Segment]) -> None:
        """The shard of `target` has these segments now."""
        self._segments[target] = len(segments)
        self._largest_segment[target] = max((s.vector_bytes for s in segments if s.sealed), default=0)

    def forget(self, target: str) -> None:
        self._segments.pop(target, None)
        self._largest_segment.pop(target, None)

    def segments(self, target: str) -> int:
        """The segments of `target`, as last measured."""
        return self._segments[target]

    def past_segment_cap(self, target: str) -> bool:
        """Whether `target` has more than tuning.SEGMENTS segments."""
        return self._segments.get(target, 0) > tuning.SEGMENTS

    def dense_search(self, target: str, largest_factor: float = tuning.LARGE_SEGMENT_EF_FACTOR) -> DenseSearch:
        """How a dense search of `target` searches each of its segments: deeper in large segments (up to
        `largest_factor` times the settings' ef), less in each of many small ones, else as the settings say."""
        factor = min(largest_factor, self._largest_segment.get(target, 0) / tuning.LARGE_SEGMENT_BYTES)
        if factor > 1:
            return DenseSearch(int(self._layout.hnsw_ef * factor), self._layout.oversampling)
        return self._many_segments_search if self.past_segment_cap(target) else self._set_search

    def dense_params(self, target: str, hybrid_prefetch: bool = False) -> edge.SearchParams:
        """The engine's parameters for `target`'s dense searches (dense_search); a hybrid query's dense prefetch
        searches large segments less deep, and may leave a quantised segment's candidates in their quantised order
        (model.HYBRID_PREFETCH_EF_FACTOR, HYBRID_PREFETCH_RESCORES)."""
        if hybrid_prefetch:
            search, rescore = self.dense_search(target, HYBRID_PREFETCH_EF_FACTOR), HYBRID_PREFETCH_RESCORES
        else:
            search, rescore = self.dense_search(target), True
        if (search, rescore) not in self._search_params:
            self._search_params[search, rescore] = edge.SearchParams(
                hnsw_ef=search.hnsw_ef,
                quantization=edge.QuantizationSearchParams(rescore=rescore, oversampling=search.oversampling),
            )
        return self._search_params[search, rescore]

    def note(self, target: str) -> str:
        """What `alexandria status` says of `target` when it is searched otherwise than the settings say ("" when
        it is not)."""
        search = self.dense_search(target)
        if search == self._set_search:
            return ""
        largest = self._largest_segment.get(target, 0)
        why = (f"its largest segment holds {largest / 1e6:.0f} MB of vectors" if largest > tuning.LARGE_SEGMENT_BYTES
               else f"{self._segments[target]} segments, past {tuning.SEGMENTS}")
        prefetch_ef = self.dense_search(target, HYBRID_PREFETCH_EF_FACTOR).hnsw_ef
        hybrid = f" (a hybrid search's dense half {prefetch_ef})" if prefetch_ef != search.hnsw_ef else ""
        return (f"dense searches visit {search.hnsw_ef} candidates a segment{hybrid}, and a semantic search rescores "
                f"{search.oversampling:g}x its results ({why}; QDRANT_HNSW_EF {self._layout.hnsw_ef}, "
                f"QDRANT_QUANTIZATION_OVERSAMPLING {self._layout.oversampling:g})")
