"""What differs between the store's engines by design, and why: the one list of it.

Everything else behaves alike on every engine, which tests/store/test_store_contract.py checks by running
each test on the embedded engine and on qdrant-client's local mode. A test that meets one of these
differences reads it from here (`Difference.applies_to`) instead of skipping an engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Engine(StrEnum):
    EMBEDDED = "embedded"  # qdrant-edge in this process (the embedded backend)
    SERVER = "server"  # a Qdrant server through qdrant-client (the server backend)
    LOCAL = "local mode"  # qdrant-client's local mode on a folder (the server backend without a server)


@dataclass(frozen=True)
class Difference:
    engines: frozenset[Engine]  # where the behaviour differs from the others
    behaviour: str
    reason: str

    def applies_to(self, engine: Engine) -> bool:
        return engine in self.engines


ACCENT_FOLDING = Difference(
    frozenset({Engine.LOCAL}),
    "Filter.text lowercases but does not fold accents: 'emile' does not match 'Émile Zola' ('émile' does).",
    "local mode is qdrant-client's pure-Python engine, whose text match ignores the index's ascii_folding "
    "(it builds no index at all); qdrant-edge and a Qdrant server (1.16+) fold.",
)
PAYLOAD_INDEXES = Difference(
    frozenset({Engine.LOCAL}),
    "No payload index is built; every filter scans the points (the same answers, slower).",
    "local mode has no payload indexes and warns about each one requested, so none are requested.",
)
TIE_ORDER = Difference(
    frozenset(Engine),
    "Points of equal score come back in an order of each engine's own, and so do the RRF ranks a hybrid "
    "query fuses: with ties inside a prefetch, fused scores below the top can differ.",
    "neither engine promises an order among equal scores (segment order, insertion order); a contract "
    "for it would cost a sort the results do not need.",
)
OPTIMIZE = Difference(
    frozenset({Engine.SERVER, Engine.LOCAL}),
    "optimize() does nothing.",
    "a Qdrant server indexes and flushes in the background by itself, and local mode never indexes; the "
    "embedded engine indexes, and flushes so that its write-ahead log can shrink, only when asked "
    "(embedded.py's optimize policy and its write-ahead log).",
)
STATUS = Difference(
    frozenset({Engine.EMBEDDED, Engine.LOCAL}),
    "CollectionInfo.status is always 'green'; a Qdrant server says 'yellow' while it optimises.",
    "embedded: optimize() is synchronous and holds the process, so no caller sees it mid-way; local mode "
    "never optimises.",
)
HOLDS_GIL = Difference(
    frozenset({Engine.EMBEDDED}),
    "holds_gil is True: call_store runs its calls inline instead of in a thread.",
    "qdrant-edge holds the GIL through every call, so a thread would buy the event loop nothing.",
)
ONE_PROCESS = Difference(
    frozenset({Engine.EMBEDDED, Engine.LOCAL}),
    "One process opens the store; a second opener gets FailedPrecondition.",
    "both lock their folder (qdrant-edge's write-ahead log, local mode's lock file); a Qdrant server serves "
    "many processes, and the loser of two creates of one collection gets the winner's collection.",
)
FIRST_SWAP = Difference(
    frozenset({Engine.SERVER, Engine.LOCAL}),
    "The first replace_collection of a collection made under the user's name deletes it before the alias "
    "takes its name: between the two calls a search finds no collection (later swaps move the alias at once), "
    "and a create of the name in the same process waits for the alias (one in another process would take the name).",
    "Qdrant lets no alias share a collection's name, and cannot delete a collection and create an alias in one "
    "call; the embedded store's alias map is its own, so it swaps at once every time.",
)
LAYOUT = Difference(
    frozenset({Engine.LOCAL}),
    "A collection records its layout (CollectionLayout: quantisation, vectors on disk, HNSW) but is searched "
    "exactly, every vector in full precision; a cluster's settings and the WAL's are not recorded.",
    "local mode is qdrant-client's pure-Python engine: it keeps no index, no quantised copies and no "
    "write-ahead log, and ignores create_collection's arguments beyond the vectors and the metadata.",
)
