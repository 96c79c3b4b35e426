from alexandria.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BatchStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BATCH_STATUS_UNSPECIFIED: _ClassVar[BatchStatus]
    BATCH_STATUS_SUCCESS: _ClassVar[BatchStatus]
    BATCH_STATUS_SKIPPED: _ClassVar[BatchStatus]
    BATCH_STATUS_FAILED: _ClassVar[BatchStatus]
BATCH_STATUS_UNSPECIFIED: BatchStatus
BATCH_STATUS_SUCCESS: BatchStatus
BATCH_STATUS_SKIPPED: BatchStatus
BATCH_STATUS_FAILED: BatchStatus

class IngestOptions(_message.Message):
    __slots__ = ("collection", "format_preference", "hierarchical", "chunking")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    FORMAT_PREFERENCE_FIELD_NUMBER: _ClassVar[int]
    HIERARCHICAL_FIELD_NUMBER: _ClassVar[int]
    CHUNKING_FIELD_NUMBER: _ClassVar[int]
    collection: str
    format_preference: _common_pb2.FormatPreference
    hierarchical: bool
    chunking: _common_pb2.ChunkingParams
    def __init__(self, collection: _Optional[str] = ..., format_preference: _Optional[_Union[_common_pb2.FormatPreference, str]] = ..., hierarchical: _Optional[bool] = ..., chunking: _Optional[_Union[_common_pb2.ChunkingParams, _Mapping]] = ...) -> None: ...

class IngestBookRequest(_message.Message):
    __slots__ = ("book_id", "options")
    BOOK_ID_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    book_id: int
    options: IngestOptions
    def __init__(self, book_id: _Optional[int] = ..., options: _Optional[_Union[IngestOptions, _Mapping]] = ...) -> None: ...

class IngestFileRequest(_message.Message):
    __slots__ = ("file_path", "title", "author", "language", "options")
    FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    file_path: str
    title: str
    author: str
    language: str
    options: IngestOptions
    def __init__(self, file_path: _Optional[str] = ..., title: _Optional[str] = ..., author: _Optional[str] = ..., language: _Optional[str] = ..., options: _Optional[_Union[IngestOptions, _Mapping]] = ...) -> None: ...

class ExtractedMetadata(_message.Message):
    __slots__ = ("title", "author", "language")
    TITLE_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    title: str
    author: str
    language: str
    def __init__(self, title: _Optional[str] = ..., author: _Optional[str] = ..., language: _Optional[str] = ...) -> None: ...

class IngestResult(_message.Message):
    __slots__ = ("success", "title", "author", "language", "chunks", "parent_chunks", "hierarchical", "chunking_params", "file_size_mb", "collection", "format", "progress", "steps", "book_key", "book_id", "file_path", "truncated_chunks", "seconds", "needs_metadata", "file_name", "extracted", "missing_fields", "error")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    PARENT_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    HIERARCHICAL_FIELD_NUMBER: _ClassVar[int]
    CHUNKING_PARAMS_FIELD_NUMBER: _ClassVar[int]
    FILE_SIZE_MB_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    BOOK_KEY_FIELD_NUMBER: _ClassVar[int]
    BOOK_ID_FIELD_NUMBER: _ClassVar[int]
    FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    NEEDS_METADATA_FIELD_NUMBER: _ClassVar[int]
    FILE_NAME_FIELD_NUMBER: _ClassVar[int]
    EXTRACTED_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELDS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    success: bool
    title: str
    author: str
    language: str
    chunks: int
    parent_chunks: int
    hierarchical: bool
    chunking_params: _common_pb2.ChunkingParams
    file_size_mb: float
    collection: str
    format: str
    progress: str
    steps: _containers.RepeatedScalarFieldContainer[str]
    book_key: str
    book_id: int
    file_path: str
    truncated_chunks: int
    seconds: float
    needs_metadata: bool
    file_name: str
    extracted: ExtractedMetadata
    missing_fields: _containers.RepeatedScalarFieldContainer[str]
    error: str
    def __init__(self, success: _Optional[bool] = ..., title: _Optional[str] = ..., author: _Optional[str] = ..., language: _Optional[str] = ..., chunks: _Optional[int] = ..., parent_chunks: _Optional[int] = ..., hierarchical: _Optional[bool] = ..., chunking_params: _Optional[_Union[_common_pb2.ChunkingParams, _Mapping]] = ..., file_size_mb: _Optional[float] = ..., collection: _Optional[str] = ..., format: _Optional[str] = ..., progress: _Optional[str] = ..., steps: _Optional[_Iterable[str]] = ..., book_key: _Optional[str] = ..., book_id: _Optional[int] = ..., file_path: _Optional[str] = ..., truncated_chunks: _Optional[int] = ..., seconds: _Optional[float] = ..., needs_metadata: _Optional[bool] = ..., file_name: _Optional[str] = ..., extracted: _Optional[_Union[ExtractedMetadata, _Mapping]] = ..., missing_fields: _Optional[_Iterable[str]] = ..., error: _Optional[str] = ...) -> None: ...

class IngestEvent(_message.Message):
    __slots__ = ("progress", "result")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    progress: _common_pb2.Progress
    result: IngestResult
    def __init__(self, progress: _Optional[_Union[_common_pb2.Progress, _Mapping]] = ..., result: _Optional[_Union[IngestResult, _Mapping]] = ...) -> None: ...

class BatchIngestRequest(_message.Message):
    __slots__ = ("book_ids", "author", "title", "language", "limit", "options")
    BOOK_IDS_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    book_ids: _containers.RepeatedScalarFieldContainer[int]
    author: str
    title: str
    language: str
    limit: int
    options: IngestOptions
    def __init__(self, book_ids: _Optional[_Iterable[int]] = ..., author: _Optional[str] = ..., title: _Optional[str] = ..., language: _Optional[str] = ..., limit: _Optional[int] = ..., options: _Optional[_Union[IngestOptions, _Mapping]] = ...) -> None: ...

class BatchIngestRow(_message.Message):
    __slots__ = ("id", "title", "author", "status", "chunks", "error")
    ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    id: int
    title: str
    author: str
    status: BatchStatus
    chunks: int
    error: str
    def __init__(self, id: _Optional[int] = ..., title: _Optional[str] = ..., author: _Optional[str] = ..., status: _Optional[_Union[BatchStatus, str]] = ..., chunks: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class BatchIngestResult(_message.Message):
    __slots__ = ("total", "succeeded", "skipped", "failed", "results", "summary")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    total: int
    succeeded: int
    skipped: int
    failed: int
    results: _containers.RepeatedCompositeFieldContainer[BatchIngestRow]
    summary: str
    def __init__(self, total: _Optional[int] = ..., succeeded: _Optional[int] = ..., skipped: _Optional[int] = ..., failed: _Optional[int] = ..., results: _Optional[_Iterable[_Union[BatchIngestRow, _Mapping]]] = ..., summary: _Optional[str] = ...) -> None: ...

class BatchIngestEvent(_message.Message):
    __slots__ = ("progress", "row", "result")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    progress: _common_pb2.Progress
    row: BatchIngestRow
    result: BatchIngestResult
    def __init__(self, progress: _Optional[_Union[_common_pb2.Progress, _Mapping]] = ..., row: _Optional[_Union[BatchIngestRow, _Mapping]] = ..., result: _Optional[_Union[BatchIngestResult, _Mapping]] = ...) -> None: ...

class BookSource(_message.Message):
    __slots__ = ("book_id", "file_path", "format_preference")
    BOOK_ID_FIELD_NUMBER: _ClassVar[int]
    FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    FORMAT_PREFERENCE_FIELD_NUMBER: _ClassVar[int]
    book_id: int
    file_path: str
    format_preference: _common_pb2.FormatPreference
    def __init__(self, book_id: _Optional[int] = ..., file_path: _Optional[str] = ..., format_preference: _Optional[_Union[_common_pb2.FormatPreference, str]] = ...) -> None: ...

class TestChunkingRequest(_message.Message):
    __slots__ = ("source", "chunking")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    CHUNKING_FIELD_NUMBER: _ClassVar[int]
    source: BookSource
    chunking: _common_pb2.ChunkingParams
    def __init__(self, source: _Optional[_Union[BookSource, _Mapping]] = ..., chunking: _Optional[_Union[_common_pb2.ChunkingParams, _Mapping]] = ...) -> None: ...

class ChunkingParameters(_message.Message):
    __slots__ = ("threshold", "min", "max")
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    threshold: float
    min: int
    max: int
    def __init__(self, threshold: _Optional[float] = ..., min: _Optional[int] = ..., max: _Optional[int] = ...) -> None: ...

class ChunkStats(_message.Message):
    __slots__ = ("total_chunks", "avg_words", "min_words", "max_words")
    TOTAL_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    AVG_WORDS_FIELD_NUMBER: _ClassVar[int]
    MIN_WORDS_FIELD_NUMBER: _ClassVar[int]
    MAX_WORDS_FIELD_NUMBER: _ClassVar[int]
    total_chunks: int
    avg_words: float
    min_words: int
    max_words: int
    def __init__(self, total_chunks: _Optional[int] = ..., avg_words: _Optional[float] = ..., min_words: _Optional[int] = ..., max_words: _Optional[int] = ...) -> None: ...

class ChunkSample(_message.Message):
    __slots__ = ("chunk_num", "words", "text", "locator")
    CHUNK_NUM_FIELD_NUMBER: _ClassVar[int]
    WORDS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    LOCATOR_FIELD_NUMBER: _ClassVar[int]
    chunk_num: int
    words: int
    text: str
    locator: _common_pb2.Locator
    def __init__(self, chunk_num: _Optional[int] = ..., words: _Optional[int] = ..., text: _Optional[str] = ..., locator: _Optional[_Union[_common_pb2.Locator, _Mapping]] = ...) -> None: ...

class TestChunkingResult(_message.Message):
    __slots__ = ("success", "title", "author", "parameters", "stats", "samples", "chapters", "total_sentences", "total_words", "format")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    CHAPTERS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SENTENCES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_WORDS_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    success: bool
    title: str
    author: str
    parameters: ChunkingParameters
    stats: ChunkStats
    samples: _containers.RepeatedCompositeFieldContainer[ChunkSample]
    chapters: int
    total_sentences: int
    total_words: int
    format: str
    def __init__(self, success: _Optional[bool] = ..., title: _Optional[str] = ..., author: _Optional[str] = ..., parameters: _Optional[_Union[ChunkingParameters, _Mapping]] = ..., stats: _Optional[_Union[ChunkStats, _Mapping]] = ..., samples: _Optional[_Iterable[_Union[ChunkSample, _Mapping]]] = ..., chapters: _Optional[int] = ..., total_sentences: _Optional[int] = ..., total_words: _Optional[int] = ..., format: _Optional[str] = ...) -> None: ...

class TestChunkingEvent(_message.Message):
    __slots__ = ("progress", "result")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    progress: _common_pb2.Progress
    result: TestChunkingResult
    def __init__(self, progress: _Optional[_Union[_common_pb2.Progress, _Mapping]] = ..., result: _Optional[_Union[TestChunkingResult, _Mapping]] = ...) -> None: ...

class CompareChunkingRequest(_message.Message):
    __slots__ = ("source", "min_chunk_size", "max_chunk_size")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    MIN_CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    source: BookSource
    min_chunk_size: int
    max_chunk_size: int
    def __init__(self, source: _Optional[_Union[BookSource, _Mapping]] = ..., min_chunk_size: _Optional[int] = ..., max_chunk_size: _Optional[int] = ...) -> None: ...

class SimilarityDistribution(_message.Message):
    __slots__ = ("min", "max", "mean", "median")
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    MEAN_FIELD_NUMBER: _ClassVar[int]
    MEDIAN_FIELD_NUMBER: _ClassVar[int]
    min: float
    max: float
    mean: float
    median: float
    def __init__(self, min: _Optional[float] = ..., max: _Optional[float] = ..., mean: _Optional[float] = ..., median: _Optional[float] = ...) -> None: ...

class SampleBreak(_message.Message):
    __slots__ = ("sentence_index", "similarity", "before", "after")
    SENTENCE_INDEX_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    sentence_index: int
    similarity: float
    before: str
    after: str
    def __init__(self, sentence_index: _Optional[int] = ..., similarity: _Optional[float] = ..., before: _Optional[str] = ..., after: _Optional[str] = ...) -> None: ...

class ThresholdComparison(_message.Message):
    __slots__ = ("threshold", "chunks", "avg_words", "coherence", "semantic_breaks", "forced_breaks", "sample_breaks")
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    AVG_WORDS_FIELD_NUMBER: _ClassVar[int]
    COHERENCE_FIELD_NUMBER: _ClassVar[int]
    SEMANTIC_BREAKS_FIELD_NUMBER: _ClassVar[int]
    FORCED_BREAKS_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_BREAKS_FIELD_NUMBER: _ClassVar[int]
    threshold: float
    chunks: int
    avg_words: float
    coherence: float
    semantic_breaks: int
    forced_breaks: int
    sample_breaks: _containers.RepeatedCompositeFieldContainer[SampleBreak]
    def __init__(self, threshold: _Optional[float] = ..., chunks: _Optional[int] = ..., avg_words: _Optional[float] = ..., coherence: _Optional[float] = ..., semantic_breaks: _Optional[int] = ..., forced_breaks: _Optional[int] = ..., sample_breaks: _Optional[_Iterable[_Union[SampleBreak, _Mapping]]] = ...) -> None: ...

class CompareChunkingResult(_message.Message):
    __slots__ = ("success", "title", "author", "total_sentences", "total_words", "similarity_distribution", "comparisons", "recommendation", "recommendation_reason")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SENTENCES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_WORDS_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_DISTRIBUTION_FIELD_NUMBER: _ClassVar[int]
    COMPARISONS_FIELD_NUMBER: _ClassVar[int]
    RECOMMENDATION_FIELD_NUMBER: _ClassVar[int]
    RECOMMENDATION_REASON_FIELD_NUMBER: _ClassVar[int]
    success: bool
    title: str
    author: str
    total_sentences: int
    total_words: int
    similarity_distribution: SimilarityDistribution
    comparisons: _containers.RepeatedCompositeFieldContainer[ThresholdComparison]
    recommendation: float
    recommendation_reason: str
    def __init__(self, success: _Optional[bool] = ..., title: _Optional[str] = ..., author: _Optional[str] = ..., total_sentences: _Optional[int] = ..., total_words: _Optional[int] = ..., similarity_distribution: _Optional[_Union[SimilarityDistribution, _Mapping]] = ..., comparisons: _Optional[_Iterable[_Union[ThresholdComparison, _Mapping]]] = ..., recommendation: _Optional[float] = ..., recommendation_reason: _Optional[str] = ...) -> None: ...

class CompareChunkingEvent(_message.Message):
    __slots__ = ("progress", "result")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    progress: _common_pb2.Progress
    result: CompareChunkingResult
    def __init__(self, progress: _Optional[_Union[_common_pb2.Progress, _Mapping]] = ..., result: _Optional[_Union[CompareChunkingResult, _Mapping]] = ...) -> None: ...

class BrowseLocalRequest(_message.Message):
    __slots__ = ("path", "recursive")
    PATH_FIELD_NUMBER: _ClassVar[int]
    RECURSIVE_FIELD_NUMBER: _ClassVar[int]
    path: str
    recursive: bool
    def __init__(self, path: _Optional[str] = ..., recursive: _Optional[bool] = ...) -> None: ...

class LocalFile(_message.Message):
    __slots__ = ("name", "size_mb", "format", "full_path")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_MB_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    FULL_PATH_FIELD_NUMBER: _ClassVar[int]
    name: str
    size_mb: float
    format: str
    full_path: str
    def __init__(self, name: _Optional[str] = ..., size_mb: _Optional[float] = ..., format: _Optional[str] = ..., full_path: _Optional[str] = ...) -> None: ...

class BrowseLocalResponse(_message.Message):
    __slots__ = ("path", "files", "count")
    PATH_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    path: str
    files: _containers.RepeatedCompositeFieldContainer[LocalFile]
    count: int
    def __init__(self, path: _Optional[str] = ..., files: _Optional[_Iterable[_Union[LocalFile, _Mapping]]] = ..., count: _Optional[int] = ...) -> None: ...

class RemoveBookRequest(_message.Message):
    __slots__ = ("collection", "book_id", "file_path")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    BOOK_ID_FIELD_NUMBER: _ClassVar[int]
    FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    collection: str
    book_id: int
    file_path: str
    def __init__(self, collection: _Optional[str] = ..., book_id: _Optional[int] = ..., file_path: _Optional[str] = ...) -> None: ...

class RemoveBookResponse(_message.Message):
    __slots__ = ("success", "title", "author", "book_key", "chunks_removed", "collection")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    BOOK_KEY_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    success: bool
    title: str
    author: str
    book_key: str
    chunks_removed: int
    collection: str
    def __init__(self, success: _Optional[bool] = ..., title: _Optional[str] = ..., author: _Optional[str] = ..., book_key: _Optional[str] = ..., chunks_removed: _Optional[int] = ..., collection: _Optional[str] = ...) -> None: ...

class SyncLibraryRequest(_message.Message):
    __slots__ = ("options", "dry_run", "remove_deleted", "retry_failed")
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    REMOVE_DELETED_FIELD_NUMBER: _ClassVar[int]
    RETRY_FAILED_FIELD_NUMBER: _ClassVar[int]
    options: IngestOptions
    dry_run: bool
    remove_deleted: bool
    retry_failed: bool
    def __init__(self, options: _Optional[_Union[IngestOptions, _Mapping]] = ..., dry_run: _Optional[bool] = ..., remove_deleted: _Optional[bool] = ..., retry_failed: _Optional[bool] = ...) -> None: ...

class SyncBook(_message.Message):
    __slots__ = ("book_id", "title", "reason")
    BOOK_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    book_id: int
    title: str
    reason: str
    def __init__(self, book_id: _Optional[int] = ..., title: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class SyncPlan(_message.Message):
    __slots__ = ("add", "remove", "skip_failed", "unchanged", "change", "no_file", "language_note", "update")
    ADD_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    SKIP_FAILED_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    NO_FILE_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_NOTE_FIELD_NUMBER: _ClassVar[int]
    UPDATE_FIELD_NUMBER: _ClassVar[int]
    add: _containers.RepeatedCompositeFieldContainer[SyncBook]
    remove: _containers.RepeatedCompositeFieldContainer[SyncBook]
    skip_failed: _containers.RepeatedCompositeFieldContainer[SyncBook]
    unchanged: int
    change: _containers.RepeatedCompositeFieldContainer[SyncBook]
    no_file: _containers.RepeatedCompositeFieldContainer[SyncBook]
    language_note: str
    update: _containers.RepeatedCompositeFieldContainer[SyncBook]
    def __init__(self, add: _Optional[_Iterable[_Union[SyncBook, _Mapping]]] = ..., remove: _Optional[_Iterable[_Union[SyncBook, _Mapping]]] = ..., skip_failed: _Optional[_Iterable[_Union[SyncBook, _Mapping]]] = ..., unchanged: _Optional[int] = ..., change: _Optional[_Iterable[_Union[SyncBook, _Mapping]]] = ..., no_file: _Optional[_Iterable[_Union[SyncBook, _Mapping]]] = ..., language_note: _Optional[str] = ..., update: _Optional[_Iterable[_Union[SyncBook, _Mapping]]] = ...) -> None: ...

class SyncResult(_message.Message):
    __slots__ = ("plan", "dry_run", "added", "removed", "failed", "summary", "seconds", "replaced", "skipped", "highlights_added", "highlights_removed", "updated")
    PLAN_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    ADDED_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    REPLACED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    HIGHLIGHTS_ADDED_FIELD_NUMBER: _ClassVar[int]
    HIGHLIGHTS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    plan: SyncPlan
    dry_run: bool
    added: int
    removed: int
    failed: _containers.RepeatedCompositeFieldContainer[SyncBook]
    summary: str
    seconds: float
    replaced: int
    skipped: _containers.RepeatedCompositeFieldContainer[SyncBook]
    highlights_added: int
    highlights_removed: int
    updated: int
    def __init__(self, plan: _Optional[_Union[SyncPlan, _Mapping]] = ..., dry_run: _Optional[bool] = ..., added: _Optional[int] = ..., removed: _Optional[int] = ..., failed: _Optional[_Iterable[_Union[SyncBook, _Mapping]]] = ..., summary: _Optional[str] = ..., seconds: _Optional[float] = ..., replaced: _Optional[int] = ..., skipped: _Optional[_Iterable[_Union[SyncBook, _Mapping]]] = ..., highlights_added: _Optional[int] = ..., highlights_removed: _Optional[int] = ..., updated: _Optional[int] = ...) -> None: ...

class SyncEvent(_message.Message):
    __slots__ = ("progress", "result")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    progress: _common_pb2.Progress
    result: SyncResult
    def __init__(self, progress: _Optional[_Union[_common_pb2.Progress, _Mapping]] = ..., result: _Optional[_Union[SyncResult, _Mapping]] = ...) -> None: ...

class ReindexRequest(_message.Message):
    __slots__ = ("collection",)
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    collection: str
    def __init__(self, collection: _Optional[str] = ...) -> None: ...

class ReindexBook(_message.Message):
    __slots__ = ("title", "book_key", "reason")
    TITLE_FIELD_NUMBER: _ClassVar[int]
    BOOK_KEY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    title: str
    book_key: str
    reason: str
    def __init__(self, title: _Optional[str] = ..., book_key: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ReindexResult(_message.Message):
    __slots__ = ("collection", "model", "previous_model", "rebuilt", "resumed", "gone", "failed", "swapped", "books", "points", "summary", "seconds")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_MODEL_FIELD_NUMBER: _ClassVar[int]
    REBUILT_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    GONE_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    SWAPPED_FIELD_NUMBER: _ClassVar[int]
    BOOKS_FIELD_NUMBER: _ClassVar[int]
    POINTS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    collection: str
    model: str
    previous_model: str
    rebuilt: int
    resumed: int
    gone: _containers.RepeatedCompositeFieldContainer[ReindexBook]
    failed: _containers.RepeatedCompositeFieldContainer[ReindexBook]
    swapped: bool
    books: int
    points: int
    summary: str
    seconds: float
    def __init__(self, collection: _Optional[str] = ..., model: _Optional[str] = ..., previous_model: _Optional[str] = ..., rebuilt: _Optional[int] = ..., resumed: _Optional[int] = ..., gone: _Optional[_Iterable[_Union[ReindexBook, _Mapping]]] = ..., failed: _Optional[_Iterable[_Union[ReindexBook, _Mapping]]] = ..., swapped: _Optional[bool] = ..., books: _Optional[int] = ..., points: _Optional[int] = ..., summary: _Optional[str] = ..., seconds: _Optional[float] = ...) -> None: ...

class ReindexEvent(_message.Message):
    __slots__ = ("progress", "result")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    progress: _common_pb2.Progress
    result: ReindexResult
    def __init__(self, progress: _Optional[_Union[_common_pb2.Progress, _Mapping]] = ..., result: _Optional[_Union[ReindexResult, _Mapping]] = ...) -> None: ...

class GetAutoSyncStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AutoSyncStatus(_message.Message):
    __slots__ = ("enabled", "collection", "pending", "running", "progress", "last_finished_at", "last_summary", "waiting_reason", "runs", "queued", "recent_runs", "last_change", "books_indexed", "books_total", "seconds_left")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    LAST_FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_SUMMARY_FIELD_NUMBER: _ClassVar[int]
    WAITING_REASON_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    RECENT_RUNS_FIELD_NUMBER: _ClassVar[int]
    LAST_CHANGE_FIELD_NUMBER: _ClassVar[int]
    BOOKS_INDEXED_FIELD_NUMBER: _ClassVar[int]
    BOOKS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    SECONDS_LEFT_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    collection: str
    pending: bool
    running: bool
    progress: str
    last_finished_at: str
    last_summary: str
    waiting_reason: str
    runs: int
    queued: bool
    recent_runs: _containers.RepeatedCompositeFieldContainer[AutoSyncRun]
    last_change: AutoSyncRun
    books_indexed: int
    books_total: int
    seconds_left: float
    def __init__(self, enabled: _Optional[bool] = ..., collection: _Optional[str] = ..., pending: _Optional[bool] = ..., running: _Optional[bool] = ..., progress: _Optional[str] = ..., last_finished_at: _Optional[str] = ..., last_summary: _Optional[str] = ..., waiting_reason: _Optional[str] = ..., runs: _Optional[int] = ..., queued: _Optional[bool] = ..., recent_runs: _Optional[_Iterable[_Union[AutoSyncRun, _Mapping]]] = ..., last_change: _Optional[_Union[AutoSyncRun, _Mapping]] = ..., books_indexed: _Optional[int] = ..., books_total: _Optional[int] = ..., seconds_left: _Optional[float] = ...) -> None: ...

class AutoSyncRun(_message.Message):
    __slots__ = ("finished_at", "summary", "changed")
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    finished_at: str
    summary: str
    changed: bool
    def __init__(self, finished_at: _Optional[str] = ..., summary: _Optional[str] = ..., changed: _Optional[bool] = ...) -> None: ...
