"""Models by their Hugging Face names: fetched once into EMBEDDER_MODELS_DIR, then loaded offline.

A model named by its hub id (`BAAI/bge-m3`) lives in `<EMBEDDER_MODELS_DIR>/BAAI--bge-m3/`, beside a manifest
(`alexandria-model.json`) recording the revision it was fetched at (the commit the requested branch or tag
pointed to) and each file's size and sha256. The embedder loads it from there with no network, and refuses a
folder whose files no longer match the manifest.

Fetching speaks the hub's HTTP API, as huggingface_hub does (`/api/models/<id>/revision/<rev>?blobs=true`
lists a commit's files with their sizes, and the sha256 of the large ones; `/<id>/resolve/<commit>/<path>`
serves each file, through a redirect for large ones), but by our own code: huggingface_hub resumes a download
only within one call (a cut connection, from its last whole 10 MiB), never after the process was stopped, and
checks no checksum. Here each file is written to `<folder>.download-<commit>/<path>.part` and resumed from its last byte
with a Range request, by the same call after a cut connection and by the next one after an interruption; each
finished file is checked against the hub's sha256 (large files) or git blob id (the others) before it counts;
and the model's folder appears whole, by renames, only once every file has checked.

Only what loading needs is fetched: other frameworks' weights (TensorFlow, Flax, Rust, ONNX, OpenVINO, Core
ML), pictures, and PyTorch `.bin` weights where the same folder has safetensors are left on the hub.
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import json
import logging
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

import httpx

from alexandria.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from alexandria.settings import HubSettings

log = logging.getLogger(__name__)

# What follows a model's folder name in the name of a pull's staging folder: `.download-<commit>`, or `.download`
# alone as releases before this one named it. Nothing else: a hub name may hold dots (`org/m.download-x`).
_STAGING = re.compile(r"\.download(-[0-9a-f]{40})?")

MANIFEST = "alexandria-model.json"
# An organisation or user, a slash, a repository: the hub's own rule for names.
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
_LEFT_ON_THE_HUB = ("*.h5", "*.msgpack", "*.ot", "*.onnx", "*.onnx_data", "*.tflite", "*.mlmodel", "*.mlpackage/*",
                    "onnx/*", "openvino/*", "coreml/*", "*.png", "*.jpg", "*.jpeg", "*.gif", "*.svg", ".gitattributes")
_READ_BYTES = 1 << 20
# Tries of one file within a call: each resumes where the previous stopped, so progress is never lost.
FILE_ATTEMPTS = 5
RETRY_WAIT_S = 0.5  # before the second try; doubled for each next one
OFFLINE = ("ALEXANDRIA_OFFLINE is set, so Alexandria never touches the network: fetch {model} on a machine that "
           "can reach the hub ({command}) and copy {folder} here, or unset ALEXANDRIA_OFFLINE.")

Progress = Callable[[int, int, str], None]  # bytes done, bytes in all, the file being fetched


def is_hub_id(spec: str) -> bool:
    """Whether `spec` names a model by its hub id (and is not a folder that exists here)."""
    return bool(_HUB_ID.fullmatch(spec)) and not Path(spec).expanduser().exists()


def hub_folder(models_dir: Path, model_id: str) -> Path:
    return models_dir / model_id.replace("/", "--")


def pull_command(model_id: str, revision: str | None = None) -> str:
    return f"alexandria models pull {model_id}" + (f" --revision {revision}" if revision not in (None, "main") else "")


@dataclass(frozen=True)
class HubFile:
    """A file of a commit, as the hub lists it: `sha256` for a large (LFS) file, else the git blob id."""

    path: str
    size: int
    sha256: str | None
    blob_id: str

    def checks(self, sha256: str, blob_id: str) -> bool:
        return sha256 == self.sha256 if self.sha256 else blob_id == self.blob_id


@dataclass(frozen=True)
class InstalledFile:
    size: int
    sha256: str
    mtime_ns: int  # when the fetch wrote it: a file that has kept its time and size is not read again


@dataclass(frozen=True)
class Manifest:
    """What `alexandria models pull` fetched: the model, the revision asked for and the commit it resolved to."""

    model_id: str
    revision: str  # the commit (40 hex)
    requested: str  # the branch, tag or commit asked for
    fetched_at: str
    files: dict[str, InstalledFile]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files.values())

    def write(self, folder: Path) -> None:
        (folder / MANIFEST).write_text(json.dumps(asdict(self), indent=1, sort_keys=True))

    @classmethod
    def read(cls, folder: Path) -> Manifest | None:
        try:
            raw: dict[str, Any] = json.loads((folder / MANIFEST).read_text())
            return cls(str(raw["model_id"]), str(raw["revision"]), str(raw["requested"]), str(raw["fetched_at"]),
                       {path: InstalledFile(**entry) for path, entry in raw["files"].items()})
        except FileNotFoundError:
            return None
        except (ValueError, TypeError, KeyError) as exc:
            raise FailedPrecondition(f"{folder / MANIFEST} is unreadable ({exc}); fetch the model again.") from None


def file_digests(path: Path) -> tuple[str, str]:
    """The file's sha256 and its git blob id (the sha1 git names its content by)."""
    sha256, blob = hashlib.sha256(), hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as handle:
        while block := handle.read(_READ_BYTES):
            sha256.update(block)
            blob.update(block)
    return sha256.hexdigest(), blob.hexdigest()


def wanted_files(files: list[HubFile]) -> list[HubFile]:
    """The files loading needs (module docstring)."""
    with_safetensors = {str(PurePosixPath(f.path).parent) for f in files if f.path.endswith(".safetensors")}
    return [
        f for f in files
        if not any(fnmatch.fnmatch(f.path, pattern) for pattern in _LEFT_ON_THE_HUB)
        and not (f.path.endswith(".bin") and str(PurePosixPath(f.path).parent) in with_safetensors)
    ]


def verify_installed(folder: Path, model_id: str) -> Manifest:
    """The manifest of an installed model once its files match it; FailedPrecondition naming the first that does
    not, and the command that fetches the model again. A file that kept its size and time is taken as is."""
    manifest = Manifest.read(folder)
    if manifest is None:
        raise FailedPrecondition(f"{folder} has no {MANIFEST}: it was not fetched by `{pull_command(model_id)}`; "
                                 "fetch it with that command, or name the folder itself.")
    for name, recorded in sorted(manifest.files.items()):
        path = folder / name
        problem = ""
        if not path.is_file():
            problem = "is missing"
        elif (stat := path.stat()).st_size != recorded.size:
            problem = f"has {stat.st_size:,} bytes, not the {recorded.size:,} fetched"
        elif stat.st_mtime_ns != recorded.mtime_ns and file_digests(path)[0] != recorded.sha256:
            problem = "was changed since it was fetched (its sha256 differs)"
        if problem:
            raise FailedPrecondition(
                f"The model {model_id} in {folder} no longer matches what was fetched: {name} {problem}. Fetch it "
                f"again with `{pull_command(model_id, manifest.requested)}`."
            )
    return manifest


class Hub:
    """The hub's HTTP API, as far as fetching a model needs it."""

    def __init__(self, settings: HubSettings, timeout_s: float = 30.0) -> None:
        headers = {"user-agent": "alexandria"}
        if settings.hf_token is not None and settings.hf_token.get_secret_value():
            headers["authorization"] = f"Bearer {settings.hf_token.get_secret_value()}"
        self.endpoint = settings.hf_endpoint.rstrip("/")
        self._client = httpx.Client(base_url=self.endpoint, headers=headers, follow_redirects=True,
                                    timeout=httpx.Timeout(timeout_s))

    def close(self) -> None:
        self._client.close()

    def commit(self, model_id: str, revision: str) -> tuple[str, list[HubFile]]:
        """The commit `revision` names, and its files."""
        try:
            response = self._client.get(f"/api/models/{model_id}/revision/{quote(revision, safe='')}",
                                        params={"blobs": "true"})
        except httpx.HTTPError as exc:
            raise Unavailable(f"The model hub at {self.endpoint} did not answer ({exc}); check the network, or "
                              "HF_ENDPOINT.") from None
        if response.status_code in (401, 403):
            raise FailedPrecondition(f"The hub refused {model_id} ({response.status_code}): a gated or private model "
                                     "needs HF_TOKEN, a token of an account that was granted access.")
        if response.status_code == 404:
            what = ("revision " + revision + " of " if response.headers.get("x-error-code") == "RevisionNotFound"
                    else "")
            raise NotFound(f"The hub at {self.endpoint} has no {what}{model_id}; check the name on the hub.")
        if response.status_code != 200:
            raise Unavailable(f"The hub at {self.endpoint} answered {response.status_code} for {model_id}; try again.")
        info = response.json()
        files = [HubFile(s["rfilename"], int(s.get("size") or (s.get("lfs") or {}).get("size") or 0),
                         (s.get("lfs") or {}).get("sha256"), str(s.get("blobId") or ""))
                 for s in info.get("siblings", [])]
        return str(info["sha"]), files

    def download(self, model_id: str, commit: str, file: HubFile, part: Path, progress: Callable[[int], None]) -> None:
        """`file` into `part`, resumed from what `part` holds; raises httpx errors when the connection breaks."""
        have = part.stat().st_size if part.exists() else 0
        if have >= file.size > 0:
            return
        headers = {"range": f"bytes={have}-"} if have else {}
        url = f"/{model_id}/resolve/{commit}/{quote(file.path)}"
        with self._client.stream("GET", url, headers=headers) as response:
            if response.status_code == 200 and have:  # the server ignored the range: start again
                have = 0
            elif response.status_code not in (200, 206):
                raise Unavailable(f"The hub answered {response.status_code} for {file.path} of {model_id}; try again.")
            with part.open("ab" if have else "wb") as out:
                for block in response.iter_bytes():  # as it arrives: a cut loses nothing that came
                    out.write(block)
                    progress(len(block))


def pull(model_id: str, models_dir: Path, settings: HubSettings, revision: str = "main",
         progress: Progress | None = None) -> tuple[Path, bool]:
    """Fetch `model_id` at `revision` into `models_dir` (module docstring). Returns its folder, and whether it
    was fetched now (False: that commit was installed already and still matches; offline, the revision as it was
    asked for and installed, which the hub may have moved on from since)."""
    if not is_hub_id(model_id):
        raise InvalidArgument(f"{model_id!r} is not a hub model id (an organisation, a slash and a name, such as "
                              "BAAI/bge-m3).")
    folder = hub_folder(models_dir, model_id)
    if settings.alexandria_offline:
        installed = Manifest.read(folder) if folder.is_dir() else None
        if installed is not None and revision in (installed.requested, installed.revision):
            verify_installed(folder, model_id)  # what the user would otherwise be told to copy here is here
            return folder, False
        raise FailedPrecondition(OFFLINE.format(model=model_id, command=pull_command(model_id), folder=folder))
    hub = Hub(settings)
    try:
        commit, listed = hub.commit(model_id, revision)
        try:
            installed = Manifest.read(folder) if folder.is_dir() else None
            if installed is not None and installed.revision == commit:
                verify_installed(folder, model_id)
                return folder, False
        except FailedPrecondition as damaged:  # what its message asks for: this pull
            log.warning("%s; fetching it again", damaged.message)
        files = wanted_files(listed)
        # One folder a commit: the files an interrupted pull checked are kept for the same commit alone, and a pull
        # of another (the branch moved on, another --revision) starts clean.
        staging = folder.with_name(f"{folder.name}.download-{commit}")
        for other in folder.parent.glob(f"{glob.escape(folder.name)}.download*"):
            if other != staging and _STAGING.fullmatch(other.name[len(folder.name):]):
                shutil.rmtree(other, ignore_errors=True)
        total = sum(f.size for f in files)
        done = 0

        entries = {}
        for file in files:
            def advance(count: int, name: str = file.path) -> None:
                nonlocal done
                done += count
                if progress is not None:
                    progress(done, total, name)

            target = staging / file.path
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.is_file():  # a file checked by an earlier, interrupted pull is kept
                _fetch_file(hub, model_id, commit, file, target, advance)
            else:
                advance(file.size)
            stat = target.stat()
            entries[file.path] = InstalledFile(stat.st_size, file_digests(target)[0], stat.st_mtime_ns)
        Manifest(model_id, commit, revision, datetime.now(UTC).isoformat(timespec="seconds"), entries).write(staging)
        _swap_in(staging, folder)
        return folder, True
    finally:
        hub.close()


def _fetch_file(hub: Hub, model_id: str, commit: str, file: HubFile, target: Path,
                advance: Callable[[int], None]) -> None:
    """One file into `target`, by way of `target`.part, checked before it is renamed into place."""
    part = target.with_name(target.name + ".part")
    if part.exists():
        advance(part.stat().st_size)
    for attempt in range(1, FILE_ATTEMPTS + 1):
        try:
            hub.download(model_id, commit, file, part, advance)
            break
        except httpx.HTTPError as exc:
            log.warning("fetching %s of %s broke off (%s); resuming (%d of %d)", file.path, model_id, exc, attempt,
                        FILE_ATTEMPTS)
            if attempt == FILE_ATTEMPTS:
                raise Unavailable(
                    f"Fetching {file.path} of {model_id} broke off {FILE_ATTEMPTS} times ({exc}); what arrived is "
                    f"kept: run `{pull_command(model_id)}` again to resume."
                ) from None
            time.sleep(RETRY_WAIT_S * 2 ** (attempt - 1))
    sha256, blob_id = file_digests(part)
    received = part.stat().st_size
    if received != file.size or not file.checks(sha256, blob_id):
        part.unlink()
        expected = f"sha256 {file.sha256}" if file.sha256 else f"git blob {file.blob_id}"
        got = f"sha256 {sha256}" if file.sha256 else f"git blob {blob_id}"
        raise FailedPrecondition(
            f"{file.path} of {model_id} does not match the hub's checksum (listed: {expected}, {file.size:,} bytes; "
            f"received: {got}, {received:,} bytes): it was deleted and nothing was installed. Run the pull again; "
            "if it fails the same way, the hub or a proxy on the way serves other bytes than it lists."
        )
    part.rename(target)


def _swap_in(staging: Path, folder: Path) -> None:
    """Put the fetched folder in place of the installed one (if any), keeping one or the other whole."""
    old = folder.with_name(folder.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        folder.rename(old)
    staging.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
