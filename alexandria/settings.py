"""Every setting of every process, read from environment variables only.

One class per concern. A field's name is its environment variable, upper-cased (`qdrant_url` is
`QDRANT_URL`); each variable is declared once, in one class, and classes that need it inherit it.
Fields made with `fixed(...)` are tuned constants, not settings: the environment never sets them, and only
the code (a benchmark's flag, a test, the launcher through a command-line flag) passes another value.
docs/configuration.md is generated from these classes (scripts/gen_settings_doc.py). Settings are read once
at each entry point and passed down.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

REPO_ROOT = Path(__file__).resolve().parent.parent
# Where models are fetched, built and exported once, for every stack of this checkout whatever its data folder or
# the folder it was started from (make setup and make models put them here).
DEFAULT_MODELS_DIR = REPO_ROOT / "var" / "models"

_FIXED = "fixed"  # json_schema_extra key marking a field that no environment variable sets


def fixed(default: Any, why: str, **constraints: Any) -> Any:
    """A tuned constant kept beside the settings it goes with: never read from the environment."""
    return Field(default, description=why, json_schema_extra={_FIXED: True}, **constraints)


def is_environment_setting(info: FieldInfo) -> bool:
    """Whether an environment variable sets this field: not a fixed constant, not a nested group of settings."""
    extra = info.json_schema_extra
    if isinstance(extra, dict) and extra.get(_FIXED):
        return False
    annotation = info.annotation
    return not (isinstance(annotation, type) and issubclass(annotation, BaseModel))


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS has one, as in a container)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class _EnvironmentSource(EnvSettingsSource):
    """Reads a field's variable only when it is a setting (a nested group would otherwise read a bare variable
    named like it, `STORE`, from whatever the shell holds), and hands a value that is not JSON to the field's
    own validation, which names the variable and what it accepts, instead of failing inside the source."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        if not is_environment_setting(field):
            return None, field_name, False
        return super().get_field_value(field, field_name)

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        try:
            return json.loads(value)
        except ValueError:
            return value


class _Env(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", extra="ignore", case_sensitive=False)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, _EnvironmentSource(settings_cls)


def _not_blank(value: object) -> object:
    if isinstance(value, str) and not value.strip():
        raise ValueError("a non-empty value (unset it for the default)")
    return value


def _comma_list(value: object) -> object:
    """A list given as JSON (["a", "b"]) or as comma-separated words (a,b)."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


_GRPC_TARGET = re.compile(r"^(unix:\S+|dns:/{0,3}[^\s/]+:\d{1,5})$")
_HOST_PORT = re.compile(r"^([^\s:/,]+|\[[0-9a-fA-F:]+\]):\d{1,5}$")


def _grpc_target(value: object) -> object:
    """An address alexandria.clients.channel_target takes: one target, or several host:port joined by commas."""
    if isinstance(value, str) and not (
        _GRPC_TARGET.match(value) or all(_HOST_PORT.match(part.strip()) for part in value.split(","))
    ):
        raise ValueError("a gRPC address: host:port (several joined by commas), dns:///host:port or "
                         "unix:/path/to.sock")
    return value


def _http_url(value: object) -> object:
    if isinstance(value, str) and not re.match(r"^https?://[^\s/]+", value):
        raise ValueError("an http:// or https:// URL")
    return value


LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


class DataDirSettings(_Env):
    alexandria_data_dir: Path = Field(Path("var"), description="Where the embedded store, the sockets, the sync "
                                      "state and the OCR cache live.")

    _data_dir_not_blank = field_validator("alexandria_data_dir", mode="before")(_not_blank)


class CommonSettings(DataDirSettings):
    alexandria_log_level: LogLevel = Field("INFO", description="DEBUG, INFO, WARNING, ERROR or CRITICAL.")

    @field_validator("alexandria_log_level", mode="before")
    @classmethod
    def _level_in_any_case(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value


# The four services' addresses when nothing else says: each listens here, and each client looks here.
DEFAULT_ADDRESSES = {"embedder": "127.0.0.1:50052", "catalog": "127.0.0.1:50051",
                     "ingest": "127.0.0.1:50053", "query": "127.0.0.1:50054"}


class AddressSettings(_Env):
    """Where each service is reached. `alexandria up` sets them for the processes it starts (unix sockets under
    the data dir); set them to run the services apart (docker-compose) or to point the CLI at another stack."""

    embedder_addr: str = Field(DEFAULT_ADDRESSES["embedder"], description="The embedder (dns:///host:port "
                               "balances over replicas).")
    catalog_addr: str = Field(DEFAULT_ADDRESSES["catalog"], description="The catalog service.")
    ingest_addr: str = Field(DEFAULT_ADDRESSES["ingest"], description="The ingest service.")
    query_addr: str = Field(DEFAULT_ADDRESSES["query"], description="The query service.")

    _targets = field_validator("embedder_addr", "catalog_addr", "ingest_addr", "query_addr", mode="before")(
        _grpc_target)

    def given_addresses(self) -> dict[str, str]:
        """The services whose address the environment (or the caller) named, by service name."""
        return {name.removesuffix("_addr"): getattr(self, name) for name in sorted(self.model_fields_set)
                if name.endswith("_addr")}


class StackSettings(DataDirSettings, AddressSettings):
    """A local stack (`alexandria up` and the CLI commands that reach it): its data directory, and service
    addresses that replace its unix sockets when set."""


# Copies of the dense vectors searched in their place (the originals rescore the best): int8 scalar
# quantisation (a byte a float), or binary (a bit a float).
VectorQuantization = Literal["none", "int8", "binary"]


# Below this, segments are as small as the unindexed one points land in (10 MB), and as slow to search.
MIN_SEGMENT_MB = 10
# About 8 segments of this size hold the 3 million passages of 10,000 books (docs/scaling.md).
MERGED_SEGMENT_MB = 1000


class StoreSettings(DataDirSettings):
    """Which Qdrant: a server when QDRANT_URL is set, else the embedded engine under ALEXANDRIA_DATA_DIR."""

    qdrant_url: str | None = Field(None, description="A Qdrant server (http://qdrant:6333); unset: the embedded "
                                   "store under ALEXANDRIA_DATA_DIR.")
    qdrant_api_key: SecretStr | None = Field(None, description="The Qdrant server's API key.")
    qdrant_collection: str = Field("alexandria", description="The collection searched and written.",
                                   pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$")
    # A collection keeps the layout it was made with (`alexandria reindex` rebuilds it under the current one).
    # int8 with the originals on disk is the default at every size: a library grows by syncs, and the layout
    # it was made with is the one it has at 10,000 books (docs/scaling.md).
    qdrant_quantization: VectorQuantization = Field(
        "int8", description="How a new collection keeps its dense vectors: none, int8 (scalar, 4x smaller) or "
        "binary (32x smaller) copies searched in RAM."
    )
    qdrant_shard_number: int | None = Field(None, ge=1, description="A Qdrant cluster's shards per new "
                                            "collection; unset: the server's default.")
    qdrant_replication_factor: int | None = Field(None, ge=1, description="A Qdrant cluster's copies of each "
                                                  "shard; unset: the server's default.")

    # qdrant-client's own local mode (same API as a server): how the tests take the server path here.
    qdrant_local_path: Path | None = fixed(None, "qdrant-client's local mode at this folder (tests).")
    embedded_search_threads: int = fixed(
        0, "Threads each embedded collection searches its segments with; 0: the CPUs this process may use "
        "(qdrant-edge's own default started 8 on a 2-CPU machine, which spent 7-8 ms of CPU on a search that "
        "2 threads do in 5).", ge=0)
    embedded_max_segment_mb: int = fixed(
        100, "The largest segment the embedded optimizer merges into, in MB of vectors: fewer, larger segments "
        "answer faster, but a merge pauses the process (qdrant-edge holds the GIL) for longer.",
        ge=MIN_SEGMENT_MB)
    embedded_merged_segment_mb: int = fixed(
        MERGED_SEGMENT_MB, "Past 8 segments, the smallest are merged into one of up to this many MB in a child "
        "process while the stack serves (alexandria/store/embedded/background_merges.py); 0: never.", ge=0)
    qdrant_quantization_oversampling: float = fixed(
        2.0, "Candidates from the quantised vectors per result, rescored with the originals.", ge=1.0, le=16.0)
    qdrant_on_disk: bool = fixed(True, "Original vectors and payloads read through mmap, not held in RAM.")
    qdrant_hnsw_m: int = fixed(16, "Edges per node of the dense graph (Qdrant's default).", ge=4, le=128)
    qdrant_hnsw_ef_construct: int = fixed(100, "Candidates while building the graph (Qdrant's default).",
                                          ge=4, le=1000)
    qdrant_hnsw_ef: int = fixed(
        256, "Candidates a dense search visits. bench.scale, 1,001,910 points, recall@10 against exact "
        "search: the engine's default 0.927, 128: 0.943, 256: 0.981, 512: 0.997.", ge=4, le=4096)
    qdrant_wal_capacity_mb: int | None = fixed(None, "A server's write-ahead log segment size; unset: the "
                                               "server's (32 MB).", ge=1)
    qdrant_write_consistency_factor: int | None = fixed(None, "A cluster's write consistency; unset: the "
                                                        "server's.", ge=1)
    qdrant_timeout_s: int = fixed(60, "How long one request to a server may take (qdrant-client's 5 s is less "
                                  "than an exact count over millions of points on a cold disk takes).", ge=1)

    _url = field_validator("qdrant_url", mode="before")(_http_url)
    _key = field_validator("qdrant_api_key", mode="before")(_not_blank)

    @property
    def server_only_settings(self) -> dict[str, int]:
        """The settings set that only a Qdrant server applies, by name."""
        fields = ("qdrant_wal_capacity_mb", "qdrant_shard_number", "qdrant_replication_factor",
                  "qdrant_write_consistency_factor")
        return {name.upper(): value for name in fields if (value := getattr(self, name)) is not None}

    @property
    def embedded_max_segment_kb(self) -> int:
        """embedded_max_segment_mb in the engine's unit."""
        return self.embedded_max_segment_mb * 1000

    @property
    def embedded_merged_segment_kb(self) -> int:
        """embedded_merged_segment_mb in the engine's unit."""
        return self.embedded_merged_segment_mb * 1000

    @property
    def search_threads(self) -> int:
        """The embedded store's search threads per collection, 0 resolved to the CPUs available."""
        return self.embedded_search_threads or available_cpus()

    @property
    def backend(self) -> Literal["server", "embedded"]:
        return "server" if (self.qdrant_url or self.qdrant_local_path) else "embedded"

    @property
    def embedded_path(self) -> Path:
        return self.alexandria_data_dir / "store"


class ClientSettings(BaseModel):
    """Deadlines and retries for every gRPC call a process makes: constants, which tests shorten."""

    rpc_timeout_s: float = Field(15.0, gt=0)
    embed_timeout_s: float = Field(300.0, gt=0)
    long_rpc_timeout_s: float = Field(6 * 3600.0, gt=0)
    # A streaming call (an ingest, a sync of 10,000 books that takes a day on a CPU, a reindex) has no deadline:
    # it fails only when its service sends nothing for this long (each reports its progress far more often).
    stream_idle_s: float = Field(3600.0, gt=0)
    rpc_retry_attempts: int = Field(4, ge=1)
    # A large model on a cold GPU node can take minutes to load before the embedder serves.
    embedder_start_wait_s: float = Field(600.0, gt=0)
    embed_stream_chunk: int = Field(512, ge=1, le=4096)


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
    alexandria_offline: bool = Field(False, description="Never touch the network: a model named by hub id must "
                                     "be fetched already (`alexandria models pull`).")

    _endpoint = field_validator("hf_endpoint", mode="before")(_http_url)
    _token = field_validator("hf_token", mode="before")(_not_blank)

    @property
    def may_fetch(self) -> bool:
        return not self.alexandria_offline


class EmbedderSettings(_Env):
    embedder_profile: EmbedderProfile = Field(
        "auto", description="Model, backend and precision by name: auto, fast, best, multilingual, gpu or "
        "baseline (docs/models.md); EMBEDDER_MODEL, EMBEDDER_BACKEND and EMBEDDER_QUANTIZE override its parts."
    )
    embedder_model: str | None = Field(
        None, description="A Hugging Face model id (BAAI/bge-m3), a folder, or a package; default: the profile's."
    )
    embedder_backend: EmbedderBackend | None = Field(
        None, description="torch, onnx or openvino; default: the profile's."
    )
    embedder_quantize: EmbedderQuantize | None = Field(
        None, description="none, int8 (torch, onnx) or bf16 (openvino); default: the profile's."
    )
    embedder_device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto, cpu or cuda.")
    embedder_reranker_model: str | None = Field(
        None, description="A cross-encoder's Hugging Face id (BAAI/bge-reranker-v2-m3), folder or package; "
        "unset: no reranker."
    )
    embedder_models_dir: Path = Field(DEFAULT_MODELS_DIR, description="Where models fetched by name and graphs "
                                      "exported from models are kept.")
    embedder_threads: int = Field(0, ge=0, description="CPU threads for the model; 0: the backend's default.")
    hub: HubSettings = Field(default_factory=HubSettings)

    embedder_listen: str = fixed(DEFAULT_ADDRESSES["embedder"], "Where the embedder listens (`python -m services "
                                 "embedder --listen`).")
    embedder_max_batch: int = fixed(64, "Texts in one forward pass at most.", ge=1, le=4096)
    embedder_batch_wait_ms: float | None = fixed(
        None, "During a burst, how long a batch waits for the next caller; None: the fixed cost of a forward "
        "pass, measured at start-up (what a shared pass saves).", ge=0, le=100)
    embedder_queue_limit: int = fixed(20000, "Texts waiting at once in each lane (queries, passages) before "
                                      "RESOURCE_EXHAUSTED.", ge=1)

    _blank = field_validator("embedder_model", "embedder_reranker_model", "embedder_models_dir",
                             mode="before")(_not_blank)
    _listen = field_validator("embedder_listen", mode="before")(_grpc_target)


class CatalogSettings(_Env):
    calibre_library_path: Path | None = Field(None, description="The Calibre library (the folder holding "
                                              "metadata.db); unset: the project's sample library.")
    catalog_recheck_interval_s: float = Field(1.0, gt=0, description="Advanced: how often, at most, metadata.db "
                                              "is looked at for Calibre's changes (and read again while it "
                                              "cannot be read).")
    store: StoreSettings = Field(default_factory=StoreSettings)

    catalog_listen: str = fixed(DEFAULT_ADDRESSES["catalog"], "Where the catalog listens (`--listen`).")

    _blank = field_validator("calibre_library_path", mode="before")(_not_blank)
    _listen = field_validator("catalog_listen", mode="before")(_grpc_target)


class IngestSettings(AddressSettings):
    local_ingest_path: Path | None = Field(None, description="A folder of loose files (EPUB, PDF, TXT, "
                                           "Markdown, HTML) that alexandria_ingest_local may read.")
    local_ingest_extra_roots: list[Path] = Field(
        default_factory=list, description="More folders alexandria_ingest_local may read: a JSON list or "
        "comma-separated paths.")
    ingest_max_file_mb: float = Field(200.0, gt=0, description="The largest book file read, in MB.")
    tessdata_prefix: Path | None = Field(None, description="Tesseract's language data for OCR of scanned "
                                         "pages; unset: the first system folder with English.")
    auto_sync: bool = Field(True, description="Keep the collection in step with the Calibre library: a sync "
                            "runs after each change to metadata.db, once the library is quiet.")
    auto_sync_quiet_s: float = Field(5.0, ge=0, description="How long metadata.db must be quiet before the "
                                     "automatic sync runs.")
    store: StoreSettings = Field(default_factory=StoreSettings)
    clients: ClientSettings = Field(default_factory=ClientSettings)

    ingest_listen: str = fixed(DEFAULT_ADDRESSES["ingest"], "Where the ingest service listens (`--listen`).")
    # Scanned PDF pages are read by OCR (about a second or two a page on a CPU core).
    ingest_ocr_max_pages: int = fixed(1000, "A book with more scanned pages than this is refused.", ge=1)
    ingest_ocr_cache_mb: float = fixed(
        512.0, "What OCR read of each page is kept under ALEXANDRIA_DATA_DIR/ocr (about 4 KB a page); past "
        "this size the books read longest ago are dropped; 0: nothing is kept.", ge=0)
    auto_sync_poll_s: float = fixed(1.0, "How often the automatic sync asks the catalog whether the library "
                                    "changed.", gt=0)

    _blank = field_validator("local_ingest_path", "tessdata_prefix", mode="before")(_not_blank)
    _roots = field_validator("local_ingest_extra_roots", mode="before")(_comma_list)
    _listen = field_validator("ingest_listen", mode="before")(_grpc_target)


class QuerySettings(AddressSettings):
    guardians_dir: Path = Field(REPO_ROOT / "guardians", description="The guardian persona files, and their "
                                "response_patterns.yaml.")
    default_guardian: str = Field("zec", description="The guardian that flavours an answer when a query names "
                                  "none.", pattern=r"^[A-Za-z0-9_-]+$")
    # Where the folders this service's books were read from sit on the machine that opens the links of results
    # (a container's mounts); a folder not named is that machine's too.
    link_paths: dict[PurePosixPath, PurePath] = Field(
        default_factory=dict, description='Where the served folders sit on the machine that opens the links, as '
        'JSON: {"/library": "/home/me/Calibre Library"}.')
    store: StoreSettings = Field(default_factory=StoreSettings)
    clients: ClientSettings = Field(default_factory=ClientSettings)

    query_listen: str = fixed(DEFAULT_ADDRESSES["query"], "Where the query service listens (`--listen`).")
    # ~25k tokens is what MCP clients accept from one tool; 4 characters a token, with headroom.
    query_response_budget_chars: int = fixed(80_000, "The most characters one query's answer holds.", ge=4_000)

    _blank = field_validator("guardians_dir", mode="before")(_not_blank)
    _listen = field_validator("query_listen", mode="before")(_grpc_target)

    @property
    def response_patterns_file(self) -> Path:
        return self.guardians_dir / "response_patterns.yaml"

    @field_validator("link_paths", mode="before")
    @classmethod
    def _absolute_link_paths(cls, value: object) -> object:
        if not isinstance(value, dict):
            if isinstance(value, str):
                # pydantic reports a ValueError as the field's validation error, naming the variable
                raise ValueError('a JSON object of absolute paths, {"/library": "/home/me/Calibre Library"}')  # noqa: TRY004
            return value
        paths: dict[PurePosixPath, PurePath] = {}
        for served, seen in value.items():
            windows = PureWindowsPath(str(seen))
            reader_path = windows if windows.drive else PurePosixPath(str(seen))
            if not PurePosixPath(str(served)).is_absolute() or not reader_path.is_absolute():
                raise ValueError(f"both paths absolute ({served!r} -> {seen!r}), the second as the machine that "
                                 "opens the links writes it: /home/me/... or C:\\...")
            paths[PurePosixPath(str(served))] = reader_path
        return paths


Scope = Literal["read", "ingest"]


class GatewaySettings(AddressSettings):
    gateway_host: str = Field("127.0.0.1", description="Where the HTTP gateway listens; beyond loopback it "
                              "needs GATEWAY_TOKENS.", pattern=r"^[^\s/]+$")
    gateway_port: int = Field(8765, ge=0, le=65535, description="The HTTP gateway's port; 0: any free one.")
    gateway_allowed_hosts: list[str] = Field(
        default_factory=list, description="Host headers the HTTP gateway accepts besides its own address "
        "(a reverse proxy's name): a JSON list or comma-separated.")
    gateway_tokens: dict[str, list[Scope]] = Field(
        default_factory=dict, description='Bearer tokens and their scopes, as JSON: {"<token>": ["read", '
        '"ingest"]}; required when binding beyond loopback.')
    query_sampling: bool = Field(False, description="Ask a client that offers MCP sampling to write the "
                                 "hypothetical passage a query came without (most clients ask their user first).")
    gateway_shutdown_grace_s: float = Field(30.0, ge=0, description="Advanced: on SIGINT/SIGTERM, how long "
                                            "running tool calls (an ingest) may take to finish.")
    clients: ClientSettings = Field(default_factory=ClientSettings)

    gateway_max_body_bytes: int = fixed(256 * 1024, "The largest HTTP request body.", ge=1024)
    gateway_max_arg_chars: int = fixed(4096, "The longest string argument of a tool call.", ge=64)
    query_sampling_timeout_s: float = fixed(5.0, "How long a query waits for the client's model.", gt=0, le=60)

    _hosts = field_validator("gateway_allowed_hosts", mode="before")(_comma_list)

    @field_validator("gateway_tokens", mode="before")
    @classmethod
    def _tokens_as_json(cls, value: object) -> object:
        if isinstance(value, str):
            raise ValueError('a JSON object of token to scopes, {"<token>": ["read", "ingest"]}')  # noqa: TRY004
        return value


# Every class whose fields the environment sets, in the order docs/configuration.md lists them.
SETTINGS_CLASSES: tuple[type[_Env], ...] = (
    CommonSettings, CatalogSettings, IngestSettings, EmbedderSettings, HubSettings, StoreSettings,
    QuerySettings, GatewaySettings, AddressSettings,
)


def environment_settings() -> Iterator[tuple[str, type[_Env], FieldInfo]]:
    """Each environment variable once, with the class that declares it and its field."""
    seen: set[str] = set()
    for cls in SETTINGS_CLASSES:
        for name, info in cls.model_fields.items():
            if name in seen or not is_environment_setting(info):
                continue
            declaring = next(base for base in reversed(cls.__mro__) if name in getattr(base, "__annotations__", {}))
            seen.add(name)
            yield name.upper(), declaring, info


def settings_problems() -> list[str]:
    """Every setting in the environment that some process of the stack would refuse, a line each naming the
    variable, its value and what it accepts: read once before anything starts, so the user sees one message."""
    problems: dict[str, None] = {}
    every_class: tuple[type[_Env], ...] = (*SETTINGS_CLASSES, StackSettings)
    for settings in every_class:
        try:
            settings()
        except ValidationError as invalid:
            for error in invalid.errors():
                variable = str(error["loc"][0]).upper()
                value = os.environ.get(variable, os.environ.get(variable.lower()))
                accepts = error["msg"].removeprefix("Value error, ").removeprefix("Input should be ")
                if error["type"] == "string_pattern_mismatch":
                    accepts = f"text matching {error.get('ctx', {}).get('pattern')}"
                problems[f"{variable}={value!r}: should be {accepts}"] = None
        except SettingsError as unreadable:
            problems[str(unreadable)] = None
    return list(problems)


def refuse_bad_settings() -> None:
    """Exit 2 before anything starts when some setting in the environment cannot work, saying in a few lines on
    stderr which, and what each accepts."""
    problems = settings_problems()
    if problems:
        print("error: these settings cannot work:\n  " + "\n  ".join(problems)
              + "\nFix or unset them (docs/configuration.md), then run the command again.", file=sys.stderr)
        sys.exit(2)
