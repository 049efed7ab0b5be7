"""Every bad input of docs/bad_input.md, through a job's command line: what the user sees is one line
("error: ..." naming the file, line, key or flag) or a warning that names what was skipped; never a traceback,
never a silent wrong result. Runs use a tiny model and the bundled demo sample (tasks.sentiment), or small
GLUE-format files (tasks.classify); the readers' own tests are in test_data.py and test_glue.py."""

from __future__ import annotations

import errno
import json
import re
import shutil
from pathlib import Path

import pytest
import torch

from tasks import classify, sentiment
from tasks.training import checkpoints as resume_state
from tasks.data.sources import SAMPLE_DIR


@pytest.fixture
def data(tmp_path) -> Path:
    """A private copy of the demo sample, to break."""
    copy = tmp_path / "data"
    shutil.copytree(SAMPLE_DIR, copy)
    return copy


def run(tiny_model_dir, data, out, *extra, model=None):
    return sentiment.main(["--model", str(model or tiny_model_dir), "--data-dir", str(data),
                           "--out", str(out), "--limit", "16", "--batch_size", "8", "--epochs", "1",
                           "--max-length", "32", "--keep-checkpoints", *extra])


def fails_with(capsys, call, message: str) -> str:
    """Run `call`; it must exit with a one-line message containing `message` (no traceback)."""
    with pytest.raises(SystemExit) as error:
        call()
    text = error.value.code if isinstance(error.value.code, str) else capsys.readouterr().err
    assert message in text, text
    assert "Traceback" not in text
    return text


# ----- data files -----------------------------------------------------------------------------------


def test_missing_data_file(tiny_model_dir, data, tmp_path, capsys):
    (data / "ids-sst-dev.csv").unlink()
    fails_with(capsys, lambda: run(tiny_model_dir, data, tmp_path / "out"), "missing ids-sst-dev.csv")


def test_empty_data_file(tiny_model_dir, data, tmp_path, capsys):
    (data / "ids-sst-train.csv").write_text("", encoding="utf-8")
    fails_with(capsys, lambda: run(tiny_model_dir, data, tmp_path / "out"),
               "ids-sst-train.csv: the file is empty")


def test_wrong_column_names(tiny_model_dir, data, tmp_path, capsys):
    path = data / "ids-sst-train.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(["\tid\ttext\tlabel"] + lines[1:]) + "\n", encoding="utf-8")
    fails_with(capsys, lambda: run(tiny_model_dir, data, tmp_path / "out"),
               "ids-sst-train.csv:1: wrong header")


def test_a_comma_separated_course_file_is_told_so(tiny_model_dir, data, tmp_path, capsys):
    path = data / "ids-sst-train.csv"
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]
    path.write_text("".join(",".join(f'"{cell}"' if "," in cell else cell for cell in row) + "\n"
                            for row in rows), encoding="utf-8")
    fails_with(capsys, lambda: run(tiny_model_dir, data, tmp_path / "out"),
               "ids-sst-train.csv:1: this file is comma-separated; the course files are tab-separated")


def test_not_utf8(tiny_model_dir, data, tmp_path, capsys):
    path = data / "ids-sst-train.csv"
    path.write_bytes(path.read_bytes().replace(b"dentist", b"dent\xe9ist", 1))
    fails_with(capsys, lambda: run(tiny_model_dir, data, tmp_path / "out"), "ids-sst-train.csv:2: not UTF-8")


@pytest.mark.parametrize("row, reason", [
    ("7\tabc\t A sentence .\t9", "out of range"),  # label out of range
    ("7\tabc\t \t1", "empty sentence"),  # empty string
    ("7\tabc", "expected"),  # a missing field
])
def test_malformed_rows_are_skipped_with_file_and_line_and_fatal_when_strict(tiny_model_dir, data, tmp_path,
                                                                             capsys, row, reason):
    path = data / "ids-sst-train.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines[:3] + [row] + lines[3:]) + "\n", encoding="utf-8")
    assert run(tiny_model_dir, data, tmp_path / "out", "--max-steps", "1") == 0
    err = capsys.readouterr().err
    assert "ids-sst-train.csv:4" in err and reason in err  # the skipped row, by file and line
    fails_with(capsys, lambda: run(tiny_model_dir, data, tmp_path / "strict", "--strict"),
               "ids-sst-train.csv:4")


def test_very_long_texts_are_cut_to_max_length(tiny_model_dir, data, tmp_path):
    path = data / "ids-sst-train.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    long_row = "7\tlongone\t " + " ".join(["word"] * 5000) + " .\t3"
    path.write_text("\n".join(lines[:1] + [long_row] + lines[1:]) + "\n", encoding="utf-8")
    assert run(tiny_model_dir, data, tmp_path / "out", "--max-steps", "1") == 0


def test_glue_labels_out_of_range_and_missing_columns(tiny_model_dir, tmp_path, capsys):
    rte = tmp_path / "shared" / "glue" / "RTE"
    rte.mkdir(parents=True)
    rows = (["index\tsentence1\tsentence2\tlabel"]
            + [f"{i}\tA cat .\tA dog .\t{'entailment' if i % 2 else 'not_entailment'}" for i in range(8)])
    (rte / "train.tsv").write_text("\n".join(rows + ["8\tA .\tB .\tmaybe", "9\tonly one"]) + "\n",
                                   encoding="utf-8")
    (rte / "dev.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    argv = ["--model", str(tiny_model_dir), "--data-dir", str(tmp_path / "shared"), "--task", "rte",
            "--epochs", "1", "--max-steps", "1", "--batch_size", "4", "--max-length", "32"]
    assert classify.main([*argv, "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert "train.tsv:10: label 'maybe' is not one of" in err and "train.tsv:11: expected at least 4" in err
    fails_with(capsys, lambda: classify.main([*argv, "--out", str(tmp_path / "b"), "--strict"]),
               "train.tsv:10")


# ----- models and checkpoints ------------------------------------------------------------------------


def test_unknown_model_name(tiny_model_dir, data, tmp_path, capsys):
    fails_with(capsys, lambda: run(tiny_model_dir, data, tmp_path / "out", model="bert-huge-cased"),
               "error: cannot find model 'bert-huge-cased'")


def test_the_weights_file_given_as_model_is_told_to_give_its_folder(tiny_model_dir, data, tmp_path, capsys):
    fails_with(capsys, lambda: run(tiny_model_dir, data, tmp_path / "out",
                                   model=str(tiny_model_dir / "model.safetensors")),
               f"error: {tiny_model_dir / 'model.safetensors'} is a file, not a model folder: give the "
               f"folder that holds it ({tiny_model_dir})")


def edited_checkpoint(tiny_model_dir, tmp_path, **changes) -> Path:
    copy = tmp_path / "model"
    shutil.copytree(tiny_model_dir, copy)
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, **changes}))
    return copy


def test_checkpoint_of_another_architecture(tiny_model_dir, data, tmp_path, capsys):
    model = edited_checkpoint(tiny_model_dir, tmp_path, model_type="gpt2")
    fails_with(capsys, lambda: run(tiny_model_dir, data, tmp_path / "out", model=model),
               "config.json: model_type is 'gpt2', but minbert builds BERT models only")


def test_checkpoint_of_another_size(tiny_model_dir, data, tmp_path, capsys):
    model = edited_checkpoint(tiny_model_dir, tmp_path, hidden_size=64)
    fails_with(capsys, lambda: run(tiny_model_dir, data, tmp_path / "out", model=model),
               "model.safetensors: shape mismatch")


def test_max_length_beyond_the_models_positions_or_below_the_special_tokens(tiny_model_dir, data, tmp_path,
                                                                            capsys):
    fails_with(capsys, lambda: run(tiny_model_dir, data, tmp_path / "a", "--max-length", "1000"),
               "--max-length 1000 exceeds the model's 128 positions")
    fails_with(capsys, lambda: run(tiny_model_dir, data, tmp_path / "b", "--max-length", "1"),
               "argument --max-length: must be an integer >= 2 ([CLS] and [SEP] included), got '1'")


# ----- outputs ---------------------------------------------------------------------------------------


def test_unwritable_output_directory(tiny_model_dir, data, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    text = fails_with(capsys, lambda: run(tiny_model_dir, data, blocker / "run"), "argument --out:")
    assert "cannot be created" in text and "is a file" in text


def test_disk_full_while_saving_keeps_the_last_good_checkpoint(tiny_model_dir, data, tmp_path, capsys,
                                                               monkeypatch):
    out = tmp_path / "out"
    assert run(tiny_model_dir, data, out, "--max-steps", "1") == 0  # a first checkpoint exists
    real_save = torch.save

    def full_disk(obj, f, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(f))

    monkeypatch.setattr(resume_state.torch, "save", full_disk)
    fails_with(capsys, lambda: run(tiny_model_dir, data, out, "--max-steps", "2", "--resume"),
               "No space left on device; files written before are intact")
    monkeypatch.setattr(resume_state.torch, "save", real_save)
    assert run(tiny_model_dir, data, out, "--max-steps", "2", "--resume") == 0  # resumes from the good one
    assert "resuming from" in capsys.readouterr().err


# ----- flags -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("flags, message", [
    (["--lr", "-1"], "argument --lr: must be a number in (0, inf), got '-1'"),
    (["--batch_size", "0"], "argument --batch-size: must be an integer >= 1, got '0'"),
    (["--warmup", "1.5"], "argument --warmup: must be a number in [0, 1) (a fraction of the training steps)"),
    (["--layerwise-decay", "0"], "argument --layerwise-decay: must be a number in (0, 1] (1: no decay)"),
    (["--limit", "-5"], "argument --limit: must be an integer >= 0 (0: every example), got '-5'"),
    (["--hidden_dropout_prob", "1.5"], "must be a number in [0, 1) (a dropout probability), got '1.5'"),
    (["--epochs", "nan"], "argument --epochs: must be an integer >= 1, got 'nan'"),
    (["--lr", "inf"], "argument --lr: must be a number in (0, inf), got 'inf'"),
])
def test_bad_hyperparameters_name_the_flag(tiny_model_dir, data, tmp_path, capsys, flags, message):
    fails_with(capsys, lambda: run(tiny_model_dir, data, tmp_path / "out", *flags), message)


def test_a_loss_that_becomes_nan_stops_the_run_naming_the_step(tiny_model_dir, data, tmp_path, capsys,
                                                               monkeypatch):
    real_loss = sentiment.TaskData.loss
    calls = []

    def loss_then_nan(self, model, batch):
        calls.append(1)
        loss = real_loss(self, model, batch)
        return loss * float("nan") if len(calls) == 2 else loss

    monkeypatch.setattr(sentiment.TaskData, "loss", loss_then_nan)
    fails_with(capsys, lambda: run(tiny_model_dir, data, tmp_path / "out", "--checkpoint-every", "1"),
               "the sst loss became nan at step 2 (epoch 1); the last good checkpoint is")
    assert (tmp_path / "out" / "checkpoints" / "last.pt").is_file()  # step 1's state, intact


def test_a_corrupt_training_checkpoint_falls_back_to_the_previous_one(tiny_model_dir, data, tmp_path, capsys):
    out = tmp_path / "out"
    two = ("--epochs", "2")  # 4 steps: the run is still going after step 2 (a finished one resumes nothing)
    assert run(tiny_model_dir, data, out, *two, "--max-steps", "1") == 0
    assert run(tiny_model_dir, data, out, *two, "--max-steps", "2", "--resume") == 0  # last.pt, last.prev.pt
    last = out / "checkpoints" / "last.pt"
    last.write_bytes(last.read_bytes()[:1000])  # a partial write
    capsys.readouterr()
    assert run(tiny_model_dir, data, out, *two, "--max-steps", "3", "--resume") == 0
    err = capsys.readouterr().err
    assert f"warning: {last} is damaged: its sha256 differs from the one recorded when it was saved" in err
    assert f"resuming from {last.with_suffix('.prev.pt')} (the earlier checkpoint, which is whole)" in err
    for path in (last, last.with_suffix(".prev.pt")):
        path.write_bytes(b"garbage")
    fails_with(capsys, lambda: run(tiny_model_dir, data, out, *two, "--max-steps", "4", "--resume"),
               "no whole checkpoint to resume from")


# ----- where the data is -----------------------------------------------------------------------------


@pytest.mark.parametrize("job", ["sentiment", "classify", "pretrain"])
@pytest.mark.parametrize("what, said", [("nowhere", "does not exist"), ("a-file", "is not a folder")])
def test_minbert_data_set_to_no_folder_is_an_error_not_the_demo_data(tiny_model_dir, tmp_path, monkeypatch,
                                                                     capsys, job, what, said):
    """MINBERT_DATA set explicitly is where the data must be: no quiet fall-back to the synthetic demo set
    (which stays for when nothing was set)."""
    from pretrain import run as pretrain_run

    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("MINBERT_DATA", str(tmp_path / what))
    out = tmp_path / "out"
    common = ["--model", str(tiny_model_dir), "--out", str(out), "--epochs", "1"]
    main = {"sentiment": lambda: sentiment.main(common),
            "classify": lambda: classify.main([*common, "--task", "rte"]),
            "pretrain": lambda: pretrain_run.main([*common, "--within", "sst"])}[job]
    text = fails_with(capsys, main, f"error: MINBERT_DATA is set to {tmp_path / what}, which {said}; point "
                                    "it at the shared datasets folder, or unset it")
    assert "SYNTHETIC" not in text + capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize("job, lacking", [("sentiment", "ids-sst-dev.csv"), ("multitask", "quora-train.csv"),
                                          ("pretrain", "ids-sst-train.csv")])
def test_minbert_data_lacking_a_file_is_an_error_naming_it_not_a_download_or_the_demo_data(
        tiny_model_dir, data, tmp_path, monkeypatch, capsys, job, lacking):
    """A folder named by MINBERT_DATA is as explicit as --data-dir: a missing file is an error naming it
    (before any work: no download tried, nothing created), never the synthetic demo set."""
    from pretrain import run as pretrain_run
    from tasks import multitask
    from tasks.data import sources

    shared = tmp_path / "shared"
    shutil.copytree(data, shared / "cs224n")
    (shared / "cs224n" / lacking).unlink()
    monkeypatch.setenv("MINBERT_DATA", str(shared))
    monkeypatch.setattr(sources, "urllib_fetch", lambda *a: pytest.fail("no download may be tried"))
    out = tmp_path / "out"
    common = ["--model", str(tiny_model_dir), "--out", str(out), "--epochs", "1", "--max-steps", "1"]
    main = {"sentiment": lambda: sentiment.main(common), "multitask": lambda: multitask.main(common),
            "pretrain": lambda: pretrain_run.main([*common, "--within", "sst"])}[job]
    text = fails_with(capsys, main, f"error: MINBERT_DATA={shared}: missing {lacking}")
    assert "SYNTHETIC" not in text + capsys.readouterr().err and not out.exists()


# ----- labels and long fields ------------------------------------------------------------------------


@pytest.mark.parametrize("label, reason", [
    ("0_3", "'0_3' is not a number"), ("３", "'３' is not a number"), ("٣", "'٣' is not a number"),
    ("1e0", "'1e0' is not a whole number"), ("+2", "'+2' is not a whole number"), ("0x1", "is not a number"),
    ("nan", "not a finite number"), ("1 1", "is not a number"), ("1\x00", "is not a number")])
def test_labels_are_parsed_strictly_not_as_python_reads_numbers(tmp_path, label, reason):
    """int() and float() read "0_3" as 3 and "３" as 3: a label is ASCII digits ("2", "2.0") or a refusal
    naming file, line and text (the reader used by every course job)."""
    from tasks.data.course import read_sst
    from tasks.data.examples import MalformedRowError

    path = tmp_path / "ids-sst-train.csv"
    path.write_text(f"\tid\tsentence\tsentiment\n0\ta\t Fine .\t2.0\n1\tb\t Odd .\t{label}\n2\tc\t Ok .\t 4 \n",
                    encoding="utf-8")
    with pytest.raises(MalformedRowError, match=f"ids-sst-train.csv:3: sentiment .*{re.escape(reason)}"):
        read_sst(path, strict=True)
    result = read_sst(path)
    assert [e.label for e in result.examples] == [2, 4] and reason in result.skipped[0].reason


def test_a_sentence_longer_than_the_csv_modules_field_limit_is_read_not_dropped(tmp_path):
    """csv's field_size_limit (131,072 characters) made a long sentence "broken CSV quoting"; it is read
    whole, and tokenization cuts it to --max-length (test_very_long_texts_are_cut_to_max_length)."""
    from tasks.data.course import read_sts

    long = " word" * 60_000  # 300,000 characters
    path = tmp_path / "sts-train.csv"
    path.write_text(f"\tid\tsentence1\tsentence2\tsimilarity\n0\ta\t{long}\t Short .\t2.5\n"
                    f'1\tb\t"{long} ""quoted"""\t Short .\t1e0\n', encoding="utf-8")
    result = read_sts(path, strict=True)
    assert [len(e.sentence1) for e in result.examples] == [len(long.strip()), len(long.strip()) + 9]
    assert [e.label for e in result.examples] == [2.5, 1.0]


def test_an_unreadable_data_file_says_cannot_read_naming_it(tmp_path, monkeypatch):
    """Not "cannot write": the job only reads it. (As root chmod 000 still reads, so the refusal is
    simulated there.)"""
    import os

    from tasks.data.course import read_sst
    from tasks.data.examples import DataFileError

    path = tmp_path / "ids-sst-train.csv"
    path.write_text("\tid\tsentence\tsentiment\n0\ta\t Fine .\t2\n", encoding="utf-8")
    if os.geteuid() == 0:
        def refuse(self):
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        monkeypatch.setattr(Path, "read_bytes", refuse)
    else:
        path.chmod(0)
    with pytest.raises(DataFileError, match=f"{path}: cannot read: Permission denied"):
        read_sst(path)


# ----- flags: numbers, limits, and where --out may be --------------------------------------------------


@pytest.mark.parametrize("flags, message", [
    (["--threads", "100000"], "argument --threads: must be an integer from 0 to"),
    (["--threads", "1_0"], "argument --threads: must be an integer >= 0 (0: decide from the idle cores), "
                           "got '1_0'"),
    (["--epochs", "３"], "argument --epochs: must be an integer >= 1, got '３'"),
    (["--lr", "1_0e-5"], "argument --lr: must be a number in (0, inf), got '1_0e-5'"),
    (["--warmup", "٠.1"], "argument --warmup: must be a number in [0, 1)"),
    (["--seed", str(2**64)], "argument --seed: must be an integer from 0 to 18446744073709551615"),
    (["--limit", "0x10"], "argument --limit: must be an integer >= 0"),
])
def test_numeric_flags_are_ascii_and_bounded_refused_before_any_work(tiny_model_dir, data, tmp_path, capsys,
                                                                    flags, message):
    """Python's int() reads "1_0" and "３"; --threads 100000 crashed OpenMP (a segmentation fault, with a
    run folder left behind). Each is a usage error naming the flag, exit 2, nothing created."""
    with pytest.raises(SystemExit) as error:
        run(tiny_model_dir, data, tmp_path / "out", *flags)
    assert error.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("where", ["data", "data/run", "model", "model/run"])
def test_out_that_is_or_is_inside_the_data_or_model_folder_is_refused(tiny_model_dir, data, tmp_path, capsys,
                                                                      where):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    before = sorted(p.name for p in (tmp_path / where.split("/")[0]).iterdir())
    name = "--data-dir" if where.startswith("data") else "--model"
    fails_with(capsys, lambda: run(tiny_model_dir, data, tmp_path / where, model=model),
               f"the {name} folder")
    assert sorted(p.name for p in (tmp_path / where.split("/")[0]).iterdir()) == before


# ----- the table and the tests agree -------------------------------------------------------------------


def test_every_test_that_docs_bad_input_names_exists():
    """Each row's test column names test files (`test_x`) and, in backticks, tests in them (a name ending in
    "..." is a prefix): each must exist, so the table cannot drift from the tests."""
    tests = Path(__file__).parent
    table = (tests.parent / "docs" / "bad_input.md").read_text(encoding="utf-8")
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| bad input")]
    missing, named = [], 0
    for row in rows:
        module = None
        for word in re.findall(r"`[^`]+`|\btest_\w+", row.rsplit(" | ", 1)[-1]):
            if not word.startswith("`"):
                module = tests / f"{word}.py"
                missing += [] if module.is_file() else [f"{word}.py"]
                continue
            name = word.strip("`")
            if not name.startswith("test_") or module is None or not module.is_file():
                continue
            named += 1
            pattern = rf"^def {re.escape(name.removesuffix('...'))}" + ("" if name.endswith("...") else r"\(")
            if not re.search(pattern, module.read_text(encoding="utf-8"), re.MULTILINE):
                missing.append(f"{module.name}::{name}")
    assert named > 50 and not missing, missing
