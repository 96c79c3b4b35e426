"""Unit tests of the pure shaping: proto message -> contract dict and its schema, and progress relaying."""

from __future__ import annotations

from dataclasses import dataclass, field

import gateway_fakes as canned
import jsonschema
import pytest
from google.protobuf.message import Message

from alexandria.enums import enum_number, enum_word
from alexandria.v1 import common_pb2, ingest_pb2, query_pb2
from gateway.progress import ProgressRelay, describe_row
from gateway.results import (
    contract_dict,
    error_result,
    message_result,
    result_schema,
)


def test_unset_optional_fields_are_null_and_int64_are_numbers() -> None:
    rendered = contract_dict(canned.SEARCH)
    hit = rendered["results"][0]
    assert hit["book_id"] == 1 and isinstance(hit["book_id"], int)
    assert hit["locator"] == {
        "chapter_title": "The Lamp",
        "chapter_index": 2,
        "position": 41,
        "page_start": None,
        "page_end": None,
        "text_source": "text",
    }
    assert rendered["hierarchy_stats"] is None
    assert rendered["parent_chunks"] == [] and rendered["notice"] == ""


def test_fields_come_in_proto_order() -> None:
    assert list(contract_dict(canned.COLLECTION_STATS)) == [
        f.name for f in query_pb2.CollectionStats.DESCRIPTOR.fields
    ]


def test_maps_keep_their_keys_and_numbers() -> None:
    assert contract_dict(canned.LIBRARY_STATS)["formats"] == {"EPUB": 4, "PDF": 1}


def test_enums_are_the_contracts_lowercase_words() -> None:
    statuses = [row["status"] for row in contract_dict(canned.BATCH)["results"]]
    assert statuses == ["success", "skipped", "failed"]
    assert contract_dict(ingest_pb2.BatchIngestRow())["status"] is None  # UNSPECIFIED


def test_enum_words_round_trip() -> None:
    for enum in (query_pb2.ContextMode.DESCRIPTOR, query_pb2.SearchMode.DESCRIPTOR):
        for value in enum.values[1:]:
            word = enum_word(enum, value.name)
            assert word is not None and word == word.lower()
            assert enum_number(enum, word) == value.number


@pytest.mark.parametrize(
    "message",
    [
        canned.SEARCH,
        canned.GUARDIANS,
        canned.BOOKS,
        canned.BOOK,
        canned.PREVIEW,
        canned.INGESTED,
        canned.NEEDS_METADATA,
        canned.BATCH,
        canned.TEST_CHUNKING,
        canned.COMPARE,
        canned.LOCAL_FILES,
        canned.REMOVED,
        query_pb2.SearchResponse(),
    ],
    ids=lambda m: type(m).__name__,
)
def test_results_match_the_schema_derived_from_the_same_message(message: Message) -> None:
    result = message_result(message)
    jsonschema.validate(result.structured_content, result_schema(message.DESCRIPTOR))
    assert result.structured_content["error"] is None or message is canned.NEEDS_METADATA


def test_an_unset_optional_field_validates_as_null_and_a_wrong_type_does_not() -> None:
    schema = result_schema(query_pb2.SearchResponse.DESCRIPTOR)
    hit = message_result(canned.SEARCH).structured_content["results"][0]
    with_nulls = {"results": [{**hit, "book_id": None, "locator": None}], "hierarchy_stats": None}
    jsonschema.validate(with_nulls, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"results": [{**hit, "book_id": "1"}]}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"results": [{**hit, "locator": {"page_start": "12"}}]}, schema)


def test_a_result_with_success_false_is_an_error() -> None:
    result = message_result(canned.NEEDS_METADATA)
    assert result.is_error
    assert result.structured_content["extracted"] == {"title": None, "author": None, "language": "eng"}
    assert result.structured_content["error"].startswith("Missing required metadata")


def test_error_result_has_the_contract_shape() -> None:
    result = error_result("Book 9 is not in the library; find ids with alexandria_search.", book_id=9)
    assert result.is_error
    assert result.structured_content == {
        "success": False,
        "error": "Book 9 is not in the library; find ids with alexandria_search.",
        "book_id": 9,
    }
    assert '"success": false' in result.content[0].text


@dataclass
class RecordingContext:
    """Stands in for the MCP Context: records what report_progress was given."""

    sent: list[tuple[float, float | None, str | None]] = field(default_factory=list)

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        self.sent.append((progress, total, message))


@pytest.mark.asyncio
async def test_progress_only_grows_across_stages_and_notes() -> None:
    ctx = RecordingContext()
    relay = ProgressRelay(ctx)  # type: ignore[arg-type]
    for event in canned.PROGRESS:
        await relay.progress(event)
    await relay.note("book 1 done")
    await relay.progress(common_pb2.Progress(stage="embed", done=0, total=10))
    values = [value for value, _, _ in ctx.sent]
    assert values == sorted(values) and len(set(values)) == len(values)
    assert ctx.sent[0] == (1, 1, "extracted 12 chapters")
    assert ctx.sent[1] == (101, 203, "embedded 100/202")  # the embed stage continues after extract's 1
    assert ctx.sent[4][2] == "book 1 done"


@pytest.mark.asyncio
async def test_a_batch_reads_as_its_books_done_whatever_rows_come_between() -> None:
    ctx = RecordingContext()
    relay = ProgressRelay(ctx)  # type: ignore[arg-type]
    for book in range(3):
        await relay.progress(common_pb2.Progress(stage="batch", done=1000 * book + 500, total=4000))
        await relay.progress(common_pb2.Progress(stage="batch", done=1000 * (book + 1), total=4000))
        await relay.note(f"book {book + 1}: success")
    shown = [(round(value), total) for value, total, _ in ctx.sent]
    assert shown == [(500, 4000), (1000, 4000), (1000, 4000), (1500, 4000), (2000, 4000), (2000, 4000),
                     (2500, 4000), (3000, 4000), (3000, 4000)]
    values = [value for value, _, _ in ctx.sent]
    assert values == sorted(values) and len(set(values)) == len(values)


def test_batch_rows_read_as_one_line() -> None:
    assert describe_row(canned.ROWS[0]) == "The Lighthouse Keeper's Almanac (id 1): success, 202 chunks"
    assert describe_row(canned.ROWS[2]) == "Storm (id 3): failed: No EPUB file on disk."
