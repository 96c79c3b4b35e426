"""The embedded store's tuned numbers, each with what it was measured against.

qdrant-edge 0.9 holds the GIL through `optimize()`, so an optimize pauses every other Python thread of the
process (the gRPC event loops included) for its duration: these keep each optimize small and most of them empty.
Read as `tuning.NAME` where they are used, so that a test may lower one.
"""

from __future__ import annotations

# A segment stays unindexed, searched by brute force, until it holds this many KB of vectors (about 6,500 of 384
# floats): sub-millisecond below it, and an optimize after a book that leaves it below returns at once; past it,
# optimize() indexes that segment alone (~4 s for 6,500 vectors of 384 floats on 2 busy cores).
INDEXING_THRESHOLD_KB = 10_000
# Segments kept before the smallest are merged, in this process up to EMBEDDED_MAX_SEGMENT_MB, which bounds the
# longest pause. With the engine's defaults (segments = CPU count, no size cap) every indexing step merged into one
# big segment and re-indexed everything: the pauses grew with the library (23 s at 14,000 points); with these they
# stayed flat (2-5 s up to 60,000 points). Past them, the smallest are merged in a child process instead
# (background_merges.py), up to EMBEDDED_MERGED_SEGMENT_MB.
SEGMENTS = 8
# Qdrant's default: a segment below this many KB of vectors is searched without its graph.
FULL_SCAN_THRESHOLD_KB = 10_000

# The same ef finds less in a larger graph, so a collection whose largest segment holds more than
# LARGE_SEGMENT_BYTES of vectors visits QDRANT_HNSW_EF times their ratio, up to LARGE_SEGMENT_EF_FACTOR times.
# At 10,000 books (3 million passages): 57 segments of up to 100 MB found 0.9995 of the exact 10 by distance at ef
# 256; merged into 7 of about 800 MB, 0.930 at 256, 0.969 at 512 and 0.985 at 1024 (README).
LARGE_SEGMENT_EF_FACTOR = 4
LARGE_SEGMENT_BYTES = 200_000_000
# A collection past SEGMENTS segments has outgrown what the serving cap merges (about 400,000 passages): each of
# its segments holds a small share of a query's nearest points, so each is searched with half QDRANT_HNSW_EF and
# rescores only as many quantised candidates as it returns. At 10,000 books (57 segments, int8): recall@10 by
# distance 0.9995 -> 0.985, a dense search of 100 candidates 103 -> 38 ms from a cold page cache (most of it the
# rescoring's reads of originals on disk), precise p50 through the stack 171.5 -> 110-126 ms (bench/scale.py --kept, two runs).
# Fewer segments are searched as the settings say: with one segment, oversampling 1 lost 1.4% of the top 50.
MANY_SEGMENTS_EF_SHARE = 0.5

# Facet counts read whole collections (a library's listing, its statistics: 5.7-6.5 s for alexandria_stats' at 7,500
# books of 300 points), and qdrant-edge holds the GIL while it counts: every other thread of the process waited up
# to 0.67 s a facet there. The last few read are kept until the collection is written again (0.24-0.29 s: README).
KEPT_FACETS = 32

# What FusionQuery(fusion=RRF) uses on a Qdrant server, so both backends rank alike.
RRF_K = 2
