from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EmbedKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EMBED_KIND_UNSPECIFIED: _ClassVar[EmbedKind]
    EMBED_KIND_QUERY: _ClassVar[EmbedKind]
    EMBED_KIND_PASSAGE: _ClassVar[EmbedKind]
EMBED_KIND_UNSPECIFIED: EmbedKind
EMBED_KIND_QUERY: EmbedKind
EMBED_KIND_PASSAGE: EmbedKind

class GetModelInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ModelInfo(_message.Message):
    __slots__ = ("name", "dimension", "max_seq_length", "device", "normalized", "dtype", "reranker", "similarity_floor", "relevance_at_half")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    MAX_SEQ_LENGTH_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    NORMALIZED_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    RERANKER_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_FLOOR_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_AT_HALF_FIELD_NUMBER: _ClassVar[int]
    name: str
    dimension: int
    max_seq_length: int
    device: str
    normalized: bool
    dtype: str
    reranker: str
    similarity_floor: float
    relevance_at_half: float
    def __init__(self, name: _Optional[str] = ..., dimension: _Optional[int] = ..., max_seq_length: _Optional[int] = ..., device: _Optional[str] = ..., normalized: _Optional[bool] = ..., dtype: _Optional[str] = ..., reranker: _Optional[str] = ..., similarity_floor: _Optional[float] = ..., relevance_at_half: _Optional[float] = ...) -> None: ...

class EmbedRequest(_message.Message):
    __slots__ = ("texts", "kind", "sequence", "neighbour_similarities")
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    NEIGHBOUR_SIMILARITIES_FIELD_NUMBER: _ClassVar[int]
    texts: _containers.RepeatedScalarFieldContainer[str]
    kind: EmbedKind
    sequence: int
    neighbour_similarities: bool
    def __init__(self, texts: _Optional[_Iterable[str]] = ..., kind: _Optional[_Union[EmbedKind, str]] = ..., sequence: _Optional[int] = ..., neighbour_similarities: _Optional[bool] = ...) -> None: ...

class EmbedResponse(_message.Message):
    __slots__ = ("vectors", "count", "dimension", "truncated", "model", "sequence", "neighbour_similarities")
    VECTORS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    NEIGHBOUR_SIMILARITIES_FIELD_NUMBER: _ClassVar[int]
    vectors: bytes
    count: int
    dimension: int
    truncated: int
    model: str
    sequence: int
    neighbour_similarities: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, vectors: _Optional[bytes] = ..., count: _Optional[int] = ..., dimension: _Optional[int] = ..., truncated: _Optional[int] = ..., model: _Optional[str] = ..., sequence: _Optional[int] = ..., neighbour_similarities: _Optional[_Iterable[float]] = ...) -> None: ...

class WindowedPassage(_message.Message):
    __slots__ = ("header", "text")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    header: str
    text: str
    def __init__(self, header: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class EmbedWindowsRequest(_message.Message):
    __slots__ = ("passages", "overlap_tokens")
    PASSAGES_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_TOKENS_FIELD_NUMBER: _ClassVar[int]
    passages: _containers.RepeatedCompositeFieldContainer[WindowedPassage]
    overlap_tokens: int
    def __init__(self, passages: _Optional[_Iterable[_Union[WindowedPassage, _Mapping]]] = ..., overlap_tokens: _Optional[int] = ...) -> None: ...

class EmbedWindowsResponse(_message.Message):
    __slots__ = ("vectors", "windows", "dimension", "model")
    VECTORS_FIELD_NUMBER: _ClassVar[int]
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    vectors: bytes
    windows: _containers.RepeatedScalarFieldContainer[int]
    dimension: int
    model: str
    def __init__(self, vectors: _Optional[bytes] = ..., windows: _Optional[_Iterable[int]] = ..., dimension: _Optional[int] = ..., model: _Optional[str] = ...) -> None: ...

class RerankRequest(_message.Message):
    __slots__ = ("query", "passages")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    PASSAGES_FIELD_NUMBER: _ClassVar[int]
    query: str
    passages: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, query: _Optional[str] = ..., passages: _Optional[_Iterable[str]] = ...) -> None: ...

class RerankResponse(_message.Message):
    __slots__ = ("scores", "reranker")
    SCORES_FIELD_NUMBER: _ClassVar[int]
    RERANKER_FIELD_NUMBER: _ClassVar[int]
    scores: _containers.RepeatedScalarFieldContainer[float]
    reranker: str
    def __init__(self, scores: _Optional[_Iterable[float]] = ..., reranker: _Optional[str] = ...) -> None: ...
