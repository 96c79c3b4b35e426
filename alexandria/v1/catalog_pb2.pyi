from alexandria.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BookSummary(_message.Message):
    __slots__ = ("id", "title", "author", "authors", "language", "languages", "tags", "series", "series_index", "formats")
    ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    AUTHORS_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    LANGUAGES_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    SERIES_FIELD_NUMBER: _ClassVar[int]
    SERIES_INDEX_FIELD_NUMBER: _ClassVar[int]
    FORMATS_FIELD_NUMBER: _ClassVar[int]
    id: int
    title: str
    author: str
    authors: _containers.RepeatedScalarFieldContainer[str]
    language: str
    languages: _containers.RepeatedScalarFieldContainer[str]
    tags: _containers.RepeatedScalarFieldContainer[str]
    series: str
    series_index: float
    formats: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[int] = ..., title: _Optional[str] = ..., author: _Optional[str] = ..., authors: _Optional[_Iterable[str]] = ..., language: _Optional[str] = ..., languages: _Optional[_Iterable[str]] = ..., tags: _Optional[_Iterable[str]] = ..., series: _Optional[str] = ..., series_index: _Optional[float] = ..., formats: _Optional[_Iterable[str]] = ...) -> None: ...

class BookDetail(_message.Message):
    __slots__ = ("id", "title", "author", "authors", "language", "languages", "tags", "series", "series_index", "isbn", "publisher", "pubdate", "rating", "formats", "identifiers", "uuid", "author_sort", "missing_formats", "highlights")
    class IdentifiersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    AUTHORS_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    LANGUAGES_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    SERIES_FIELD_NUMBER: _ClassVar[int]
    SERIES_INDEX_FIELD_NUMBER: _ClassVar[int]
    ISBN_FIELD_NUMBER: _ClassVar[int]
    PUBLISHER_FIELD_NUMBER: _ClassVar[int]
    PUBDATE_FIELD_NUMBER: _ClassVar[int]
    RATING_FIELD_NUMBER: _ClassVar[int]
    FORMATS_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIERS_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_SORT_FIELD_NUMBER: _ClassVar[int]
    MISSING_FORMATS_FIELD_NUMBER: _ClassVar[int]
    HIGHLIGHTS_FIELD_NUMBER: _ClassVar[int]
    id: int
    title: str
    author: str
    authors: _containers.RepeatedScalarFieldContainer[str]
    language: str
    languages: _containers.RepeatedScalarFieldContainer[str]
    tags: _containers.RepeatedScalarFieldContainer[str]
    series: str
    series_index: float
    isbn: str
    publisher: str
    pubdate: str
    rating: float
    formats: _containers.RepeatedScalarFieldContainer[str]
    identifiers: _containers.ScalarMap[str, str]
    uuid: str
    author_sort: str
    missing_formats: _containers.RepeatedScalarFieldContainer[str]
    highlights: int
    def __init__(self, id: _Optional[int] = ..., title: _Optional[str] = ..., author: _Optional[str] = ..., authors: _Optional[_Iterable[str]] = ..., language: _Optional[str] = ..., languages: _Optional[_Iterable[str]] = ..., tags: _Optional[_Iterable[str]] = ..., series: _Optional[str] = ..., series_index: _Optional[float] = ..., isbn: _Optional[str] = ..., publisher: _Optional[str] = ..., pubdate: _Optional[str] = ..., rating: _Optional[float] = ..., formats: _Optional[_Iterable[str]] = ..., identifiers: _Optional[_Mapping[str, str]] = ..., uuid: _Optional[str] = ..., author_sort: _Optional[str] = ..., missing_formats: _Optional[_Iterable[str]] = ..., highlights: _Optional[int] = ...) -> None: ...

class SearchBooksRequest(_message.Message):
    __slots__ = ("author", "title", "language", "tags", "limit")
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    author: str
    title: str
    language: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    limit: int
    def __init__(self, author: _Optional[str] = ..., title: _Optional[str] = ..., language: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., limit: _Optional[int] = ...) -> None: ...

class SearchBooksResponse(_message.Message):
    __slots__ = ("books", "count")
    BOOKS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    books: _containers.RepeatedCompositeFieldContainer[BookSummary]
    count: int
    def __init__(self, books: _Optional[_Iterable[_Union[BookSummary, _Mapping]]] = ..., count: _Optional[int] = ...) -> None: ...

class GetBookRequest(_message.Message):
    __slots__ = ("book_id",)
    BOOK_ID_FIELD_NUMBER: _ClassVar[int]
    book_id: int
    def __init__(self, book_id: _Optional[int] = ...) -> None: ...

class GetBookResponse(_message.Message):
    __slots__ = ("book",)
    BOOK_FIELD_NUMBER: _ClassVar[int]
    book: BookDetail
    def __init__(self, book: _Optional[_Union[BookDetail, _Mapping]] = ...) -> None: ...

class GetLibraryStatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetLibraryStatsResponse(_message.Message):
    __slots__ = ("total_books", "total_authors", "formats", "languages")
    class FormatsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class LanguagesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    TOTAL_BOOKS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_AUTHORS_FIELD_NUMBER: _ClassVar[int]
    FORMATS_FIELD_NUMBER: _ClassVar[int]
    LANGUAGES_FIELD_NUMBER: _ClassVar[int]
    total_books: int
    total_authors: int
    formats: _containers.ScalarMap[str, int]
    languages: _containers.ScalarMap[str, int]
    def __init__(self, total_books: _Optional[int] = ..., total_authors: _Optional[int] = ..., formats: _Optional[_Mapping[str, int]] = ..., languages: _Optional[_Mapping[str, int]] = ...) -> None: ...

class PreviewIngestRequest(_message.Message):
    __slots__ = ("author", "title", "language", "format_filter", "limit", "collection")
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FILTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    author: str
    title: str
    language: str
    format_filter: _common_pb2.FormatPreference
    limit: int
    collection: str
    def __init__(self, author: _Optional[str] = ..., title: _Optional[str] = ..., language: _Optional[str] = ..., format_filter: _Optional[_Union[_common_pb2.FormatPreference, str]] = ..., limit: _Optional[int] = ..., collection: _Optional[str] = ...) -> None: ...

class PreviewBook(_message.Message):
    __slots__ = ("id", "title", "author", "language", "formats", "selected_format", "file_path", "already_ingested", "scanned")
    ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    FORMATS_FIELD_NUMBER: _ClassVar[int]
    SELECTED_FORMAT_FIELD_NUMBER: _ClassVar[int]
    FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    ALREADY_INGESTED_FIELD_NUMBER: _ClassVar[int]
    SCANNED_FIELD_NUMBER: _ClassVar[int]
    id: int
    title: str
    author: str
    language: str
    formats: _containers.RepeatedScalarFieldContainer[str]
    selected_format: str
    file_path: str
    already_ingested: bool
    scanned: bool
    def __init__(self, id: _Optional[int] = ..., title: _Optional[str] = ..., author: _Optional[str] = ..., language: _Optional[str] = ..., formats: _Optional[_Iterable[str]] = ..., selected_format: _Optional[str] = ..., file_path: _Optional[str] = ..., already_ingested: _Optional[bool] = ..., scanned: _Optional[bool] = ...) -> None: ...

class PreviewIngestResponse(_message.Message):
    __slots__ = ("books", "count", "format_filter")
    BOOKS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FILTER_FIELD_NUMBER: _ClassVar[int]
    books: _containers.RepeatedCompositeFieldContainer[PreviewBook]
    count: int
    format_filter: str
    def __init__(self, books: _Optional[_Iterable[_Union[PreviewBook, _Mapping]]] = ..., count: _Optional[int] = ..., format_filter: _Optional[str] = ...) -> None: ...

class ResolveBookFileRequest(_message.Message):
    __slots__ = ("book_id", "format_preference")
    BOOK_ID_FIELD_NUMBER: _ClassVar[int]
    FORMAT_PREFERENCE_FIELD_NUMBER: _ClassVar[int]
    book_id: int
    format_preference: _common_pb2.FormatPreference
    def __init__(self, book_id: _Optional[int] = ..., format_preference: _Optional[_Union[_common_pb2.FormatPreference, str]] = ...) -> None: ...

class ResolveBookFileResponse(_message.Message):
    __slots__ = ("book", "format", "file_path", "file_size_bytes", "highlights")
    BOOK_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    FILE_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    HIGHLIGHTS_FIELD_NUMBER: _ClassVar[int]
    book: BookDetail
    format: str
    file_path: str
    file_size_bytes: int
    highlights: _containers.RepeatedCompositeFieldContainer[Highlight]
    def __init__(self, book: _Optional[_Union[BookDetail, _Mapping]] = ..., format: _Optional[str] = ..., file_path: _Optional[str] = ..., file_size_bytes: _Optional[int] = ..., highlights: _Optional[_Iterable[_Union[Highlight, _Mapping]]] = ...) -> None: ...

class ListLibraryFilesRequest(_message.Message):
    __slots__ = ("format_preference",)
    FORMAT_PREFERENCE_FIELD_NUMBER: _ClassVar[int]
    format_preference: _common_pb2.FormatPreference
    def __init__(self, format_preference: _Optional[_Union[_common_pb2.FormatPreference, str]] = ...) -> None: ...

class LibraryFile(_message.Message):
    __slots__ = ("book_id", "uuid", "title", "author", "format", "file_path", "size_bytes", "mtime_ns", "authors", "language", "highlights")
    BOOK_ID_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MTIME_NS_FIELD_NUMBER: _ClassVar[int]
    AUTHORS_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    HIGHLIGHTS_FIELD_NUMBER: _ClassVar[int]
    book_id: int
    uuid: str
    title: str
    author: str
    format: str
    file_path: str
    size_bytes: int
    mtime_ns: int
    authors: _containers.RepeatedScalarFieldContainer[str]
    language: str
    highlights: _containers.RepeatedCompositeFieldContainer[Highlight]
    def __init__(self, book_id: _Optional[int] = ..., uuid: _Optional[str] = ..., title: _Optional[str] = ..., author: _Optional[str] = ..., format: _Optional[str] = ..., file_path: _Optional[str] = ..., size_bytes: _Optional[int] = ..., mtime_ns: _Optional[int] = ..., authors: _Optional[_Iterable[str]] = ..., language: _Optional[str] = ..., highlights: _Optional[_Iterable[_Union[Highlight, _Mapping]]] = ...) -> None: ...

class Highlight(_message.Message):
    __slots__ = ("uuid", "format", "text", "notes", "chapter_titles", "start_cfi", "spine_index", "timestamp")
    UUID_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    CHAPTER_TITLES_FIELD_NUMBER: _ClassVar[int]
    START_CFI_FIELD_NUMBER: _ClassVar[int]
    SPINE_INDEX_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    format: str
    text: str
    notes: str
    chapter_titles: _containers.RepeatedScalarFieldContainer[str]
    start_cfi: str
    spine_index: int
    timestamp: str
    def __init__(self, uuid: _Optional[str] = ..., format: _Optional[str] = ..., text: _Optional[str] = ..., notes: _Optional[str] = ..., chapter_titles: _Optional[_Iterable[str]] = ..., start_cfi: _Optional[str] = ..., spine_index: _Optional[int] = ..., timestamp: _Optional[str] = ...) -> None: ...

class ListLibraryFilesResponse(_message.Message):
    __slots__ = ("books", "stale_reason")
    BOOKS_FIELD_NUMBER: _ClassVar[int]
    STALE_REASON_FIELD_NUMBER: _ClassVar[int]
    books: _containers.RepeatedCompositeFieldContainer[LibraryFile]
    stale_reason: str
    def __init__(self, books: _Optional[_Iterable[_Union[LibraryFile, _Mapping]]] = ..., stale_reason: _Optional[str] = ...) -> None: ...

class GetLibraryStateRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LibraryState(_message.Message):
    __slots__ = ("signature", "root")
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    signature: str
    root: str
    def __init__(self, signature: _Optional[str] = ..., root: _Optional[str] = ...) -> None: ...
