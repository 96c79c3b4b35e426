"""Every setting of every process, read from environment variables only.

One class per concern. A field's name is its environment variable, upper-cased
(`qdrant_host` is `QDRANT_HOST`), so the names below are the whole configuration
reference. Settings are read once at each entry point and passed down.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent
# Where models are fetched, built and exported once, for every stack of this checkout whatever its data folder or
# the folder it was started from (make setup and make models put them here).
DEFAULT_MODELS_DIR = REPO_ROOT / "var" / "models"


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS has one, as in a container)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class _Env(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", extra="ignore", case_sensitive=False)


class CommonSettings(_Env):
    alexandria_data_dir: Path = Field(Path("var"), description="Where the embedded store and sockets live.")
    alexandria_log_level: str = "INFO"
    # Set by `alexandria up` for the processes it starts, which end with it (alexandria/lifetime.py).
    alexandria_launcher_pid: int | None = None


class StackSettings(_Env):
    """A local stack (`alexandria up` and the CLI commands that reach it): its data directory, and service
    addresses that replace its unix sockets when set."""

    alexandria_data_dir: Path = Path("var")
    embedder_addr: str | None = None
    catalog_addr: str | None = None
    ingest_addr: str | None = None
    query_addr: str | None = None


# Copies of the dense vectors searched in their place (the originals rescore the best): int8 scalar
# quantisation (a byte a float), or binary (a bit a float).
VectorQuantization = Literal["none", "int8", "binary"]


# Below this, segments are as small as the unindexed one points land in (10 MB), and as slow to search.
MIN_SEGMENT_MB = 10
# About 8 segments of this size hold the 3 million passages of 10,000 books (README, Benchmarks).
MERGED_SEGMENT_MB = 1000


class StoreSettings(_Env):
    """Which Qdrant: a server when QDRANT_HOST, QDRANT_URL or QDRANT_LOCAL_PATH is set, else embedded."""

    qdrant_host: str | None = None
    qdrant_port: int = 6333
    qdrant_url: str | None = None
    qdrant_api_key: SecretStr | None = None
    qdrant_collection: str = "alexandria"
    # qdrant-client's own local mode (same API as a server); used to test the server path here.
    qdrant_local_path: Path | None = None
    alexandria_data_dir: Path = Path("var")
    # Threads each embedded collection searches its segments with; 0: the CPUs this process may
    # use. qdrant-edge's own default started 8 on a 2-CPU machine, and those 8 spent 7-8 ms of CPU
    # on a search that 2 threads do in 5 (bench/query.py's collection), taking cores from the rest.
    embedded_search_threads: int = Field(0, ge=0)
    # The largest segment an embedded collection's optimizer merges into, in MB of vectors (about 1.9 KB a
    # passage): every query searches each segment, so fewer, larger ones answer faster, but a merge pauses
    # the whole process while it runs (qdrant-edge holds the GIL), for longer the larger it gets.
    # `alexandria compact` merges into larger ones once, with the stack stopped.
    embedded_max_segment_mb: int = Field(100, ge=MIN_SEGMENT_MB)
    # Past that, a collection of more than 8 segments has its smallest ones merged into one of up to this many MB
    # of vectors, in a child process while the stack serves (alexandria/store/merging.py); 0: never.
    embedded_merged_segment_mb: int = Field(MERGED_SEGMENT_MB, ge=0)
    # How a new collection stores its dense vectors, on both backends; a collection keeps the layout it was
    # made with (`alexandria reindex` rebuilds it under the current one). Quantised vectors are searched
    # in RAM and their best `oversampling` x limit candidates rescored with the originals. int8 with the
    # originals on disk is the default at every size: a library grows by syncs, and the layout it was made
    # with is the one it has at 10,000 books (README, *A library past one machine*).
    qdrant_quantization: VectorQuantization = Field(
        "int8", description="none, int8 (scalar, 4x smaller) or binary (32x smaller) copies of the dense vectors."
    )
    qdrant_quantization_oversampling: float = Field(2.0, ge=1.0, le=16.0)
    # Original vectors (dense and windows) and payloads read through mmap instead of held in RAM.
    qdrant_on_disk: bool = True
    # Qdrant's own defaults: edges per node, and candidates while building the dense vectors' graph.
    qdrant_hnsw_m: int = Field(16, ge=4, le=128)
    qdrant_hnsw_ef_construct: int = Field(100, ge=4, le=1000)
    # Candidates a dense search visits in the graph (hnsw_ef). bench/scale.py, 1,001,910 points, recall@10
    # against exact search over 200 questions: the engine's default 0.927, 128: 0.943, 256: 0.981, 512: 0.997.
    qdrant_hnsw_ef: int = Field(256, ge=4, le=4096)
    # A Qdrant server's only (the embedded engine's segments are fixed at 32 MB): each write-ahead log
    # segment's size; unset: the server's (32 MB).
    qdrant_wal_capacity_mb: int | None = Field(None, ge=1)
    # A Qdrant server's only (a cluster's): unset, the server's defaults (1, 1, 1).
    qdrant_shard_number: int | None = Field(None, ge=1)
    qdrant_replication_factor: int | None = Field(None, ge=1)
    qdrant_write_consistency_factor: int | None = Field(None, ge=1)
    # A Qdrant server's only: how long one request may take before it fails as DeadlineExceeded (qdrant-client's
    # own default, 5 s, is less than an exact count over millions of points on a cold disk takes).
    qdrant_timeout_s: int = Field(60, ge=1)

    @property
    def server_only_settings(self) -> dict[str, int]:
        """The settings set that only a Qdrant server applies, by variable name."""
        fields = ("qdrant_wal_capacity_mb", "qdrant_shard_number", "qdrant_replication_factor",
                  "qdrant_write_consistency_factor")
        return {name.upper(): value for name in fields if (value := getattr(self, name)) is not None}

    @property
    def embedded_max_segment_kb(self) -> int:
        """EMBEDDED_MAX_SEGMENT_MB in the engine's unit."""
        return self.embedded_max_segment_mb * 1000

    @property
    def embedded_merged_segment_kb(self) -> int:
        """EMBEDDED_MERGED_SEGMENT_MB in the engine's unit."""
        return self.embedded_merged_segment_mb * 1000

    @property
    def search_threads(self) -> int:
        """The embedded store's search threads per collection, 0 resolved to the CPUs available."""
        return self.embedded_search_threads or available_cpus()

    @property
    def backend(self) -> Literal["server", "embedded"]:
        return "server" if (self.qdrant_host or self.qdrant_url or self.qdrant_local_path) else "embedded"

    @property
    def embedded_path(self) -> Path:
        return self.alexandria_data_dir / "store"


class GrpcSettings(_Env):
    """What every gRPC channel and server of Alexandria agrees on."""

    # A client pings a connection whose call has gone quiet this often, and every server accepts pings at
    # twice that rate: a long stream that sends nothing for a while (a slow book, a reindex waiting its turn)
    # is kept, and a peer that vanished is noticed.
    grpc_keepalive_s: float = Field(30.0, gt=0, description="Seconds between keepalive pings on a quiet call.")


class ClientSettings(_Env):
    """Deadlines and retries for every gRPC call a process makes."""

    rpc_timeout_s: float = 15.0
    embed_timeout_s: float = 300.0
    long_rpc_timeout_s: float = 6 * 3600.0
    # A streaming call (an ingest, a sync of 10,000 books that takes a day on a CPU, a reindex) has no deadline: it
    # fails only when its service sends nothing for this long (each reports its progress far more often).
    stream_idle_s: float = Field(3600.0, gt=0)
    rpc_retry_attempts: int = 4
    # A large model on a cold GPU node can take minutes to load before the embedder serves.
    embedder_start_wait_s: float = 600.0
    embed_stream_chunk: int = Field(512, ge=1, le=4096, description="Texts per message when embedding many.")


# What runs a sentence-transformers model's transformer: torch (eager or traced), or ONNX Runtime or OpenVINO
# on a graph exported from it once and cached. The pooling and normalisation are the model's own either way.
EmbedderBackend = Literal["torch", "onnx", "openvino"]
# The precision below fp32 (CPU only). int8 on torch: the linear layers quantised dynamically; on onnx:
# every MatMul's weights in int8 blocks, its inputs quantised per block as it runs. bf16 (openvino): matrix
# products in bfloat16 on the CPU's AMX/AVX-512-BF16 units. Each gives other vectors, under a name of its own.
EmbedderQuantize = Literal["none", "int8", "bf16"]
# A named model, backend and precision (services/embedder/profiles.py); `auto` picks by device.
EmbedderProfile = Literal["baseline", "fast", "best", "multilingual", "gpu", "auto"]


class HubSettings(_Env):
    """Where models named by their Hugging Face id come from (services/embedder/hub.py)."""

    hf_endpoint: str = Field("https://huggingface.co", description="The model hub, or a mirror of it.")
    hf_token: SecretStr | None = Field(None, description="For gated or private models.")
    # auto: `alexandria up` fetches a named model that is not installed yet; never: it says the command that does.
    embedder_fetch: Literal["auto", "never"] = "auto"
    # Never touch the network, whatever else says (tests and CI set it).
    alexandria_offline: bool = False

    @property
    def may_fetch(self) -> bool:
        return self.embedder_fetch == "auto" and not self.alexandria_offline


class EmbedderSettings(_Env):
    embedder_listen: str = "127.0.0.1:50052"
    embedder_profile: EmbedderProfile = Field(
        "auto", description="Model, backend and precision by name; EMBEDDER_MODEL, EMBEDDER_BACKEND and "
        "EMBEDDER_QUANTIZE each override the profile's."
    )
    embedder_model: str | None = Field(
        None, description="A Hugging Face model id (BAAI/bge-m3), a folder, or a package; default: the profile's."
    )
    embedder_backend: EmbedderBackend | None = Field(
        None, description="torch, onnx or openvino; default: the profile's."
    )
    # Fetched models (scripts/fetch_mpnet.py puts all-mpnet-base-v2 here) and ONNX graphs exported from models.
    embedder_models_dir: Path = DEFAULT_MODELS_DIR
    embedder_reranker_model: str | None = Field(
        None, description="A cross-encoder's Hugging Face id (BAAI/bge-reranker-v2-m3), folder or package; unset: "
        "no reranker."
    )
    embedder_device: Literal["auto", "cpu", "cuda"] = "auto"
    # int8 or bf16 (CPU, sentence-transformers models): faster, and other vectors, so the model is named
    # "<name>+int8" (torch), "<name>+onnx-int8" or "<name>+openvino-bf16" and its collections are its own.
    # See bench/backends.py for what each costs.
    embedder_quantize: EmbedderQuantize | None = Field(
        None, description="none, int8 (torch, onnx) or bf16 (openvino); default: the profile's."
    )
    embedder_threads: int = Field(0, ge=0, description="CPU threads for torch; 0 = torch's default.")
    embedder_max_batch: int = Field(64, ge=1, le=4096)
    embedder_batch_wait_ms: float | None = Field(
        None,
        ge=0,
        le=100,
        description="During a burst, how long a batch waits for the next caller; "
        "default: the fixed cost of a forward pass, measured at start-up (what a shared pass saves).",
    )
    embedder_queue_limit: int = Field(20000, ge=1, description="Texts waiting at once in each lane (queries, passages) before RESOURCE_EXHAUSTED.")
    hub: HubSettings = Field(default_factory=HubSettings)


class CatalogSettings(_Env):
    catalog_listen: str = "127.0.0.1:50051"
    calibre_library_path: Path | None = None
    # How often, at most, metadata.db is looked at for Calibre's changes (and, while it cannot be read, read again).
    catalog_recheck_interval_s: float = Field(1.0, gt=0)
    store: StoreSettings = Field(default_factory=StoreSettings)


class IngestSettings(_Env):
    ingest_listen: str = "127.0.0.1:50053"
    embedder_addr: str = "127.0.0.1:50052"
    catalog_addr: str = "127.0.0.1:50051"
    local_ingest_path: Path | None = None
    local_ingest_extra_roots: list[Path] = Field(default_factory=list)
    ingest_max_file_mb: float = Field(200.0, gt=0)
    # Scanned PDF pages are read by OCR (about a second or two a page on a CPU core); a book with more is refused.
    ingest_ocr_max_pages: int = Field(1000, ge=1)
    # What OCR read of each page, kept under ALEXANDRIA_DATA_DIR/ocr so that a page is read once (about 4 KB a page on disk);
    # past this size the books read longest ago are dropped. 0: nothing is kept.
    ingest_ocr_cache_mb: float = Field(512.0, ge=0)
    # Tesseract's language data (the variable Tesseract itself reads); unset: the first system folder with English.
    tessdata_prefix: Path | None = None
    # The library keeps itself in step (services/ingest/auto_sync.py): after each change to metadata.db, once it has
    # been quiet this long, the same sync as `alexandria sync` runs on QDRANT_COLLECTION.
    auto_sync: bool = True
    auto_sync_quiet_s: float = Field(5.0, ge=0)
    auto_sync_poll_s: float = Field(1.0, gt=0)
    store: StoreSettings = Field(default_factory=StoreSettings)
    clients: ClientSettings = Field(default_factory=ClientSettings)


class QuerySettings(_Env):
    query_listen: str = "127.0.0.1:50054"
    embedder_addr: str = "127.0.0.1:50052"
    guardians_dir: Path = REPO_ROOT / "guardians"
    response_patterns_file: Path = REPO_ROOT / "guardians" / "response_patterns.yaml"
    default_guardian: str = "zec"
    # ~25k tokens is what MCP clients accept from one tool; 4 characters a token, with headroom.
    query_response_budget_chars: int = Field(80_000, ge=4_000)
    # Where the folders this service's books were read from sit on the machine that opens the links of results
    # (a container's mounts: {"/library": "/home/me/Calibre Library"} or {"/library": "C:\\Users\\me\\Calibre
    # Library"}); a folder not named is that machine's too.
    link_paths: dict[PurePosixPath, PurePath] = Field(default_factory=dict)

    @field_validator("link_paths", mode="before")
    @classmethod
    def _absolute_link_paths(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        paths: dict[PurePosixPath, PurePath] = {}
        for served, seen in value.items():
            windows = PureWindowsPath(str(seen))
            reader_path = windows if windows.drive else PurePosixPath(str(seen))
            if not PurePosixPath(str(served)).is_absolute() or not reader_path.is_absolute():
                raise ValueError(f"LINK_PATHS maps {served!r} to {seen!r}: both must be absolute paths "
                                 "(the second as the machine that opens the links writes it: /home/me/... or C:\\...)")
            paths[PurePosixPath(str(served))] = reader_path
        return paths
    store: StoreSettings = Field(default_factory=StoreSettings)
    clients: ClientSettings = Field(default_factory=ClientSettings)


class GatewaySettings(_Env):
    gateway_host: str = "127.0.0.1"
    gateway_port: int = 8765
    gateway_allowed_hosts: list[str] = Field(default_factory=list)
    # {"<token>": ["read", "ingest"]}; required when binding beyond loopback.
    gateway_tokens: dict[str, list[Literal["read", "ingest"]]] = Field(default_factory=dict)
    gateway_max_body_bytes: int = Field(256 * 1024, ge=1024)
    gateway_max_arg_chars: int = Field(4096, ge=64)
    # On SIGINT/SIGTERM, how long running tool calls (an ingest) may take to finish before they are cancelled.
    gateway_shutdown_grace_s: float = Field(30.0, ge=0)
    catalog_addr: str = "127.0.0.1:50051"
    ingest_addr: str = "127.0.0.1:50053"
    query_addr: str = "127.0.0.1:50054"
    # When a client that declares MCP sampling calls alexandria_query without a hypothetical_passage, ask its
    # model for one (gateway/sampling.py). Off by default: most clients ask their user to approve each request.
    query_sampling: bool = False
    query_sampling_timeout_s: float = Field(5.0, gt=0, le=60)
    clients: ClientSettings = Field(default_factory=ClientSettings)


def settings_problems() -> list[str]:
    """Every setting in the environment that some process of the stack would refuse, a line each naming the
    variable, its value and what it accepts: read once before anything starts, so the user sees one message."""
    problems: dict[str, None] = {}
    for settings in (CommonSettings, StackSettings, StoreSettings, GrpcSettings, ClientSettings, EmbedderSettings,
                     CatalogSettings, IngestSettings, QuerySettings, GatewaySettings):
        try:
            settings()
        except ValidationError as invalid:
            for error in invalid.errors():
                # A nested settings object (store, clients) reads the same variables: its field is the variable.
                variable = str(error["loc"][-1] if len(error["loc"]) > 1 else error["loc"][0]).upper()
                value = os.environ.get(variable, os.environ.get(variable.lower()))
                problems[f"{variable}={value!r}: should be {error['msg'].removeprefix('Input should be ')}"] = None
    return list(problems)
