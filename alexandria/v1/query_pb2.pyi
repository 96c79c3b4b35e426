from alexandria.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ContextMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONTEXT_MODE_UNSPECIFIED: _ClassVar[ContextMode]
    CONTEXT_MODE_PRECISE: _ClassVar[ContextMode]
    CONTEXT_MODE_CONTEXTUAL: _ClassVar[ContextMode]
    CONTEXT_MODE_COMPREHENSIVE: _ClassVar[ContextMode]

class SearchMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEARCH_MODE_UNSPECIFIED: _ClassVar[SearchMode]
    SEARCH_MODE_HYBRID: _ClassVar[SearchMode]
    SEARCH_MODE_SEMANTIC: _ClassVar[SearchMode]
    SEARCH_MODE_LEXICAL: _ClassVar[SearchMode]

class SearchIn(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEARCH_IN_UNSPECIFIED: _ClassVar[SearchIn]
    SEARCH_IN_PASSAGES: _ClassVar[SearchIn]
    SEARCH_IN_HIGHLIGHTS: _ClassVar[SearchIn]
    SEARCH_IN_BOTH: _ClassVar[SearchIn]
CONTEXT_MODE_UNSPECIFIED: ContextMode
CONTEXT_MODE_PRECISE: ContextMode
CONTEXT_MODE_CONTEXTUAL: ContextMode
CONTEXT_MODE_COMPREHENSIVE: ContextMode
SEARCH_MODE_UNSPECIFIED: SearchMode
SEARCH_MODE_HYBRID: SearchMode
SEARCH_MODE_SEMANTIC: SearchMode
SEARCH_MODE_LEXICAL: SearchMode
SEARCH_IN_UNSPECIFIED: SearchIn
SEARCH_IN_PASSAGES: SearchIn
SEARCH_IN_HIGHLIGHTS: SearchIn
SEARCH_IN_BOTH: SearchIn

class SearchRequest(_message.Message):
    __slots__ = ("query", "limit", "threshold", "context_mode", "response_pattern", "guardian", "search_mode", "collection", "book_id", "author", "language", "hypothetical_passage", "search_in")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_MODE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_PATTERN_FIELD_NUMBER: _ClassVar[int]
    GUARDIAN_FIELD_NUMBER: _ClassVar[int]
    SEARCH_MODE_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    BOOK_ID_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    HYPOTHETICAL_PASSAGE_FIELD_NUMBER: _ClassVar[int]
    SEARCH_IN_FIELD_NUMBER: _ClassVar[int]
    query: str
    limit: int
    threshold: float
    context_mode: ContextMode
    response_pattern: str
    guardian: str
    search_mode: SearchMode
    collection: str
    book_id: int
    author: str
    language: str
    hypothetical_passage: str
    search_in: SearchIn
    def __init__(self, query: _Optional[str] = ..., limit: _Optional[int] = ..., threshold: _Optional[float] = ..., context_mode: _Optional[_Union[ContextMode, str]] = ..., response_pattern: _Optional[str] = ..., guardian: _Optional[str] = ..., search_mode: _Optional[_Union[SearchMode, str]] = ..., collection: _Optional[str] = ..., book_id: _Optional[int] = ..., author: _Optional[str] = ..., language: _Optional[str] = ..., hypothetical_passage: _Optional[str] = ..., search_in: _Optional[_Union[SearchIn, str]] = ...) -> None: ...

class SearchHit(_message.Message):
    __slots__ = ("score", "book_title", "author", "section_name", "text", "chunk_id", "locator", "book_id", "file_path", "book_key", "language", "parent_id", "sequence_index", "matched_lexically", "link", "kind", "note")
    SCORE_FIELD_NUMBER: _ClassVar[int]
    BOOK_TITLE_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    SECTION_NAME_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    LOCATOR_FIELD_NUMBER: _ClassVar[int]
    BOOK_ID_FIELD_NUMBER: _ClassVar[int]
    FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    BOOK_KEY_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_INDEX_FIELD_NUMBER: _ClassVar[int]
    MATCHED_LEXICALLY_FIELD_NUMBER: _ClassVar[int]
    LINK_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    score: float
    book_title: str
    author: str
    section_name: str
    text: str
    chunk_id: str
    locator: _common_pb2.Locator
    book_id: int
    file_path: str
    book_key: str
    language: str
    parent_id: str
    sequence_index: int
    matched_lexically: bool
    link: str
    kind: str
    note: str
    def __init__(self, score: _Optional[float] = ..., book_title: _Optional[str] = ..., author: _Optional[str] = ..., section_name: _Optional[str] = ..., text: _Optional[str] = ..., chunk_id: _Optional[str] = ..., locator: _Optional[_Union[_common_pb2.Locator, _Mapping]] = ..., book_id: _Optional[int] = ..., file_path: _Optional[str] = ..., book_key: _Optional[str] = ..., language: _Optional[str] = ..., parent_id: _Optional[str] = ..., sequence_index: _Optional[int] = ..., matched_lexically: _Optional[bool] = ..., link: _Optional[str] = ..., kind: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class ParentChunk(_message.Message):
    __slots__ = ("parent_id", "book_title", "author", "section_name", "text", "trimmed", "chapter_words", "result_indices")
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    BOOK_TITLE_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    SECTION_NAME_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TRIMMED_FIELD_NUMBER: _ClassVar[int]
    CHAPTER_WORDS_FIELD_NUMBER: _ClassVar[int]
    RESULT_INDICES_FIELD_NUMBER: _ClassVar[int]
    parent_id: str
    book_title: str
    author: str
    section_name: str
    text: str
    trimmed: bool
    chapter_words: int
    result_indices: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, parent_id: _Optional[str] = ..., book_title: _Optional[str] = ..., author: _Optional[str] = ..., section_name: _Optional[str] = ..., text: _Optional[str] = ..., trimmed: _Optional[bool] = ..., chapter_words: _Optional[int] = ..., result_indices: _Optional[_Iterable[int]] = ...) -> None: ...

class SiblingChunk(_message.Message):
    __slots__ = ("chunk_id", "result_index", "relation", "sequence_index", "section_name", "text")
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_INDEX_FIELD_NUMBER: _ClassVar[int]
    RELATION_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_INDEX_FIELD_NUMBER: _ClassVar[int]
    SECTION_NAME_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    chunk_id: str
    result_index: int
    relation: str
    sequence_index: int
    section_name: str
    text: str
    def __init__(self, chunk_id: _Optional[str] = ..., result_index: _Optional[int] = ..., relation: _Optional[str] = ..., sequence_index: _Optional[int] = ..., section_name: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class HierarchyStats(_message.Message):
    __slots__ = ("results", "parents_fetched", "results_sharing_a_parent", "siblings_fetched")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    PARENTS_FETCHED_FIELD_NUMBER: _ClassVar[int]
    RESULTS_SHARING_A_PARENT_FIELD_NUMBER: _ClassVar[int]
    SIBLINGS_FETCHED_FIELD_NUMBER: _ClassVar[int]
    results: int
    parents_fetched: int
    results_sharing_a_parent: int
    siblings_fetched: int
    def __init__(self, results: _Optional[int] = ..., parents_fetched: _Optional[int] = ..., results_sharing_a_parent: _Optional[int] = ..., siblings_fetched: _Optional[int] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("query", "results", "result_count", "context_mode", "search_mode", "response_instruction", "guardian", "guardian_name", "guardian_emoji", "response_pattern", "parent_chunks", "sibling_chunks", "hierarchy_stats", "trimmed", "notice")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    RESULT_COUNT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_MODE_FIELD_NUMBER: _ClassVar[int]
    SEARCH_MODE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    GUARDIAN_FIELD_NUMBER: _ClassVar[int]
    GUARDIAN_NAME_FIELD_NUMBER: _ClassVar[int]
    GUARDIAN_EMOJI_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_PATTERN_FIELD_NUMBER: _ClassVar[int]
    PARENT_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    SIBLING_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    HIERARCHY_STATS_FIELD_NUMBER: _ClassVar[int]
    TRIMMED_FIELD_NUMBER: _ClassVar[int]
    NOTICE_FIELD_NUMBER: _ClassVar[int]
    query: str
    results: _containers.RepeatedCompositeFieldContainer[SearchHit]
    result_count: int
    context_mode: str
    search_mode: str
    response_instruction: str
    guardian: str
    guardian_name: str
    guardian_emoji: str
    response_pattern: str
    parent_chunks: _containers.RepeatedCompositeFieldContainer[ParentChunk]
    sibling_chunks: _containers.RepeatedCompositeFieldContainer[SiblingChunk]
    hierarchy_stats: HierarchyStats
    trimmed: bool
    notice: str
    def __init__(self, query: _Optional[str] = ..., results: _Optional[_Iterable[_Union[SearchHit, _Mapping]]] = ..., result_count: _Optional[int] = ..., context_mode: _Optional[str] = ..., search_mode: _Optional[str] = ..., response_instruction: _Optional[str] = ..., guardian: _Optional[str] = ..., guardian_name: _Optional[str] = ..., guardian_emoji: _Optional[str] = ..., response_pattern: _Optional[str] = ..., parent_chunks: _Optional[_Iterable[_Union[ParentChunk, _Mapping]]] = ..., sibling_chunks: _Optional[_Iterable[_Union[SiblingChunk, _Mapping]]] = ..., hierarchy_stats: _Optional[_Union[HierarchyStats, _Mapping]] = ..., trimmed: _Optional[bool] = ..., notice: _Optional[str] = ...) -> None: ...

class Guardian(_message.Message):
    __slots__ = ("id", "name", "emoji", "role", "greeting", "personality_prompt", "specialties", "quirks")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    EMOJI_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    GREETING_FIELD_NUMBER: _ClassVar[int]
    PERSONALITY_PROMPT_FIELD_NUMBER: _ClassVar[int]
    SPECIALTIES_FIELD_NUMBER: _ClassVar[int]
    QUIRKS_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    emoji: str
    role: str
    greeting: str
    personality_prompt: str
    specialties: _containers.RepeatedScalarFieldContainer[str]
    quirks: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., emoji: _Optional[str] = ..., role: _Optional[str] = ..., greeting: _Optional[str] = ..., personality_prompt: _Optional[str] = ..., specialties: _Optional[_Iterable[str]] = ..., quirks: _Optional[_Iterable[str]] = ...) -> None: ...

class ListGuardiansRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListGuardiansResponse(_message.Message):
    __slots__ = ("guardians", "default", "count")
    GUARDIANS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    guardians: _containers.RepeatedCompositeFieldContainer[Guardian]
    default: str
    count: int
    def __init__(self, guardians: _Optional[_Iterable[_Union[Guardian, _Mapping]]] = ..., default: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class ResponsePattern(_message.Message):
    __slots__ = ("id", "category", "name", "description", "instruction")
    ID_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    id: str
    category: str
    name: str
    description: str
    instruction: str
    def __init__(self, id: _Optional[str] = ..., category: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., instruction: _Optional[str] = ...) -> None: ...

class ListResponsePatternsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListResponsePatternsResponse(_message.Message):
    __slots__ = ("patterns", "category_defaults")
    class CategoryDefaultsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PATTERNS_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_DEFAULTS_FIELD_NUMBER: _ClassVar[int]
    patterns: _containers.RepeatedCompositeFieldContainer[ResponsePattern]
    category_defaults: _containers.ScalarMap[str, str]
    def __init__(self, patterns: _Optional[_Iterable[_Union[ResponsePattern, _Mapping]]] = ..., category_defaults: _Optional[_Mapping[str, str]] = ...) -> None: ...

class GetCollectionStatsRequest(_message.Message):
    __slots__ = ("collection",)
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    collection: str
    def __init__(self, collection: _Optional[str] = ...) -> None: ...

class CollectionStats(_message.Message):
    __slots__ = ("connected", "collection_name", "points_count", "vector_size", "status", "books", "model", "backend", "disk_bytes", "wal_bytes", "quantization", "language_note", "model_note", "search_note")
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_NAME_FIELD_NUMBER: _ClassVar[int]
    POINTS_COUNT_FIELD_NUMBER: _ClassVar[int]
    VECTOR_SIZE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    BOOKS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    DISK_BYTES_FIELD_NUMBER: _ClassVar[int]
    WAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    QUANTIZATION_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_NOTE_FIELD_NUMBER: _ClassVar[int]
    MODEL_NOTE_FIELD_NUMBER: _ClassVar[int]
    SEARCH_NOTE_FIELD_NUMBER: _ClassVar[int]
    connected: bool
    collection_name: str
    points_count: int
    vector_size: int
    status: str
    books: int
    model: str
    backend: str
    disk_bytes: int
    wal_bytes: int
    quantization: str
    language_note: str
    model_note: str
    search_note: str
    def __init__(self, connected: _Optional[bool] = ..., collection_name: _Optional[str] = ..., points_count: _Optional[int] = ..., vector_size: _Optional[int] = ..., status: _Optional[str] = ..., books: _Optional[int] = ..., model: _Optional[str] = ..., backend: _Optional[str] = ..., disk_bytes: _Optional[int] = ..., wal_bytes: _Optional[int] = ..., quantization: _Optional[str] = ..., language_note: _Optional[str] = ..., model_note: _Optional[str] = ..., search_note: _Optional[str] = ...) -> None: ...
