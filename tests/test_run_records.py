"""Every file a run folder holds, read back through its reader (tasks/training/run_folder.py, checkpoints.py) and its
declared schema (minbert/loading/schema.py): damaged, another JSON type, a field of the wrong type, out of
range, missing, or another job's file, each refused naming the file and the field; and the jobs' --resume
and --predict end with one line on such a folder, never a traceback or a silent wrong run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from minbert.loading.files import FileContentError
from tasks.data.sources import SAMPLE_DIR
from minbert.loading.schema import read_document
from tasks.training.checkpoints import check_training_checkpoint, read_heads
from tasks.training.run_folder import INPUTS, RUN, read_metrics, settings_schema
from tasks.training.seeds import RESULT
from tasks.training.settings import JobSettings, TrainingSettings

FINGERPRINT = {"path": "/data/a.csv", "bytes": 10, "sha256": "ab" * 32}


def refused(read, path: Path, text: str, *named: str) -> str:
    """Write `text` to `path`, read it, and check the refusal names the file and every one of `named`."""
    path.write_text(text)
    with pytest.raises(FileContentError) as error:
        read(path)
    message = str(error.value)
    assert str(path) in message and all(name in message for name in named), message
    return message


SHAPES = [("[]", "got []"), ("null", "got null"), ('"run"', 'got "run"'), ("3", "got 3")]


@pytest.mark.parametrize("schema, good, wrong", [
    (RUN, {"job": "sentiment", "model": "m", "task": "sst"},
     [({"job": 3, "model": "m"}, "job"), ({"model": "m"}, "lacks job"), ({"job": "x", "model": None}, "model")]),
    (INPUTS, {"data": [FINGERPRINT], "model": []},
     [({"data": "a.csv", "model": []}, "data"), ({"data": []}, "model"),
      ({"data": [{**FINGERPRINT, "bytes": -1}], "model": []}, "data[0].bytes"),
      ({"data": [{**FINGERPRINT, "sha256": 5}], "model": []}, "sha256"),
      ({"data": [FINGERPRINT], "model": [{"path": "x"}]}, "bytes")]),
    (RESULT, {"seed": 1, "final": {"accuracy": 0.5}, "best": {}},
     [({"seed": "1", "final": {}, "best": {}}, "seed"), ({"seed": 1, "final": []}, "final"),
      ({"seed": 1, "final": {}}, "best")]),
], ids=["run.json", "inputs.json", "result.json"])
def test_each_run_record_refuses_another_shape_or_a_wrong_field_naming_file_and_field(tmp_path, schema, good,
                                                                                      wrong):
    path = tmp_path / "record.json"
    path.write_text(json.dumps(good))
    assert read_document(path, schema) == good

    def read(p):
        return read_document(p, schema)
    for text, what in SHAPES:
        refused(read, path, text, "expected a JSON object", what)
    refused(read, path, '{"job": ', "not valid JSON")
    for document, field in wrong:
        refused(read, path, json.dumps(document), field)


def test_the_settings_schema_is_the_flags_kinds_and_choices(tmp_path):
    path = tmp_path / "config.json"
    schema = settings_schema(JobSettings(), TrainingSettings())

    def read(p):
        return read_document(p, schema)
    saved = {"lr": 1e-5, "epochs": 2, "schedule": "linear", "out": None, "data_path": "/data", "max_grad_norm":
             float("inf")}
    path.write_text(json.dumps(saved))
    assert read(path)["lr"] == 1e-5  # other keys (where the data was) kept, infinity a number
    for text, what in SHAPES:
        refused(read, path, text, "expected a JSON object", what)
    for field, value, said in [("lr", "fast", "lr must be a number"), ("epochs", 2.5, "epochs must be an integer"),
                               ("schedule", "zigzag", "schedule is 'zigzag'"), ("use_gpu", "yes", "use_gpu"),
                               ("max_length", None, "max_length must be an integer, got null")]:
        refused(read, path, json.dumps({**saved, field: value}), said)


def test_metrics_lines_are_checked_naming_file_and_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"epoch": 1, "epoch_complete": true}\n{"epoch": 2}\n')
    assert [r["epoch"] for r in read_metrics(path)] == [1, 2]
    refused(read_metrics, path, '{"epoch": 1}\n[]\n', f"{path}:2 must be an object, got []")
    refused(read_metrics, path, '{"epoch": -1}\n', f"{path}:1", "epoch must be an integer in [0, inf]")
    refused(read_metrics, path, '{"epoch": 1, "epoch_complete": "yes"}\n', "epoch_complete must be true or false")
    refused(read_metrics, path, '{"epoch": 1\n', f"{path}:1", "not valid JSON")


def training_checkpoint(model: torch.nn.Module) -> dict:
    return {"model": model.state_dict(), "optimizer": {}, "scheduler": {}, "torch_rng": torch.get_rng_state(),
            "python_rng": (3, (1, 2), None),
            "train_state": {"epoch": 0, "step_in_epoch": 2, "global_step": 2, "best_score": float("-inf"),
                            "best_epoch": -1, "history": [], "epoch_losses": {}, "step_losses": {}}}


@pytest.mark.parametrize("change, named", [
    (lambda p: [], "must be an object, got []"),
    (lambda p: {k: v for k, v in p.items() if k != "optimizer"}, "lacks optimizer"),
    (lambda p: {**p, "train_state": []}, "train_state must be an object"),
    (lambda p: {**p, "train_state": {**p["train_state"], "epoch": "1"}}, "train_state.epoch must be an integer"),
    (lambda p: {**p, "train_state": {**p["train_state"], "global_step": -3}}, "train_state.global_step"),
    (lambda p: {**p, "model": {**p["model"], "weight": torch.zeros(2, 3)}},
     "weight (2, 3), the model's (3, 2)"),
    (lambda p: {**p, "model": {"weight": p["model"]["weight"]}}, "does not fit the model (missing ['bias']"),
    (lambda p: {**p, "model": {**p["model"], "bias": [0.0, 0.0, 0.0]}}, "model['bias'] must be a tensor"),
])
def test_the_dict_inside_a_training_checkpoint_is_checked(tmp_path, change, named):
    model = torch.nn.Linear(2, 3)
    path = tmp_path / "last.pt"
    payload = training_checkpoint(model)
    assert check_training_checkpoint(payload, path, model) is payload
    with pytest.raises(ValueError) as error:  # FileContentError, or CheckpointError for a shape
        check_training_checkpoint(change(payload), path, model)
    assert str(path) in str(error.value) and named in str(error.value), error.value


def test_heads_safetensors_cut_short_or_reshaped_is_named_with_both_shapes(tmp_path):
    path = tmp_path / "heads.safetensors"
    heads = {"sst.weight": torch.ones(5, 3), "sst.bias": torch.zeros(5)}
    save_file(heads, str(path))
    assert torch.equal(read_heads(path, heads)["sst.weight"], heads["sst.weight"])
    whole = path.read_bytes()
    path.write_bytes(whole[:len(whole) // 2])
    with pytest.raises(ValueError, match=f"{path}: not a readable safetensors file"):
        read_heads(path, heads)
    save_file({**heads, "sst.weight": torch.ones(4, 3)}, str(path))
    with pytest.raises(ValueError, match=r"of another shape \[\"sst.weight \(4, 3\), the model's \(5, 3\)\"\]"):
        read_heads(path, heads)


# ----- the jobs: --resume and --predict on a damaged folder end in one line ------------------------------


@pytest.fixture(scope="module")
def stopped(tiny_model_dir, tmp_path_factory) -> tuple[list[str], Path]:
    """A sentiment run stopped after one step (its argv without --out, its folder)."""
    from tasks import sentiment

    out = tmp_path_factory.mktemp("records") / "run"
    argv = ["--model", str(tiny_model_dir), "--data-dir", str(SAMPLE_DIR), "--limit", "16", "--batch_size", "8",
            "--epochs", "1", "--max-length", "32", "--threads", "1"]
    assert sentiment.main([*argv, "--out", str(out), "--max-steps", "1"]) == 0
    return argv, out


def resume_refused(job, argv: list[str], out: Path, capsys) -> str:
    with pytest.raises(SystemExit) as error:
        job.main([*argv, "--out", str(out), "--resume"])
    assert "Traceback" not in capsys.readouterr().err
    message = str(error.value.code)
    assert message.startswith("error: "), message
    return message


@pytest.mark.parametrize("name", ["run.json", "inputs.json", "config.json"])
@pytest.mark.parametrize("text", ["[]", "null", '"x"'])
def test_resume_of_a_run_whose_record_is_another_json_type_names_the_file(stopped, tmp_path, capsys, name, text):
    from tasks import sentiment

    argv, original = stopped
    out = tmp_path / "run"
    shutil.copytree(original, out)
    (out / name).write_text(text)
    changed = ["--lr", "0.5"] if name == "config.json" else []  # config.json = []: the change must not pass
    message = resume_refused(sentiment, [*argv, *changed], out, capsys)
    assert f"{out / name}: expected a JSON object" in message


def test_resume_with_a_changed_setting_names_it(stopped, tmp_path, capsys):
    from tasks import sentiment

    argv, original = stopped
    out = tmp_path / "run"
    shutil.copytree(original, out)
    assert "started with --lr" in resume_refused(sentiment, [*argv, "--lr", "0.5"], out, capsys)
    config = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, "lr": "fast"}))
    assert f"{out / 'config.json'}: lr must be a number" in resume_refused(sentiment, argv, out, capsys)


def test_another_jobs_run_given_to_resume_is_refused_naming_the_job(stopped, tiny_model_dir, tmp_path, capsys):
    from tasks import multitask

    _, original = stopped
    out = tmp_path / "run"
    shutil.copytree(original, out)
    argv = ["--model", str(tiny_model_dir), "--data-dir", str(SAMPLE_DIR), "--limit", "16", "--epochs", "1"]
    message = resume_refused(multitask, argv, out, capsys)
    assert "sentiment" in message and "multitask" in message, message


@pytest.fixture(scope="module")
def finished_multitask(tiny_model_dir, tmp_path_factory) -> Path:
    from tasks import multitask

    out = tmp_path_factory.mktemp("records") / "multitask"
    assert multitask.main(["--model", str(tiny_model_dir), "--data-dir", str(SAMPLE_DIR), "--out", str(out),
                           "--limit", "16", "--batch_size", "8", "--epochs", "1", "--max-length", "32",
                           "--max-steps", "1"]) == 0
    return out


@pytest.mark.parametrize("spoil, named", [
    (lambda p: p.write_bytes(p.read_bytes()[:len(p.read_bytes()) // 2]), "not a readable safetensors file"),
    (lambda p: save_file({k: (v[:-1] if k.endswith("weight") else v) for k, v in load_file(str(p)).items()},
                         str(p)), "of another shape"),
    (lambda p: (p.unlink(), p.mkdir()), "is a folder, not a file"),
])
def test_predict_with_damaged_heads_names_the_file_and_tensor(finished_multitask, tmp_path, capsys, spoil,
                                                              named):
    from tasks import multitask

    run = tmp_path / "run"
    shutil.copytree(finished_multitask, run)
    # a best/ saved before checksums: the reader itself names the fault (test_saves checks the checksum's line)
    (run / "best" / "checksums.sha256").unlink()
    spoil(run / "best" / "heads.safetensors")
    with pytest.raises(SystemExit) as error:
        multitask.main(["--predict", str(run), "--data-dir", str(SAMPLE_DIR), "--limit", "16", "--out",
                        str(tmp_path / "predicted")])
    message = str(error.value.code)
    assert message.startswith(f"error: {run / 'best' / 'heads.safetensors'}") and named in message, message
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("text, named", [("[]", "expected a JSON object"), ("{}", "lacks its job"),
                                         ('{"job": "multitask", "sentiment_pooling": "attention"}',
                                          "sentiment_pooling is 'attention'"),
                                         ('{"job": "multitask", "sentiment_pooling": "mean"}',
                                          "lacks hidden_dropout_prob"),
                                         ('{"job": "tag"}', "written by tasks.tag")])
def test_predict_with_a_damaged_heads_json_names_the_file_and_field(finished_multitask, tmp_path, text, named):
    from tasks import multitask

    run = tmp_path / "run"
    shutil.copytree(finished_multitask, run)
    (run / "best" / "checksums.sha256").unlink()  # as above: the reader's own message
    (run / "best" / "heads.json").write_text(text)
    with pytest.raises(SystemExit) as error:
        multitask.main(["--predict", str(run), "--data-dir", str(SAMPLE_DIR), "--limit", "16"])
    assert "heads.json" in str(error.value.code) and named in str(error.value.code), error.value.code
