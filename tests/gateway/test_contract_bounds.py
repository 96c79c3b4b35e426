"""What each tool's published input schema admits is what its service accepts, at every bound.

For every numeric parameter with a lower and an upper bound in a tool's JSON Schema, the values at
its edges must pass the service's own validation, and the values just outside must be refused (or,
for result limits, held within the bounds). A drift between the gateway's schema and a service's
checks fails here, naming the tool and parameter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from alexandria.contract import BATCH_LIMIT, BOOK_SEARCH_LIMIT, MAX_CHUNK_SIZE, MIN_CHUNK_SIZE, PREVIEW_LIMIT
from alexandria.errors import InvalidArgument
from gateway.shutdown import ToolCalls
from gateway.tools import build_tools
from services.ingest.chunking import validate_params
from services.ingest.segment import MAX_SENTENCE_WORDS
from services.query.search import SearchQuery, validate

CHUNKING_TOOLS = {
    "alexandria_ingest", "alexandria_batch_ingest", "alexandria_test_chunking", "alexandria_compare_chunking",
    "alexandria_ingest_file", "alexandria_test_chunking_file",
}
# What the other two chunking parameters are while one is tried at its edges: each admits every edge of it.
CHUNKING_COMPANIONS = {
    "threshold": {"min_chunk_size": None, "max_chunk_size": None},
    "min_chunk_size": {"threshold": None, "max_chunk_size": MAX_CHUNK_SIZE.high},
    "max_chunk_size": {"threshold": None, "min_chunk_size": MIN_CHUNK_SIZE.low},
}


def refused_by(check: Callable[[], Any]) -> bool:
    try:
        check()
    except InvalidArgument:
        return True
    return False


def service_accepts(tool: str, parameter: str, value: float) -> bool:
    """Whether the service behind `tool` takes `value` for `parameter` as it is."""
    if tool in CHUNKING_TOOLS and parameter in CHUNKING_COMPANIONS:
        arguments = {**CHUNKING_COMPANIONS[parameter], parameter: value}
        return not refused_by(lambda: validate_params(**arguments))
    if tool == "alexandria_query":
        return not refused_by(lambda: validate(SearchQuery("a question", "books", **{parameter: value})))
    limits = {"alexandria_search": BOOK_SEARCH_LIMIT, "alexandria_ingest_preview": PREVIEW_LIMIT,
              "alexandria_batch_ingest": BATCH_LIMIT}
    if parameter == "limit" and tool in limits:
        return limits[tool].clamp(int(value)) == value
    raise AssertionError(f"{tool}.{parameter} has bounds in its schema but no service check here: add it")


def bounded_parameters() -> list[tuple[str, str, dict[str, Any]]]:
    """(tool, parameter, its numeric schema) for every parameter with both a lower and an upper bound."""
    found = []
    for tool in build_tools(4096, ToolCalls(30.0)):
        for name, schema in tool.parameters["properties"].items():
            for variant in schema.get("anyOf", [schema]):
                low = "minimum" in variant or "exclusiveMinimum" in variant
                high = "maximum" in variant or "exclusiveMaximum" in variant
                if variant.get("type") in ("integer", "number") and low and high:
                    found.append((tool.name, name, variant))
    return found


def edges(schema: dict[str, Any]) -> tuple[list[float], list[float]]:
    """(values the schema admits at its edges, values just outside them)."""
    step = 1 if schema["type"] == "integer" else 1e-6
    if "exclusiveMinimum" in schema:
        low, below = schema["exclusiveMinimum"] + step, schema["exclusiveMinimum"]
    else:
        low, below = schema["minimum"], schema["minimum"] - step
    if "exclusiveMaximum" in schema:
        high, above = schema["exclusiveMaximum"] - step, schema["exclusiveMaximum"]
    else:
        high, above = schema["maximum"], schema["maximum"] + step
    return [low, high], [below, above]


BOUNDED = bounded_parameters()


def test_every_tool_with_chunking_or_limits_publishes_bounds() -> None:
    named = {(tool, parameter) for tool, parameter, _ in BOUNDED}
    for tool in CHUNKING_TOOLS:
        for parameter in ("min_chunk_size", "max_chunk_size"):
            assert (tool, parameter) in named, f"{tool}.{parameter}"
    assert {("alexandria_query", "limit"), ("alexandria_query", "threshold")} <= named


@pytest.mark.parametrize(("tool", "parameter", "schema"), BOUNDED, ids=[f"{t}.{p}" for t, p, _ in BOUNDED])
def test_the_schema_admits_exactly_what_the_service_accepts(tool: str, parameter: str, schema: dict) -> None:
    inside, outside = edges(schema)
    for value in inside:
        assert service_accepts(tool, parameter, value), f"{tool}.{parameter}={value}: the schema admits it"
    for value in outside:
        if value == 0:
            continue  # proto3's "unset": a gRPC caller that sends 0 gets the default, by design
        assert not service_accepts(tool, parameter, value), f"{tool}.{parameter}={value}: the schema refuses it"


def test_a_chunk_may_hold_the_longest_sentence_and_no_longer_is_required() -> None:
    assert MAX_CHUNK_SIZE.low == MAX_SENTENCE_WORDS
