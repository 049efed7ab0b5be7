"""Every command-line surface is checked by one rule, and a run directory is claimed before it is written.

- every flag of every job's parser that takes a value has choices or a checking type
  (tasks/training/flags.py): a new flag cannot skip the checks;
- the path types tell a file from a folder, and name the flag;
- a job's flags come from its settings dataclasses (tasks/training/flags.py): the job's own defaults are
  the ones parsed and shown, the course's spellings work, parsing changes nothing in place, and config.json
  holds the resolved settings, read back through the same classes;
- claim_run (tasks/training/run_folder.py): another job's run, another model, a busy folder, and a failure
  before training are each handled as the docstring says, and --resume refuses settings that would change
  the run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys

from dataclasses import dataclass

import pytest
import torch

from tasks.training import flags, process, settings as settings_module
from tasks.training.run_folder import CONFIG_FILE, FAILED_FILE, LOCK_FILE, RUN_FILE, WRITE_TEST, claim_run
from tasks.training.settings import (JobSettings, RunSettings, SettingsParser, TrainingSettings,
                                     attn_implementation_for, from_dict, resolve_training)

JOBS = ["tasks.multitask", "tasks.sentiment", "tasks.classify", "tasks.hierarchical", "tasks.tag",
        "pretrain.run",
        "experiments.study", "grading.handout", "grading.grade", "grading.autograder",
        "grading.check_predictions",
        "bench.optim_speed", "bench.busy_core", "bench.encode_speed", "bench.job_step"]


def value_flags(module: str) -> list[argparse.Action]:
    parser = importlib.import_module(module).build_parser()
    return [a for a in parser._actions if a.nargs != 0 and not isinstance(a, argparse._HelpAction)]


@pytest.mark.parametrize("module", JOBS)
def test_every_flag_that_takes_a_value_is_checked(module):
    flags = value_flags(module)
    assert flags, f"{module} has no flags taking values?"
    unchecked = [a.option_strings or [a.dest] for a in flags
                 if a.choices is None and not getattr(a.type, "checked", False)]
    assert not unchecked, (f"{module}: these flags take any value; give them a type from "
                           f"tasks/training/flags.py or choices: {unchecked}")


def test_how_many_job_flag_pairs_are_checked():
    pairs = sum(len(value_flags(m)) for m in JOBS)
    print(f"{pairs} (job, flag) pairs checked")
    assert pairs > 150  # every job above, counted; the figure in docs/bad_input.md


@pytest.mark.parametrize("check, make, message", [
    (flags.existing_file, "folder", "is a folder, not a file"),
    (flags.existing_file, "nothing", "no such file"),
    (flags.existing_dir, "file", "is a file, not a folder"),
    (flags.existing_dir, "nothing", "no such folder"),
    (flags.output_dir, "file", "is a file, not a folder"),
    (flags.output_dir, "under-file", "cannot be created"),
    (flags.output_file, "folder", "is a folder, not a file"),
])
def test_path_types_tell_files_from_folders(tmp_path, check, make, message):
    target = {"folder": tmp_path, "nothing": tmp_path / "absent", "file": tmp_path / "f.txt",
              "under-file": tmp_path / "f.txt" / "run"}[make]
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        check(str(target))


def test_path_types_accept_what_they_should(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    assert flags.existing_file(str(tmp_path / "f.txt")) == str(tmp_path / "f.txt")
    assert flags.existing_dir(str(tmp_path)) == str(tmp_path)
    assert flags.output_dir(str(tmp_path / "new" / "deeper")) == str(tmp_path / "new" / "deeper")
    assert flags.output_file(str(tmp_path / "new" / "out.csv")) == str(tmp_path / "new" / "out.csv")
    with pytest.raises(argparse.ArgumentTypeError, match="must not be empty"):
        flags.nonempty("  ")
    with pytest.raises(argparse.ArgumentTypeError, match="comma-separated list of train, dev"):
        flags.choice_list(("train", "dev"))("train,valid")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_output_dir_under_a_read_only_folder(tmp_path):
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(argparse.ArgumentTypeError, match="not writable"):
            flags.output_dir(str(locked / "run"))
    finally:
        locked.chmod(0o700)


@pytest.mark.parametrize("argv, message", [
    (["--limit", "-5"], "argument --limit: must be an integer >= 0"),
    (["--seed", "-1"], "argument --seed: must be an integer >= 0"),
    (["--model", ""], "argument --model: must not be empty"),
    (["--data-dir", "setup.cfg"], "argument --data-dir: 'setup.cfg' is a file, not a folder"),
    (["--out", "setup.cfg"], "argument --out: 'setup.cfg' is a file, not a folder"),
    (["--hidden_dropout_prob", "1"],
     "argument --hidden-dropout-prob: must be a number"),
])
def test_a_bad_value_names_the_flag_before_any_work(argv, message, capsys):
    from tasks import multitask

    with pytest.raises(SystemExit) as caught:
        multitask.main(argv)
    assert caught.value.code == 2
    assert message in capsys.readouterr().err


# ----- settings: declared once, as dataclass fields ------------------------------------------------------


def test_a_job_states_its_defaults_once_and_help_shows_them(capsys, monkeypatch):
    from tasks import hierarchical, multitask

    monkeypatch.setenv("COLUMNS", "110")  # --help's width where no terminal says otherwise
    train = multitask.build_parser().parse([]).training
    assert (train.epochs, train.sampling) == (3, "proportional") and train == multitask.TRAIN_DEFAULTS
    settings = hierarchical.build_parser().parse(["--dataset", "hwv"])
    assert (settings.job.max_length, settings.training.epochs) == (256, 5)
    with pytest.raises(SystemExit):
        multitask.main(["--help"])
    shown = capsys.readouterr().out
    assert "--epochs N" in shown and "passes over the training data (default 3)" in shown
    assert "(default sts=4)" in shown and "--sampling" not in shown  # the main job samples proportionally


def test_the_main_jobs_help_fits_on_two_screens(monkeypatch):
    from tasks import multitask

    monkeypatch.setenv("COLUMNS", "110")
    text = multitask.build_parser().format_help()
    assert len(text.splitlines()) <= 95, len(text.splitlines())  # 91 lines, 99 before options were cut


@dataclass(frozen=True)
class FineTuning(RunSettings):
    """A job's settings of the two shared groups alone."""

    job: JobSettings = JobSettings()
    training: TrainingSettings = TrainingSettings()


def test_the_courses_spellings_and_their_hyphenated_aliases_reach_the_same_field():
    parser = SettingsParser("test", None, FineTuning())
    for argv in (["--batch_size", "8", "--hidden_dropout_prob", "0.2", "--use_gpu"],
                 ["--batch-size", "8", "--hidden-dropout-prob", "0.2", "--use-gpu"]):
        settings = parser.parse(argv)
        assert (settings.training.batch_size, settings.job.hidden_dropout_prob,
                settings.training.use_gpu) == (8, 0.2, True)


def test_a_bool_on_by_default_is_turned_off_by_its_no_flag():
    defaults = FineTuning(training=TrainingSettings(eval_first=True))
    assert not SettingsParser("test", None, defaults).parse(["--no-eval-first"]).training.eval_first
    with pytest.raises(SystemExit):  # the job's default is on: there is no --eval-first to give
        SettingsParser("test", None, defaults).parse(["--eval-first"])


def test_a_contradiction_between_settings_is_a_usage_error_naming_the_flags(capsys):
    from tasks import sentiment

    with pytest.raises(SystemExit) as caught:
        sentiment.main(["--option", "pretrain", "--layerwise-decay", "0.9"])
    assert caught.value.code == 2
    assert "--layerwise-decay needs a trainable encoder, but --option pretrain" in capsys.readouterr().err


def test_resolving_makes_new_values_and_config_json_reads_back_into_the_same_class(tmp_path):
    parsed = TrainingSettings(threads=1, precision="fp32", seed=3, layerwise_decay=0.9)
    before = torch.get_num_threads()
    try:
        resolved = resolve_training(parsed)
    finally:
        torch.set_num_threads(before)
    assert parsed.precision == "fp32" and resolved is not parsed
    with claim_run(tmp_path / "run", "sentiment", "tiny") as run:
        run.write_config(JobSettings(), resolved, data_kind="sample")
        run.metrics.write_text("{}\n")
    saved = json.loads((tmp_path / "run" / CONFIG_FILE).read_text())
    assert saved["data_kind"] == "sample" and saved["max_length"] == 128
    assert from_dict(TrainingSettings, saved) == resolved


def test_the_kernel_is_decided_once_and_predict_runs_the_unpadded_model_on_a_cpu():
    """--attn-implementation auto: unpadded for fp32 on a CPU, else sdpa; --predict (a forward alone) runs the
    unpadded model on a CPU in any precision, as SentenceEncoder.encode does."""
    assert [attn_implementation_for("auto", device, precision) for device, precision in
            (("cpu", "fp32"), ("cpu", "bf16"), ("cuda", "fp32"))] == ["unpadded", "sdpa", "sdpa"]
    assert [attn_implementation_for("auto", device, precision, predicting=True) for device, precision in
            (("cpu", "fp32"), ("cpu", "bf16"), ("cuda", "fp32"))] == ["unpadded", "unpadded", "sdpa"]
    assert attn_implementation_for("eager", "cpu", "fp32", predicting=True) == "eager"  # as asked


def test_in_a_students_handout_auto_is_the_students_eager_kernel_and_the_others_run_when_named(monkeypatch):
    """In a handout (its installed part carries the marker module) the jobs run the student's attention
    unless a fast path is named, and --help says so."""
    monkeypatch.setattr(process, "in_handout", lambda: True)
    assert [attn_implementation_for("auto", device, precision) for device, precision in
            (("cpu", "fp32"), ("cpu", "bf16"), ("cuda", "fp32"))] == ["eager"] * 3
    assert attn_implementation_for("sdpa", "cpu", "fp32") == "sdpa"  # as asked
    assert attn_implementation_for("unpadded", "cpu", "fp32") == "unpadded"


def trained(run) -> None:
    """What a run leaves once it has trained a while: metrics and a checkpoint (claim_run reads neither)."""
    run.metrics.write_text("{}\n")
    run.checkpoints.mkdir()
    (run.checkpoints / "last.pt").write_bytes(b"")


def test_resume_refuses_settings_that_shape_the_run_and_allows_the_others(tmp_path):
    job, train = JobSettings(), TrainingSettings(threads=1)
    with claim_run(tmp_path / "run", "sentiment", "tiny", settings=(job, train)) as run:
        run.write_config(job, train)
        trained(run)
    changed = TrainingSettings(threads=1, lr=1e-4, batch_size=8)
    with pytest.raises(SystemExit, match=r"was started with --lr 5e-05, --batch-size 32, but this command "
                                         r"asks for --lr 0.0001, --batch-size 8"):
        with claim_run(tmp_path / "run", "sentiment", "tiny", resume=True, settings=(job, changed)):
            pass
    free = TrainingSettings(threads=2, max_steps=9, resume=True, keep_checkpoints=True)
    with claim_run(tmp_path / "run", "sentiment", "tiny", resume=True,
                   settings=(JobSettings(out=str(tmp_path / "run"), strict=True), free)):
        pass  # threads, --max-steps, --out, --strict may change


def test_pretrain_text_that_is_a_folder(tmp_path, capsys):
    from pretrain import run

    with pytest.raises(SystemExit):
        run.main(["--text", str(tmp_path), "--out", str(tmp_path / "r")])
    assert f"argument --text: '{tmp_path}' is a folder, not a file" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


# ----- claim_run: whose folder it is, and what a failure leaves ------------------------------------------


def test_a_fresh_run_records_job_model_and_identity(tmp_path):
    with claim_run(tmp_path / "run", "classify", "tiny", {"task": "rte"}) as run:
        assert (run.path / LOCK_FILE).exists()
        record = json.loads((run.path / RUN_FILE).read_text())
        run.metrics.write_text("{}\n")  # training has started
    assert record["job"] == "classify" and record["model"] == "tiny" and record["task"] == "rte"
    assert not (tmp_path / "run" / LOCK_FILE).exists()


def test_resume_on_another_jobs_run_says_whose_it_is(tmp_path):
    with claim_run(tmp_path / "run", "sentiment", "tiny", {"task": "sst"}) as run:
        trained(run)
    with pytest.raises(SystemExit, match=r"holds a sentiment run .* with job 'sentiment', but this command "
                                         r"asks for job 'multitask'"):
        with claim_run(tmp_path / "run", "multitask", "tiny", resume=True):
            pass
    with pytest.raises(SystemExit, match=r"model 'tiny', but this command asks for model 'other'"):
        with claim_run(tmp_path / "run", "sentiment", "other", {"task": "sst"}, resume=True):
            pass
    with pytest.raises(SystemExit, match=r"task 'sst', but this command asks for task 'cfimdb'"):
        with claim_run(tmp_path / "run", "sentiment", "tiny", {"task": "cfimdb"}, resume=True):
            pass
    with claim_run(tmp_path / "run", "sentiment", "tiny", {"task": "sst"}, resume=True):
        pass  # the same job, model and task: fine


def test_a_run_folder_is_not_overwritten_without_resume(tmp_path):
    with claim_run(tmp_path / "run", "tag", "tiny", {"method": "bio"}) as run:
        trained(run)
    with pytest.raises(SystemExit, match="already holds a tag run .*add --resume"):
        with claim_run(tmp_path / "run", "tag", "tiny", {"method": "bio"}):
            pass
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit, match="already holds files"):
        with claim_run(tmp_path / "other", "tag", "tiny"):
            pass
    with pytest.raises(SystemExit, match="does not exist"):
        with claim_run(tmp_path / "absent", "tag", "tiny", resume=True):
            pass


def test_another_ranks_write_test_does_not_make_a_new_folder_look_used(tmp_path):
    # Under torchrun every rank's RunDir probes the folder while rank 0 checks that it is empty.
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / f"{WRITE_TEST}12345").write_text("ok")
    with claim_run(tmp_path / "run", "tag", "tiny") as run:
        assert run.path == tmp_path / "run"


def test_a_second_job_on_the_same_folder_is_refused_while_the_first_runs(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        folder = tmp_path / "run"
        folder.mkdir()
        (folder / LOCK_FILE).write_text(f"{sleeper.pid} {os.uname().nodename}")
        with pytest.raises(SystemExit, match=f"another job \\(process {sleeper.pid}\\) is writing to"):
            with claim_run(folder, "multitask", "tiny", resume=True):
                pass
        # Without --resume, on a folder whose run the other job is writing: not "a stopped run, add --resume"
        (folder / RUN_FILE).write_text(json.dumps({"job": "multitask", "model": "tiny"}))
        (folder / "checkpoints").mkdir()
        (folder / "checkpoints" / "last.pt").write_bytes(b"")
        with pytest.raises(SystemExit) as caught:
            with claim_run(folder, "multitask", "tiny"):
                pass
        assert str(caught.value.code).startswith(f"error: another job (process {sleeper.pid}) is writing to "
                                                 f"{folder}; wait for it to finish")
        assert "stopped" not in str(caught.value.code)
    finally:
        sleeper.kill()
        sleeper.wait()
    # the same lock left behind by a process that is gone is stale: taken over
    with claim_run(folder, "multitask", "tiny", resume=True):
        assert (folder / LOCK_FILE).read_text().startswith(f"{os.getpid()} ")


def test_failure_before_training_leaves_nothing(tmp_path):
    with pytest.raises(SystemExit):
        with claim_run(tmp_path / "new" / "run", "multitask", "tiny") as run:
            run.write_config(a=1)
            raise SystemExit("error: bad data")
    assert not (tmp_path / "new" / "run").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError):
        with claim_run(empty, "multitask", "tiny") as run:
            run.write_config(a=1)
            raise ValueError("boom")
    assert empty.is_dir() and not any(empty.iterdir())  # it was empty, and is again


def test_failure_after_training_started_keeps_the_run_and_says_why(tmp_path):
    with pytest.raises(SystemExit):
        with claim_run(tmp_path / "run", "multitask", "tiny") as run:
            trained(run)
            raise SystemExit("error: cannot write last.pt: No space left on device")
    failed = tmp_path / "run" / FAILED_FILE
    assert "No space left on device" in failed.read_text() and "--resume" in failed.read_text()
    with claim_run(tmp_path / "run", "multitask", "tiny", resume=True):
        assert not failed.exists()  # a resumed run is no longer a failed one


def test_a_job_that_fails_on_bad_data_leaves_no_out_folder(tiny_model_dir, tmp_path, capsys):
    from tasks import sentiment

    data = tmp_path / "data"
    data.mkdir()
    (data / "ids-sst-train.csv").mkdir()  # a folder where the file should be
    out = tmp_path / "runs" / "x"
    with pytest.raises(SystemExit) as caught:
        sentiment.main(["--model", str(tiny_model_dir), "--data-dir", str(data), "--out", str(out)])
    assert "ids-sst-train.csv should be a file, but is a folder" in str(caught.value.code)
    assert not out.exists()


def test_model_forward_on_a_python_list_is_a_type_error(tiny_model_dir):
    from minbert import BertModel

    model = BertModel.from_pretrained(tiny_model_dir)
    with pytest.raises(TypeError, match="input_ids must be a torch.Tensor, got list"):
        model([[101, 2000, 102]])
    with pytest.raises(TypeError, match="attention_mask must be a torch.Tensor, got list"):
        model(torch.tensor([[101, 2000, 102]]), [[1, 1, 1]])


def files_of(folder) -> dict:
    """Every file under `folder`: its bytes and modification time (a rewrite with the same bytes shows)."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_refused_resume_names_the_setting_and_rewrites_nothing(tiny_multitask_run, tmp_path):
    """--lr, --batch_size, --max-length and SST's pooling shape the run: a --resume that changes
    one is refused by name before anything is written, so config.json and best/heads.json keep agreeing."""
    from tasks import multitask

    out = tmp_path / "run"
    assert multitask.main(tiny_multitask_run(out)) == 0  # 2 steps of 6: a stopped run, resumable
    before = files_of(out)
    for flags, said in [(["--lr", "1e-4"], "--lr 5e-05, but this command asks for --lr 0.0001"),
                        (["--batch_size", "4"], "--batch-size 8, but this command asks for --batch-size 4"),
                        (["--max-length", "48"],
                         "--max-length 64, but this command asks for --max-length 48"),
                        (["--sentiment-pooling", "max"],
                         "--sentiment-pooling cls, but this command asks for --sentiment-pooling max")]:
        with pytest.raises(SystemExit) as caught:
            multitask.main(tiny_multitask_run(out, "--resume", *flags))
        assert str(caught.value.code) == (f"error: --resume: {out} was started with {said}; resume with the "
                                          "settings the run started with")
        assert files_of(out) == before, flags  # not a file written, not even config.json
    assert multitask.main(tiny_multitask_run(out, "--resume", "--max-steps", "3")) == 0  # the same settings
    config = json.loads((out / CONFIG_FILE).read_text())
    heads = json.loads((out / "best" / "heads.json").read_text())
    shared = [k for k in heads if k in config and k != "model"]
    assert {"max_length", "sentiment_pooling"} <= set(shared)
    assert {k: heads[k] for k in shared} == {k: config[k] for k in shared}


def test_a_run_ends_with_its_dev_table_and_the_commands_that_use_it_which_run_as_printed(
        tiny_multitask_run, tmp_path, capsys, monkeypatch):
    """The end of a run: each dev figure at the best epoch and the last, where best/ and the predictions
    are, and the --predict and SentenceEncoder lines, each run as printed (--predict's dev figures are the
    run's own)."""
    import shlex
    from tasks import multitask

    monkeypatch.chdir(tmp_path)  # --predict writes runs/multitask-predict/<date-time> here
    out = tmp_path / "run"
    assert multitask.main(tiny_multitask_run(out)) == 0
    lines = capsys.readouterr().err.splitlines()
    best = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()][-1]
    table = lines[lines.index("dev            best: epoch 1 (step 2)  last: epoch 1 (step 2)"):]
    sst = f"{best['dev']['sst']['accuracy']:.4f}"
    assert table[1].split() == ["sst", "accuracy", sst, sst]
    assert table[5].split() == ["overall", f"{best['overall']:.4f}", f"{best['overall']:.4f}"]
    assert table[6:8] == [f"best model:  {out / 'best'}", f"predictions: {out / 'predictions'}"]
    command = shlex.split(table[8].partition("no training): ")[2])
    assert command[1:5] == ["-m", "tasks.multitask", "--predict", str(out)]
    assert multitask.main(command[3:]) == 0  # as printed, after `python -m tasks.multitask`
    said = capsys.readouterr().err
    assert f"sst dev: accuracy={sst}" in said
    assert "precision: fp32 (the default under --predict" in said  # not "--precision fp32": no flag gave it
    assert f"--max-length 64 (the run's settings, from {out / 'best' / 'heads.json'})" in said
    imports, _, encode = table[9].partition("tuned encoder: ")[2].partition("; ")
    scope: dict = {}
    exec(imports, scope)
    assert eval(encode, scope).shape == (1, 32)  # the tiny model's hidden size


def test_the_readmes_main_job_commands_run_in_order_as_written(tiny_model_dir, tmp_path, monkeypatch):
    """README.md's commands under "The main job", run in order from a clone's root with a tiny model's flags
    added (the same on every line, as --resume wants); the bert-base-uncased line needs a Hugging Face cache,
    so it is parsed, not run."""
    import re
    import shlex
    from pathlib import Path
    from tasks import multitask
    from tasks.data.sources import SAMPLE_DIR

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    block = re.search(r"^## The main job.*?^```\n(.*?)^```", readme, re.S | re.M).group(1)
    commands = [shlex.split(line, comments=True) for line in block.replace("\\\n", " ").splitlines()]
    assert len(commands) == 4 and all(c[:3] == ["python", "-m", "tasks.multitask"] for c in commands)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").symlink_to(SAMPLE_DIR.parent)  # the clone's data/sample/
    tiny = ["--model", str(tiny_model_dir), "--data-dir", str(SAMPLE_DIR), "--limit", "80", "--batch-size",
            "2", "--max-length", "32", "--epochs", "1"]  # 40 batches a task: 120 steps an epoch
    record = tmp_path / "runs" / "mine" / "run.json"
    for command, finished in zip(commands, (False, True, True)):
        assert multitask.main(command[3:] + tiny) == 0, command
        assert ("finished" in json.loads(record.read_text())) == finished, command
    assert len((tmp_path / "answers.csv").read_text().splitlines()) == 81  # the header and the 80 sentences
    assert multitask.build_parser().parse(commands[3][3:]).job.model == "bert-base-uncased"
