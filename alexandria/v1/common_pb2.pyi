from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class FormatPreference(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FORMAT_PREFERENCE_UNSPECIFIED: _ClassVar[FormatPreference]
    FORMAT_PREFERENCE_EPUB: _ClassVar[FormatPreference]
    FORMAT_PREFERENCE_PDF: _ClassVar[FormatPreference]
    FORMAT_PREFERENCE_ANY: _ClassVar[FormatPreference]
FORMAT_PREFERENCE_UNSPECIFIED: FormatPreference
FORMAT_PREFERENCE_EPUB: FormatPreference
FORMAT_PREFERENCE_PDF: FormatPreference
FORMAT_PREFERENCE_ANY: FormatPreference

class ChunkingParams(_message.Message):
    __slots__ = ("threshold", "min_chunk_size", "max_chunk_size")
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    MIN_CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    threshold: float
    min_chunk_size: int
    max_chunk_size: int
    def __init__(self, threshold: _Optional[float] = ..., min_chunk_size: _Optional[int] = ..., max_chunk_size: _Optional[int] = ...) -> None: ...

class Locator(_message.Message):
    __slots__ = ("chapter_title", "chapter_index", "position", "page_start", "page_end", "text_source")
    CHAPTER_TITLE_FIELD_NUMBER: _ClassVar[int]
    CHAPTER_INDEX_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    PAGE_START_FIELD_NUMBER: _ClassVar[int]
    PAGE_END_FIELD_NUMBER: _ClassVar[int]
    TEXT_SOURCE_FIELD_NUMBER: _ClassVar[int]
    chapter_title: str
    chapter_index: int
    position: int
    page_start: int
    page_end: int
    text_source: str
    def __init__(self, chapter_title: _Optional[str] = ..., chapter_index: _Optional[int] = ..., position: _Optional[int] = ..., page_start: _Optional[int] = ..., page_end: _Optional[int] = ..., text_source: _Optional[str] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("stage", "done", "total", "message")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    stage: str
    done: int
    total: int
    message: str
    def __init__(self, stage: _Optional[str] = ..., done: _Optional[int] = ..., total: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...
