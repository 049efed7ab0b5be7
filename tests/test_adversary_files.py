"""An adversary's pass over "nothing a file says can take over" by someone who did not write it: the files of
a model or run folder that tests/test_untrusted_files.py does not plant, other formats read, other ways a path
can leave its folder, saves through links, readers during saves, and the error boundary. Each case is a row of
docs/bad_input.md's table "Files that are not to be trusted" (the test named after it)."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from minbert import BertModel, BertTokenizer, MinbertError, SentenceEncoder
from minbert.loading.adapter_files import load_adapter, save_adapter
from minbert.loading.atomic import DamagedFileError, verify_folder
from minbert.loading.checkpoint import CheckpointError, read_weights
from minbert.loading.files import FileContentError, read_json_object
from minbert.loading.sentence_files import read_settings
from minbert.loading.tokenizer_files import read_tokenizer_json
from minbert.lora import apply_lora
from tasks import sentiment
from tasks.data.sources import SAMPLE_DIR
from test_untrusted_files import run_sentiment, sentence_folder, stopped, stopped_run  # noqa: F401 - fixture

KEY = "embeddings.word_embeddings.weight"


def copy_of(tiny_model_dir: Path, folder: Path) -> Path:
    shutil.copytree(tiny_model_dir, folder)
    return folder


# ----- a sharded index's file names -------------------------------------------------------------------------


@pytest.mark.parametrize("shard, said", [
    ("", "which is a folder"), (".", "which is a folder"), ("sub", "which is a folder"),
    ("model.safetensors.index.json", "which is an index"), ("loop.safetensors", "which is a folder"),
    ("/etc/passwd", "expected a relative path"), ("sub/../../x.safetensors", "expected a relative path"),
    ("a\0b.safetensors", "expected a relative path"), ("out/x.safetensors", "a link that leads out of")])
def test_a_shard_name_that_is_no_weights_file_of_the_folder_is_refused_naming_the_index(tiny_model_dir,
                                                                                       tmp_path, shard, said):
    """A shard naming the folder, itself, a link back to the folder (a loop: it was a RecursionError), a path
    out, a NUL (a raw ValueError), or a file under a linked-out subfolder."""
    folder = copy_of(tiny_model_dir, tmp_path / "model")
    (folder / "sub").mkdir()
    shutil.copy(folder / "model.safetensors", folder / "sub")
    (folder / "loop.safetensors").symlink_to(".")
    (tmp_path / "elsewhere").mkdir()
    shutil.copy(folder / "model.safetensors", tmp_path / "elsewhere" / "x.safetensors")
    (folder / "out").symlink_to(tmp_path / "elsewhere")
    (folder / "model.safetensors").rename(folder / "whole.safetensors")
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {KEY: shard}}))
    with pytest.raises(CheckpointError, match=f"^{index}: names ") as error:
        BertModel.from_pretrained(folder)
    assert said in str(error.value)


def test_a_shard_that_is_a_link_to_a_file_inside_the_folder_still_reads(tiny_model_dir, tmp_path):
    folder = copy_of(tiny_model_dir, tmp_path / "model")
    (folder / "model.safetensors").rename(folder / "blob")
    (folder / "part-1.safetensors").symlink_to("blob")
    keys = BertModel.from_pretrained(tiny_model_dir).state_dict()
    index = {"weight_map": dict.fromkeys(keys, "part-1.safetensors")}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    assert BertModel.from_pretrained(folder).load_report.exact


# ----- module paths and checksum lines ----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["config.json linked out", "a linked-out parent", "a NUL"])
def test_a_pooling_config_reached_through_a_link_out_or_a_nul_is_refused(tiny_model_dir, tmp_path, how):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "config.json").write_text(json.dumps({"word_embedding_dimension": 32,
                                                       "pooling_mode_cls_token": True}))
    named = {"config.json linked out": "1_Pooling", "a linked-out parent": "up/1_Pooling",
             "a NUL": "1_\0"}[how]
    folder = sentence_folder(tiny_model_dir, tmp_path / "model", named)
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").symlink_to(elsewhere / "config.json")
    (elsewhere / "1_Pooling").mkdir()
    (elsewhere / "1_Pooling" / "config.json").write_text((elsewhere / "config.json").read_text())
    (folder / "up").symlink_to(elsewhere)
    with pytest.raises(FileContentError, match=f"^{folder / 'modules.json'}: names "):
        read_settings(folder)


def test_a_checksum_line_naming_a_nul_or_the_folder_itself_is_damage(tmp_path):
    folder = tmp_path / "best"
    folder.mkdir()
    for line in ("0" * 64 + "  a\0b", "0" * 64 + "  ."):
        (folder / "checksums.sha256").write_text(line + "\n")
        with pytest.raises(DamagedFileError):
            verify_folder(folder)


# ----- other formats: JSON numbers, tokenizer.json fields, safetensors headers ------------------------------


@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json", "modules.json"])
def test_json_holding_an_integer_of_5000_digits_is_refused_naming_the_file(tiny_model_dir, tmp_path, name):
    """Python's json refuses integers past 4,300 digits with a ValueError that named no file."""
    folder = copy_of(tiny_model_dir, tmp_path / "model")
    (folder / name).write_text('{"vocab_size": 1' + "0" * 5000 + "}")
    with pytest.raises(MinbertError, match=f"^{folder / name}: holds an integer of more than 4300 digits"):
        {"config.json": lambda: BertModel.from_pretrained(folder),
         "tokenizer_config.json": lambda: BertTokenizer.from_pretrained(folder),
         "modules.json": lambda: read_settings(folder)}[name]()


@pytest.mark.parametrize("value, said", [
    ("NaN", "hidden_dropout_prob"), ("Infinity", "hidden_size"), ("1e400", "hidden_size"),
    ("-0.0", "num_attention_heads"), ("true", "num_hidden_layers")])
def test_a_config_json_number_that_is_nan_infinite_or_of_another_kind_is_refused_naming_the_field(
        tiny_model_dir, tmp_path, value, said):
    folder = copy_of(tiny_model_dir, tmp_path / "model")
    text = (folder / "config.json").read_text()
    values = json.loads(text)
    (folder / "config.json").write_text(text.replace(f'"{said}": {json.dumps(values[said])}',
                                                     f'"{said}": {value}'))
    with pytest.raises(MinbertError, match=said):
        BertModel.from_pretrained(folder)


@pytest.mark.parametrize("change", [{"added_tokens": "x"}, {"added_tokens": [1]},
                                    {"model": {"max_input_chars_per_word": "many"}},
                                    {"model": {"max_input_chars_per_word": 1e400}},
                                    {"model": {"max_input_chars_per_word": [1]}}])
def test_a_tokenizer_json_field_of_another_kind_is_refused_naming_the_file(tmp_path, change):
    """added_tokens not a list was a NameError; max_input_chars_per_word not a count a raw ValueError,
    OverflowError or TypeError."""
    saved = {"model": {"type": "WordPiece", "vocab": {"[UNK]": 0, "a": 1}},
             "normalizer": {"type": "BertNormalizer"}, "pre_tokenizer": {"type": "BertPreTokenizer"}}
    for key, value in change.items():
        saved[key] = {**saved[key], **value} if isinstance(value, dict) else value
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(saved).replace("1e+400", "1e400").replace("Infinity", "1e400"))
    with pytest.raises(FileContentError, match=f"^{path}: "):
        read_tokenizer_json(path)


def safetensors_with_header(path: Path, header: bytes, data: bytes = b"") -> None:
    path.write_bytes(len(header).to_bytes(8, "little") + header + data)


@pytest.mark.parametrize("header", [
    b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 800000000000]}}',
    b'{"w": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 8]}}',
    b'{"w": {"dtype": "X9", "shape": [2], "data_offsets": [0, 8]}}',
    b'{"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}',
    b'{"__metadata__": ' + b"[" * 200 + b"]" * 200 + b"}",
    b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}'])
def test_a_safetensors_header_that_lies_is_a_checkpoint_error_naming_the_file(tmp_path, header):
    path = tmp_path / "model.safetensors"
    safetensors_with_header(path, header, bytes(8))
    with pytest.raises(CheckpointError, match=f"^{path}: "):
        read_weights(path)


def test_a_safetensors_file_of_nan_weights_is_refused_naming_the_key(tiny_model_dir, tmp_path):
    folder = copy_of(tiny_model_dir, tmp_path / "model")
    state = dict(BertModel.from_pretrained(folder).state_dict())
    state[KEY] = torch.full_like(state[KEY], float("nan"))
    save_file({k: v.contiguous() for k, v in state.items()}, folder / "model.safetensors")
    with pytest.raises(CheckpointError, match=f"{KEY} holds NaN or infinite values"):
        BertModel.from_pretrained(folder)


# ----- saves through links ----------------------------------------------------------------------------------


def test_a_save_over_a_folder_whose_files_and_subfolders_link_out_writes_nothing_through_them(tiny_model_dir,
                                                                                              tmp_path):
    """model.safetensors, 1_Pooling/ and vocab.txt of the folder saved into are links to a user's files: the
    save replaces the links, never what they point to."""
    users = tmp_path / "users"
    users.mkdir()
    for name in ("weights", "vocab"):
        (users / name).write_text("keep me")
    (users / "pooling").mkdir()
    (users / "pooling" / "config.json").write_text("keep me")
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").symlink_to(users / "weights")
    (folder / "vocab.txt").symlink_to(users / "vocab")
    (folder / "1_Pooling").symlink_to(users / "pooling")
    SentenceEncoder(str(tiny_model_dir), pooling="mean").save(folder)
    assert [p.read_text() for p in (users / "weights", users / "vocab", users / "pooling" / "config.json")] \
        == ["keep me"] * 3
    assert not (folder / "1_Pooling").is_symlink() and read_settings(folder).pooling == "mean"


@pytest.mark.parametrize("linked, target", [("predictions", "out"), ("run.json", "out"), (".lock", "out"),
                                            ("best", "."), ("checkpoints", "best"), ("best", "checkpoints")])
def test_a_run_folders_own_name_linked_anywhere_ends_in_one_line_and_the_run_is_untouched(
        tiny_model_dir, stopped, tmp_path, linked, target):
    """A link out of the run (predictions/, run.json, .lock) is refused by name; one to the run itself or to
    another of its own folders (best -> ., checkpoints -> best) ends the resume in one line before any save,
    so a save of best/ never swaps the whole run folder."""
    out = tmp_path / "run"
    stopped_run(stopped, out)
    users = tmp_path / "users"
    users.mkdir()
    (users / "their-file.txt").write_text("keep me")
    if (out / linked).is_dir():
        shutil.rmtree(out / linked)
    else:
        (out / linked).unlink(missing_ok=True)
    (out / linked).symlink_to(users if target == "out" else Path(target))
    (out / "best").mkdir(exist_ok=True)
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    with pytest.raises(SystemExit) as stop:
        run_sentiment(tiny_model_dir, out, "--max-steps", "3", "--resume")
    said = str(stop.value.code)
    assert said.startswith("error: ") and "\n" not in said
    assert target != "out" or f"{out / linked} is a link to " in said
    after = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert [p for p in after if p != "run/failed.txt" or target == "out"] == before  # failed.txt: why
    assert (users / "their-file.txt").read_text() == "keep me"


def test_a_resume_checkpoint_that_is_a_link_out_of_the_run_is_not_read(tiny_model_dir, stopped, tmp_path,
                                                                        capsys):
    checkpoints = stopped_run(stopped, tmp_path / "run")
    (checkpoints / "last.pt").rename(tmp_path / "elsewhere.pt")
    (checkpoints / "last.pt").symlink_to(tmp_path / "elsewhere.pt")
    assert run_sentiment(tiny_model_dir, tmp_path / "run", "--max-steps", "3", "--resume") == 0
    assert f"{checkpoints / 'last.pt'}" in capsys.readouterr().err  # named, then last.prev.pt
    assert (tmp_path / "elsewhere.pt").is_file()


# ----- readers during saves ---------------------------------------------------------------------------------


def save_meanwhile(save) -> None:
    """Start `save` in a thread and give it a second: a save that must wait for the reader's lock waits."""
    saver = threading.Thread(target=save)
    saver.start()
    saver.join(timeout=1.0)
    save_meanwhile.threads.append(saver)


save_meanwhile.threads = []


def test_a_sentence_encoder_read_while_a_save_swaps_its_folder_is_all_of_one_save(tiny_model_dir, tmp_path,
                                                                                   monkeypatch):
    """The model, the tokenizer and modules.json's pooling are read under one lock: a save that lands between
    them (here forced between the model and the tokenizer) waits."""
    folder = tmp_path / "model"
    SentenceEncoder(str(tiny_model_dir), pooling="mean").save(folder)
    other = SentenceEncoder(str(tiny_model_dir), pooling="cls")
    with torch.no_grad():
        other.model.embeddings.word_embeddings.weight.fill_(1.0)
    original = BertTokenizer.from_pretrained.__func__

    def tokenizer_after_a_save(cls, *args, **kwargs):
        save_meanwhile(lambda: other.save(folder))
        return original(cls, *args, **kwargs)
    monkeypatch.setattr(BertTokenizer, "from_pretrained", classmethod(tokenizer_after_a_save))
    encoder = SentenceEncoder(str(folder))
    monkeypatch.undo()
    for thread in save_meanwhile.threads:
        thread.join(timeout=60)
    ones = bool((encoder.model.embeddings.word_embeddings.weight == 1.0).all())
    assert (encoder.pooling, ones) in (("mean", False), ("cls", True))
    assert SentenceEncoder(str(folder)).pooling == "cls"  # the save happened, after


def test_an_adapter_read_while_a_save_swaps_its_folder_is_all_of_one_save(tiny_model_dir, tmp_path,
                                                                          monkeypatch):
    from minbert.loading import adapter_files

    folder = tmp_path / "adapter"
    small = BertModel.from_pretrained(tiny_model_dir)
    apply_lora(small, r=2)
    large = BertModel.from_pretrained(tiny_model_dir)
    apply_lora(large, r=4)
    save_adapter(small, folder)
    original = adapter_files.read_adapter_config

    def config_then_a_save(directory):
        config = original(directory)
        save_meanwhile(lambda: save_adapter(large, folder))
        return config
    monkeypatch.setattr(adapter_files, "read_adapter_config", config_then_a_save)
    load_adapter(BertModel.from_pretrained(tiny_model_dir), folder)  # r 2 and r 4's weights: a shape misfit
    for thread in save_meanwhile.threads:
        thread.join(timeout=60)
    assert read_json_object(folder / "adapter_config.json")["r"] == 4


# ----- the error boundary: echoed input cut short -----------------------------------------------------------


def test_a_data_row_quoting_a_megabyte_label_is_cut_in_the_warning_and_the_error(tiny_model_dir, tmp_path,
                                                                                 capsys):
    data = tmp_path / "data"
    shutil.copytree(SAMPLE_DIR, data, ignore=shutil.ignore_patterns("*.py"))
    train = next(data.rglob("*sst-train*"))
    lines = train.read_text().splitlines()
    header, row = lines[0], lines[1].split("\t")
    lines.insert(2, "\t".join([*row[:-1], "7" * 1_000_000]))
    train.write_text("\n".join(lines) + "\n")
    args = ["--model", str(tiny_model_dir), "--data-dir", str(data), "--limit", "16", "--max-length", "32",
            "--max-steps", "1"]
    assert header
    assert sentiment.main([*args, "--out", str(tmp_path / "a")]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if "skipped" in line]
    assert warned and all(len(line) < 2000 for line in warned), [len(line) for line in warned]
    with pytest.raises(SystemExit) as stop:
        sentiment.main([*args, "--out", str(tmp_path / "b"), "--strict"])
    assert len(str(stop.value.code)) < 2000


def test_a_model_name_of_a_megabyte_is_cut_in_its_error():
    with pytest.raises(MinbertError) as error:
        BertModel.from_pretrained("x" * 1_000_000)
    assert len(str(error.value)) < 2000
