"""Smoke runs of the fine-tuning jobs on a tiny model and the bundled demo sample: every artefact is
written, the predictions parse back in the course's format, and a stopped run resumes identically."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from minbert.model import BertModel
from minbert.sentence_encoder import SentenceEncoder
from tasks import multitask, sentiment
from tasks.data.course import read_predictions, read_split
from tasks.data.sources import SAMPLE_DIR

COURSE_HEADERS = {"sst": "Predicted_Sentiment", "para": "Predicted_Is_Paraphrase",
                  "sts": "Predicted_Similiary"}


def small_run(tiny_model_dir, out, *extra):
    return ["--model", str(tiny_model_dir), "--data-dir", str(SAMPLE_DIR), "--out", str(out), "--limit", "24",
            "--batch_size", "8", "--epochs", "1", "--max-length", "64", *extra]


@pytest.fixture(scope="module")
def multitask_run(tiny_model_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("multitask") / "run"
    assert multitask.main(small_run(tiny_model_dir, out, "--max-steps", "2", "--eval-first")) == 0
    return out


def test_multitask_smoke_run_writes_every_artefact(multitask_run):
    out = multitask_run
    for name in ("config.json", "metrics.jsonl", "loss_and_dev.png", "checkpoints/last.pt",
                 "best/config.json", "best/model.safetensors", "best/vocab.txt", "best/heads.safetensors",
                 "best/heads.json"):
        assert (out / name).is_file(), name
    first = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert first["epoch"] == 0 and first["global_step"] == 0  # --eval-first: the zero-shot baseline
    record = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert set(record["dev"]) == {"sst", "para", "sts"} and record["global_step"] == 2
    assert first["train_s"] is None and record["train_s"] >= 0  # the epoch's training time alone
    assert 0 <= record["overall"] <= 1
    for prefix, dataset in ((t.name, t.dataset) for t in multitask.TASKS):
        for split in ("dev", "test"):
            header, rows = read_predictions(out / "predictions" / f"{prefix}-{split}-output.csv")
            assert header == COURSE_HEADERS[prefix]
            examples = read_split(SAMPLE_DIR, dataset, split).examples[:24]
            assert [r[0] for r in rows] == [e.id for e in examples]
            values = [float(r[1]) for r in rows]
            if prefix == "sts":
                assert all(0 <= v <= 5 for v in values)
            else:
                assert all(v == int(v) for v in values)
    # The saved encoder is a Hugging Face checkpoint that transformers opens.
    transformers = pytest.importorskip("transformers")
    theirs = transformers.BertModel.from_pretrained(out / "best")
    assert theirs.config.hidden_size == 32
    assert "sentiment.classifier.weight" in load_file(out / "best" / "heads.safetensors")


def test_a_full_runs_best_opens_wherever_a_model_folder_opens(multitask_run, tmp_path):
    best = multitask_run / "best"
    model = BertModel.from_pretrained(best)
    encoder = SentenceEncoder(best, device="cpu")
    assert all(torch.equal(v, encoder.model.state_dict()[k]) for k, v in model.state_dict().items())
    assert encoder.encode(["a run folder"], convert_to_tensor=True).shape == (1, 32)
    assert multitask.main(small_run(best, tmp_path / "again", "--max-steps", "1")) == 0  # --model RUN/best


@pytest.mark.parametrize("heads", [["--option", "pretrain", "--sentiment-pooling", "mean"],
                                   ["--r-drop", "0", "--task-weights", "sst=2"]])
def test_multitask_head_options_run(tiny_model_dir, tmp_path, heads):
    assert multitask.main(small_run(tiny_model_dir, tmp_path / "run", "--max-steps", "2", *heads)) == 0
    assert (tmp_path / "run" / "predictions" / "sts-dev-output.csv").is_file()


def test_a_finished_run_drops_its_resume_checkpoints_unless_kept(tiny_model_dir, tmp_path, capsys):
    dropped, kept = tmp_path / "dropped", tmp_path / "kept"
    assert multitask.main(small_run(tiny_model_dir, dropped)) == 0
    assert not (dropped / "checkpoints").exists()
    assert (dropped / "best" / "model.safetensors").is_file() and (dropped / "predictions").is_dir()
    err = capsys.readouterr().err
    assert "dropped the finished run's resume checkpoints" in err
    # stderr is not a terminal here, so no bar was drawn: plain progress lines say where the run is
    assert "epoch 1/1 step " in err and "(100%)" in err and "examples/s ETA" in err
    assert multitask.main(small_run(tiny_model_dir, kept, "--keep-checkpoints")) == 0
    assert (kept / "checkpoints" / "last.pt").is_file()


def test_pretrain_option_keeps_the_encoder_frozen(tiny_model_dir, tmp_path):
    multitask.main(small_run(tiny_model_dir, tmp_path / "run", "--max-steps", "2", "--option", "pretrain"))
    before = load_file(tiny_model_dir / "model.safetensors")
    after = load_file(tmp_path / "run" / "best" / "model.safetensors")
    assert all(torch.equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("task", ["sst", "cfimdb"])
def test_sentiment_smoke_run(tiny_model_dir, tmp_path, task):
    out = tmp_path / "run"
    assert sentiment.main(small_run(tiny_model_dir, out, "--task", task, "--max-steps", "2")) == 0
    header, rows = read_predictions(out / "predictions" / f"{task}-dev-output.csv")
    assert header == "Predicted_Sentiment" and len(rows) == 24
    assert (out / "predictions" / f"{task}-test-output.csv").is_file()


def test_stopped_run_resumes_identically(tiny_model_dir, tmp_path):
    """Stop after 3 of 6 steps (mid-epoch 1), resume: final weights and dev metrics equal a straight run."""
    common = ["--epochs", "2", "--seed", "5", "--hidden_dropout_prob", "0.3",  # dropout: the RNG must resume
              "--keep-checkpoints"]  # the final states are compared below
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    multitask.main(small_run(tiny_model_dir, straight, *common))
    multitask.main(small_run(tiny_model_dir, stopped, *common, "--max-steps", "4"))
    multitask.main(small_run(tiny_model_dir, stopped, *common, "--resume"))
    a, b = (json.loads((d / "metrics.jsonl").read_text().splitlines()[-1]) for d in (straight, stopped))
    assert a["dev"] == b["dev"] and a["global_step"] == b["global_step"]
    last_a = torch.load(straight / "checkpoints" / "last.pt", weights_only=True)["model"]
    last_b = torch.load(stopped / "checkpoints" / "last.pt", weights_only=True)["model"]
    assert all(torch.equal(last_a[k], last_b[k]) for k in last_a)


@pytest.mark.parametrize("flags, message", [
    (["--option", "pretrain", "--layerwise-decay", "0.9"], "--layerwise-decay needs a trainable encoder"),
    (["--use_gpu"], "no CUDA device"),
])
def test_contradictory_flags_are_errors(tiny_model_dir, tmp_path, flags, message, capsys):
    if "--use_gpu" in flags and torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(SystemExit) as error:
        multitask.main(small_run(tiny_model_dir, tmp_path / "run", *flags))
    assert message in str(error.value) + capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--frobnicate"], "unrecognized arguments: --frobnicate"),
    (["--epoch", "3"], "unrecognized arguments: --epoch"),  # no silent abbreviation of --epochs
    (["--epochs", "3x"], "argument --epochs: must be an integer >= 1, got '3x'"),
    (["--sentiment-pooling", "sum"], "invalid choice: 'sum'"),
    (["--sampling", "round-robin"], "unrecognized arguments: --sampling"),  # measured: not the main job's
    (["--schedule", "cosine"], "unrecognized arguments: --schedule"),
])
def test_unknown_or_malformed_flags_are_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as error:
        multitask.main(argv)
    assert error.value.code == 2
    assert message in capsys.readouterr().err


def test_resume_without_checkpoint_says_so(tiny_model_dir, tmp_path):
    with pytest.raises(SystemExit, match="--resume given, but --out .* does not exist"):
        multitask.main(small_run(tiny_model_dir, tmp_path / "new", "--resume"))


def files_of(folder: Path) -> dict:
    """Every file and folder under `folder`, with its bytes and modification time (a rewrite shows)."""
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("keep", [[], ["--keep-checkpoints"]])
def test_resume_on_a_finished_run_says_where_its_results_are_and_writes_nothing(tiny_model_dir, tmp_path,
                                                                                capsys, keep):
    out = tmp_path / "run"
    assert sentiment.main(small_run(tiny_model_dir, out, *keep)) == 0
    assert "finished" in json.loads((out / "run.json").read_text())
    before = files_of(out)
    capsys.readouterr()
    with pytest.raises(SystemExit) as caught:
        sentiment.main(small_run(tiny_model_dir, out, *keep, "--resume"))
    assert caught.value.code == 0  # what --resume is for is done: not an error
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (f"nothing to resume: {out} holds a finished sentiment run (model {tiny_model_dir}); its "
                   f"results are in {out}/best, {out}/predictions, {out}/metrics.jsonl")
    assert files_of(out) == before  # no failed.txt, no config.json rewritten, nothing
    with pytest.raises(SystemExit, match="already holds a finished sentiment run .*; choose a new folder$"):
        sentiment.main(small_run(tiny_model_dir, out, *keep))  # and without --resume: not "add --resume"
    assert files_of(out) == before


def test_a_finished_run_from_before_run_json_said_so_is_still_finished(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "run"
    assert sentiment.main(small_run(tiny_model_dir, out)) == 0
    record = json.loads((out / "run.json").read_text())
    del record["finished"]  # as run.json was written before it recorded the end
    (out / "run.json").write_text(json.dumps(record))
    with pytest.raises(SystemExit) as caught:
        sentiment.main(small_run(tiny_model_dir, out, "--resume"))
    assert caught.value.code == 0 and "nothing to resume" in capsys.readouterr().err


def test_a_run_stopped_before_its_first_checkpoint_is_not_sent_in_a_circle(tiny_model_dir, tmp_path):
    """Without a checkpoint there is nothing to resume: neither message sends the user to the other flag."""
    out = tmp_path / "run"
    assert sentiment.main(small_run(tiny_model_dir, out, "--max-steps", "1", "--keep-checkpoints")) == 0
    shutil.rmtree(out / "checkpoints")  # as a run killed (SIGKILL, power cut) before its first save leaves it
    with pytest.raises(SystemExit) as without:
        sentiment.main(small_run(tiny_model_dir, out))
    with pytest.raises(SystemExit) as resumed:
        sentiment.main(small_run(tiny_model_dir, out, "--resume"))
    assert str(without.value.code) == (f"error: --out {out} already holds a sentiment run (model "
                                       f"{tiny_model_dir}) that stopped before its first checkpoint (nothing "
                                       f"to resume); delete {out} or choose a new folder")
    assert str(resumed.value.code) == (f"error: --resume: {out} holds a sentiment run (model "
                                       f"{tiny_model_dir}) that stopped before its first checkpoint, so "
                                       f"there is nothing to continue; delete {out} (or choose another "
                                       "--out) and run the command without --resume")


def test_multitask_notebook_runs_on_a_finished_run(multitask_run, run_notebook):
    outputs = run_notebook("multitask.ipynb", {"MINBERT_RUN": str(multitask_run)})
    # curves, confusion matrix, STS scatter
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 3
