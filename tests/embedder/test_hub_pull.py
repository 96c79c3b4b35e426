"""Models by their hub names (services/embedder/hub.py, model_folder.py), fetched from a hub the test starts on
127.0.0.1 (tests/fixtures/hub_server.py) in the hub's own layout: the model the tests load anyway, and a small
cross-encoder with random weights. No network beyond that server is touched."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.hub_server import LocalHub
from fixtures.tiny_cross_encoder import build_tiny_cross_encoder

from alexandria.errors import FailedPrecondition, NotFound, Unavailable
from alexandria.settings import EmbedderSettings, HubSettings
from services.embedder import hub, model_folder
from services.embedder.hub import MANIFEST, Manifest, hub_folder, pull, verify_installed
from services.embedder.model_folder import check_fits, check_role, read_facts, resolve_model_source
from services.embedder.profiles import resolve_profile

pytestmark = pytest.mark.timeout(120)

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
RERANKER = "cross-encoder/tiny-random-reranker"
WEIGHTS = "model.safetensors"


@pytest.fixture(scope="module")
def minilm() -> Path:
    return resolve_model_source(None).path


@pytest.fixture
def local_hub(minilm: Path) -> Iterator[LocalHub]:
    with LocalHub() as served:
        served.add_model(MODEL, minilm)
        yield served


def online(local_hub: LocalHub) -> HubSettings:
    return HubSettings(hf_endpoint=local_hub.endpoint, alexandria_offline=False)


def same_files(fetched: Path, original: Path) -> None:
    """Every file of `original` that loading needs (not git's .gitattributes) arrived, byte for byte."""
    sources = {str(p.relative_to(original)): p for p in original.rglob("*") if p.is_file()}
    sources.pop(".gitattributes")
    assert sorted(Manifest.read(fetched).files) == sorted(sources)  # type: ignore[union-attr]
    for name, source in sources.items():
        assert (fetched / name).read_bytes() == source.read_bytes(), name


def test_a_pull_installs_the_model_whole_with_its_revision_and_checksums(local_hub: LocalHub, minilm: Path,
                                                                         tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    folder, fetched = pull(MODEL, tmp_path, online(local_hub), progress=lambda done, total, _: seen.append((done, total)))
    assert fetched and folder == hub_folder(tmp_path, MODEL) == tmp_path / "sentence-transformers--all-MiniLM-L6-v2"
    same_files(folder, minilm)
    manifest = verify_installed(folder, MODEL)
    assert manifest.revision == local_hub.commit(MODEL).sha and manifest.requested == "main"
    assert manifest.files[WEIGHTS].sha256 == local_hub.file(MODEL, WEIGHTS).sha256
    assert seen[-1][0] == seen[-1][1] == manifest.size  # the progress reached the whole
    assert not list(tmp_path.glob("sentence-transformers--all-MiniLM-L6-v2.download*"))
    # The embedder finds it by name, with what it needs read from the folder itself.
    assert resolve_model_source(MODEL, models_dir=tmp_path).name == MODEL
    facts = read_facts(folder)
    assert (facts.kind, facts.dimensions, facts.max_tokens) == ("embedder", 384, 256)

    local_hub.clear_log()
    assert pull(MODEL, tmp_path, online(local_hub))[1] is False  # that commit is there: nothing is fetched again
    assert not [path for _, path in local_hub.requests if "/resolve/" in path]


def test_a_revision_is_pinned_and_a_newer_one_replaces_it(local_hub: LocalHub, minilm: Path, tmp_path: Path) -> None:
    first = local_hub.commit(MODEL).sha
    local_hub.add_model(MODEL, {**{p.name: p.read_bytes() for p in minilm.iterdir() if p.is_file()},
                                "README.md": b"# a newer revision\n"})
    folder, _ = pull(MODEL, tmp_path, online(local_hub), revision=first)
    assert Manifest.read(folder).revision == first  # type: ignore[union-attr]
    assert (folder / "README.md").read_bytes() == (minilm / "README.md").read_bytes()
    pull(MODEL, tmp_path, online(local_hub))
    assert Manifest.read(folder).revision == local_hub.commit(MODEL).sha != first  # type: ignore[union-attr]
    assert (folder / "README.md").read_bytes() == b"# a newer revision\n"
    with pytest.raises(NotFound, match="no revision v9 of"):
        pull(MODEL, tmp_path, online(local_hub), revision="v9")
    with pytest.raises(NotFound, match="has no BAAI/no-such-model"):
        pull("BAAI/no-such-model", tmp_path, online(local_hub))


def test_a_cut_connection_resumes_within_the_pull_and_after_it(local_hub: LocalHub, minilm: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub, "RETRY_WAIT_S", 0.0)
    local_hub.cut_once(MODEL, WEIGHTS, 5_000_000)
    folder, _ = pull(MODEL, tmp_path / "within", online(local_hub))
    same_files(folder, minilm)
    assert "bytes=5000000-" in [r.range for r in local_hub.log], "the second try asked for the rest only"

    for _ in range(hub.FILE_ATTEMPTS):  # every try of one pull breaks off: the pull stops, keeping what came
        local_hub.cut_once(MODEL, WEIGHTS, 3_000_000)
    with pytest.raises(Unavailable, match="run `alexandria models pull .*` again to resume"):
        pull(MODEL, tmp_path / "after", online(local_hub))
    (staging,) = (tmp_path / "after").glob("sentence-transformers--all-MiniLM-L6-v2.download-*")
    part = staging / f"{WEIGHTS}.part"
    kept = part.stat().st_size
    assert kept >= 3_000_000 and not hub_folder(tmp_path / "after", MODEL).exists()
    local_hub.clear_log()
    folder, _ = pull(MODEL, tmp_path / "after", online(local_hub))
    same_files(folder, minilm)
    assert next(r.range for r in local_hub.log if r.path.endswith(WEIGHTS) and r.method == "GET") == f"bytes={kept}-"


def test_bytes_that_do_not_match_the_hubs_checksum_are_refused_and_nothing_is_installed(
    local_hub: LocalHub, tmp_path: Path
) -> None:
    local_hub.serve_wrong_bytes(MODEL, WEIGHTS)
    with pytest.raises(FailedPrecondition, match=f"{WEIGHTS} of {MODEL} does not match the hub's checksum"):
        pull(MODEL, tmp_path, online(local_hub))
    assert not hub_folder(tmp_path, MODEL).exists()
    assert not list(tmp_path.rglob(f"{WEIGHTS}*")), "the bad bytes are deleted"


def test_a_fetched_folder_whose_files_changed_is_refused(local_hub: LocalHub, tmp_path: Path) -> None:
    folder, _ = pull(MODEL, tmp_path, online(local_hub))
    weights = folder / WEIGHTS
    data = bytearray(weights.read_bytes())
    data[1000] ^= 1
    weights.write_bytes(bytes(data))
    with pytest.raises(FailedPrecondition, match=f"{WEIGHTS} was changed since it was fetched.*models pull {MODEL}"):
        resolve_model_source(MODEL, models_dir=tmp_path)
    data[1000] ^= 1
    weights.write_bytes(bytes(data))  # the same bytes again, at another time: read, found to match
    verify_installed(folder, MODEL)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(FailedPrecondition, match="tokenizer.json is missing"):
        verify_installed(folder, MODEL)
    assert pull(MODEL, tmp_path, online(local_hub)) == (folder, True), "the pull the message asks for mends it"
    verify_installed(folder, MODEL)


def test_a_pull_stopped_midway_leaves_nothing_to_a_pull_of_another_revision(
    local_hub: LocalHub, minilm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hub, "RETRY_WAIT_S", 0.0)
    for _ in range(hub.FILE_ATTEMPTS):  # the weights never come: the files checked before them stay in staging
        local_hub.cut_once(MODEL, WEIGHTS, 3_000_000)
    with pytest.raises(Unavailable):
        pull(MODEL, tmp_path, online(local_hub))
    # The branch moves on before the pull is run again: the files the first checked are of the old commit.
    local_hub.add_model(MODEL, {**{p.name: p.read_bytes() for p in minilm.iterdir() if p.is_file()},
                                "README.md": b"# a newer revision\n"})
    another_model = hub_folder(tmp_path, MODEL + ".download-x")  # a hub name may hold dots
    another_model.mkdir()
    folder, fetched = pull(MODEL, tmp_path, online(local_hub))
    assert fetched and (folder / "README.md").read_bytes() == b"# a newer revision\n"
    assert Manifest.read(folder).revision == local_hub.commit(MODEL).sha  # type: ignore[union-attr]
    verify_installed(folder, MODEL)
    assert list(tmp_path.glob("*.download*")) == [another_model], "the old commit's staging is gone, nothing else"


def test_offline_nothing_touches_the_network_and_the_message_says_why(local_hub: LocalHub, tmp_path: Path) -> None:
    offline = HubSettings(hf_endpoint=local_hub.endpoint, alexandria_offline=True)
    with pytest.raises(FailedPrecondition, match="ALEXANDRIA_OFFLINE is set"):
        pull(MODEL, tmp_path, offline)
    assert local_hub.requests == []
    with pytest.raises(FailedPrecondition, match=f"not in {tmp_path}: fetch it once with `alexandria models pull"):
        resolve_model_source(MODEL, models_dir=tmp_path)


def test_offline_a_model_installed_and_intact_is_there(local_hub: LocalHub, tmp_path: Path) -> None:
    folder, _ = pull(MODEL, tmp_path, online(local_hub))
    asked = len(local_hub.requests)
    offline = HubSettings(hf_endpoint=local_hub.endpoint, alexandria_offline=True)
    assert pull(MODEL, tmp_path, offline) == (folder, False)
    assert len(local_hub.requests) == asked
    with pytest.raises(FailedPrecondition, match="ALEXANDRIA_OFFLINE is set"):  # another revision than installed
        pull(MODEL, tmp_path, offline, revision="v2")
    with (folder / "config.json").open("a") as config:
        config.write(" ")
    with pytest.raises(FailedPrecondition, match="no longer matches what was fetched: config.json has"):
        pull(MODEL, tmp_path, offline)


def test_a_model_is_refused_for_a_role_it_cannot_play_before_it_loads(minilm: Path, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    cross_encoder = build_tiny_cross_encoder(tmp_path / "ce")
    with pytest.raises(FailedPrecondition, match="a cross-encoder \\(reranker\\), not an embedding model: name it "
                                                 "as EMBEDDER_RERANKER_MODEL"):
        check_role(cross_encoder, "embedder", "EMBEDDER_MODEL")
    with pytest.raises(FailedPrecondition, match="a sentence-transformers embedding model, not a cross-encoder"):
        check_role(minilm, "reranker", "EMBEDDER_RERANKER_MODEL")
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text('{"architectures": ["BertModel"], "hidden_size": 384}')
    with pytest.raises(FailedPrecondition, match="without a sentence-transformers configuration"):
        check_role(bare, "embedder", "EMBEDDER_MODEL")
    assert check_role(cross_encoder, "reranker", "EMBEDDER_RERANKER_MODEL").labels == 1
    monkeypatch.setattr(model_folder, "available_memory_bytes", lambda: 50_000_000)
    with pytest.raises(FailedPrecondition, match="weights take 0.1 GiB; .* outgrows the memory available"):
        check_fits(minilm, read_facts(minilm), "cpu", "EMBEDDER_MODEL")


def test_the_gpu_profile_names_its_pair_by_hub_id_and_auto_takes_it_on_a_gpu_once_fetched(tmp_path: Path) -> None:
    settings = EmbedderSettings(embedder_profile="gpu", embedder_models_dir=tmp_path)
    choice = resolve_profile(settings, "cuda")
    assert (choice.model, choice.reranker, choice.backend) == ("BAAI/bge-m3", "BAAI/bge-reranker-v2-m3", "torch")
    auto = EmbedderSettings(embedder_models_dir=tmp_path)
    assert resolve_profile(auto, "cuda").profile == "best"  # not fetched yet
    for model_id in choice.hub_models:
        (hub_folder(tmp_path, model_id)).mkdir()
        (hub_folder(tmp_path, model_id) / MANIFEST).write_text("{}")
    assert resolve_profile(auto, "cuda").profile == "gpu" and resolve_profile(auto, "cpu").profile == "fast"


@pytest.mark.timeout(240)  # five `alexandria` processes, each importing the model libraries
def test_models_pull_and_list_from_a_terminal(local_hub: LocalHub, tmp_path: Path) -> None:
    reranker = build_tiny_cross_encoder(tmp_path / "ce")
    local_hub.add_model(RERANKER, reranker)
    env = {"EMBEDDER_MODELS_DIR": str(tmp_path / "models"), "HF_ENDPOINT": local_hub.endpoint,
           "ALEXANDRIA_OFFLINE": "0", "ALEXANDRIA_DATA_DIR": str(tmp_path / "var"), "PATH": "/usr/bin:/bin"}
    alexandria = str(Path(sys.executable).with_name("alexandria"))
    for model_id in (MODEL, RERANKER):
        pulled = subprocess.run([alexandria, "models", "pull", model_id], env=env, capture_output=True, text=True,
                                timeout=120, check=False)
        assert pulled.returncode == 0 and f"{model_id} fetched: revision" in pulled.stdout, pulled
        assert "100%" in pulled.stderr, pulled.stderr
        print(pulled.stderr.rsplit("\r", 1)[-1] + pulled.stdout)
    listed = subprocess.run([alexandria, "models", "list"], env=env, capture_output=True, text=True, timeout=60,
                            check=False)
    print(listed.stdout)
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["model", "kind", "size", "revision", "dims", "max", "tokens", "collections"]
    assert lines[1].split()[:2] == [RERANKER, "cross-encoder"] and lines[2].split()[:2] == [MODEL, "embedder"]
    assert lines[2].split()[5:7] == ["384", "256"]
    offline = subprocess.run([alexandria, "models", "pull", "BAAI/bge-m3"], env={**env, "ALEXANDRIA_OFFLINE": "1"},
                             capture_output=True, text=True, timeout=60, check=False)
    assert offline.returncode == 1 and "ALEXANDRIA_OFFLINE is set" in offline.stderr, offline
    there = subprocess.run([alexandria, "models", "pull", MODEL], env={**env, "ALEXANDRIA_OFFLINE": "1"},
                           capture_output=True, text=True, timeout=60, check=False)
    assert there.returncode == 0, there
    assert there.stdout.startswith(f"{MODEL} already installed and intact (ALEXANDRIA_OFFLINE is set: not compared "
                                   "with the hub's newest): revision "), there
