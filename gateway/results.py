"""Proto messages in, the contract's result shapes out.

The proto field names already equal the contract's field names, so a message
rendered with them is the contract's dict once three things are fixed up:
int64 values are numbers (not ProtoJSON strings), enum values are the
contract's lowercase words (`BATCH_STATUS_SUCCESS` -> `"success"`), and unset
`optional` fields are `null` instead of missing. `contract_dict` does all three;
`message_schema` derives the matching JSON Schema from the same descriptors, so
the output schemas a client validates against cannot drift from the results.
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from mcp_types import CallToolResult, TextContent

from alexandria.enums import enum_word

INTERNAL_ERROR_MESSAGE = (
    "Internal error in the Alexandria gateway; the details are in its log. Try again later."
)

_JSON_TYPES: dict[int, str] = {
    FieldDescriptor.CPPTYPE_INT32: "integer",
    FieldDescriptor.CPPTYPE_INT64: "integer",
    FieldDescriptor.CPPTYPE_UINT32: "integer",
    FieldDescriptor.CPPTYPE_UINT64: "integer",
    FieldDescriptor.CPPTYPE_DOUBLE: "number",
    FieldDescriptor.CPPTYPE_FLOAT: "number",
    FieldDescriptor.CPPTYPE_BOOL: "boolean",
    FieldDescriptor.CPPTYPE_STRING: "string",
}
_NULLABLE_STRING: dict[str, Any] = {"type": ["string", "null"]}


def contract_dict(message: Message) -> dict[str, Any]:
    """The message as the contract's dict: proto field names, numbers, lowercase enum words, null for unset."""
    rendered = MessageToDict(
        message,
        preserving_proto_field_name=True,
        always_print_fields_with_no_presence=True,
        # ProtoJSON quotes int64; every id and count here is far below 2**53.
        unquote_int64_if_possible=True,
    )
    return _contract_object(message.DESCRIPTOR, rendered)


def _contract_object(descriptor: Descriptor, rendered: dict[str, Any]) -> dict[str, Any]:
    shaped: dict[str, Any] = {}
    for field in descriptor.fields:
        if field.name not in rendered:
            # Only fields with presence are left out by MessageToDict: unset optionals and messages.
            shaped[field.name] = None
            continue
        value = rendered[field.name]
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            shaped[field.name] = {key: _contract_value(value_field, item) for key, item in value.items()}
        elif field.is_repeated:
            shaped[field.name] = [_contract_value(field, item) for item in value]
        else:
            shaped[field.name] = _contract_value(field, value)
    return shaped


def _contract_value(field: FieldDescriptor, value: Any) -> Any:
    if field.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE:
        return _contract_object(field.message_type, value)
    if field.cpp_type == FieldDescriptor.CPPTYPE_ENUM:
        return enum_word(field.enum_type, value)
    return value


def _is_map(field: FieldDescriptor) -> bool:
    return field.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE and field.message_type.GetOptions().map_entry


def message_schema(descriptor: Descriptor) -> dict[str, Any]:
    """JSON Schema of what `contract_dict` makes of a message of this type."""
    return {"type": "object", "properties": {field.name: _field_schema(field) for field in descriptor.fields}}


def _field_schema(field: FieldDescriptor) -> dict[str, Any]:
    if _is_map(field):
        return {
            "type": "object",
            "additionalProperties": _value_schema(field.message_type.fields_by_name["value"]),
        }
    if field.is_repeated:
        return {"type": "array", "items": _value_schema(field)}
    if field.has_presence:
        return _nullable(_value_schema(field))
    return _value_schema(field)


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema admitting null too: as a type list where it has a type (clients validate every result
    against it, and anyOf costs a validator a second pass per value), as anyOf for an enum."""
    if "type" in schema:
        return {**schema, "type": [schema["type"], "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def _value_schema(field: FieldDescriptor) -> dict[str, Any]:
    if field.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE:
        return message_schema(field.message_type)
    if field.cpp_type == FieldDescriptor.CPPTYPE_ENUM:
        return {"enum": [enum_word(field.enum_type, value.name) for value in field.enum_type.values]}
    return {"type": _JSON_TYPES[field.cpp_type]}


def result_schema(descriptor: Descriptor) -> dict[str, Any]:
    """A tool's output schema: the message's schema plus the contract's `error` field."""
    schema = message_schema(descriptor)
    schema["properties"].setdefault("error", _NULLABLE_STRING)
    return schema


def composite_schema(parts: dict[str, Descriptor]) -> dict[str, Any]:
    """Output schema of a tool whose result joins several messages by name, each half able to carry its error."""
    return {
        "type": "object",
        "properties": {**{name: result_schema(d) for name, d in parts.items()}, "error": _NULLABLE_STRING},
    }


def tool_result(data: dict[str, Any]) -> CallToolResult:
    """A tool's answer: structured content, the same JSON as text, and isError when `success` is false."""
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(data, ensure_ascii=False))],
        structured_content=data,
        is_error=data.get("success") is False,
    )


def message_result(message: Message) -> CallToolResult:
    """The one-line shaping of every tool: the message in the contract's shape, with `error` null unless set."""
    data = contract_dict(message)
    data.setdefault("error", None)
    return tool_result(data)


def error_result(message: str, **context: Any) -> CallToolResult:
    """The contract's error shape (`success: false` and a message saying what to do), marked isError."""
    return tool_result({"success": False, "error": message, **context})
