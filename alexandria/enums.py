"""The contract's words for protobuf enum values, one mapping both ways for every enum.

Enum value names carry their enum's name as a prefix (buf style: `BATCH_STATUS_SUCCESS`); the
contract says `success`. UNSPECIFIED has no word (null).
"""

from __future__ import annotations

import re

from google.protobuf.descriptor import EnumDescriptor


def _enum_prefix(enum: EnumDescriptor) -> str:
    """`BatchStatus` -> `BATCH_STATUS_`, the prefix every value name of the enum carries."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enum.name).upper() + "_"


def enum_word(enum: EnumDescriptor, value: str | int) -> str | None:
    """The contract's word for an enum value, given by name or number (`BATCH_STATUS_SUCCESS` -> `success`)."""
    name = enum.values_by_number[value].name if isinstance(value, int) else value
    word = name.removeprefix(_enum_prefix(enum)).lower()
    return None if word == "unspecified" else word


def enum_number(enum: EnumDescriptor, word: str) -> int:
    """The enum value for a contract word (`precise` -> `CONTEXT_MODE_PRECISE`); the inverse of `enum_word`."""
    return enum.values_by_name[_enum_prefix(enum) + word.upper()].number
