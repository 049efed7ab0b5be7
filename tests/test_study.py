"""The fine-tuning study runner (experiments/study.py): the studies' runs, a half-finished study resumed
without redoing finished runs, the table and the verdict; and the multi-task-then-single-task path (a
multitask checkpoint as the starting point of tasks.classify)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from experiments import study
from tasks import classify, multitask
from tasks.data.sources import SAMPLE_DIR


def test_the_studies_and_their_runs():
    studies = study.build_studies(num_layers=6)
    assert set(studies) == {"long-text", "layer-features", "layer-decay", "forgetting", "few-shot"}
    for s in studies.values():
        names = [r.name for r in s.runs]
        assert len(names) == len(set(names)) and (not s.paper_best or s.paper_best in names)
    layers = [r.name for r in studies["layer-features"].runs]
    assert layers[:7] == [f"layer-{k}" for k in range(7)] and "last-4-concat" in layers and len(layers) == 16
    few = studies["few-shot"].runs
    assert few[0].module == "pretrain.run"
    assert all(r.needs == "pretrain-sst" for r in few if r.name.startswith("pretrained-"))
    assert [r.name for r in studies["long-text"].runs] == ["head", "tail", "head+tail", "chunks-mean",
                                                           "chunks-max", "chunks-attention"]


@pytest.fixture
def shared_root(tmp_path) -> Path:
    """A shared-data folder whose cs224n/ is the bundled demo sample (cfimdb files included)."""
    root = tmp_path / "shared"
    root.mkdir()
    os.symlink(SAMPLE_DIR, root / "cs224n")
    return root


def tiny_study() -> study.Study:
    runs = (study.classify_run("head", "cfimdb", "--truncation", "head"),
            study.classify_run("chunks-mean", "cfimdb", "--chunks", "mean"))
    return study.Study("tiny", "two cfimdb runs", "head+tail is best", runs, paper_best="head")


def test_a_half_finished_study_resumes_without_redoing_finished_runs(tiny_model_dir, shared_root, tmp_path):
    extra = ["--model", str(tiny_model_dir), "--data-dir", str(shared_root), "--limit", "16", "--epochs", "1",
             "--batch_size", "8", "--max-length", "32"]
    calls = []

    def recording(module, argv):
        calls.append(argv[argv.index("--out") + 1])
        return study.run_module(module, argv)

    out = tmp_path / "study"
    rows = study.run_study(tiny_study(), out, seeds=[1, 2], extra=extra, runner=recording)
    assert [Path(c).name for c in calls] == ["head", "chunks-mean"]
    assert [r["run"] for r in rows] == ["head", "chunks-mean"] and all(len(r["curves"]) == 2 for r in rows)
    finished = (out / "tiny" / "head" / "summary.json").stat().st_mtime_ns
    # Stop the second run half-way: its second seed is gone, and so is the run's summary.
    (out / "tiny" / "chunks-mean" / "summary.json").unlink()
    for path in sorted((out / "tiny" / "chunks-mean" / "seed-2").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    calls.clear()
    rows_again = study.run_study(tiny_study(), out, seeds=[1, 2], extra=extra, runner=recording)
    assert [Path(c).name for c in calls] == ["chunks-mean"]  # the finished run is not redone
    assert (out / "tiny" / "head" / "summary.json").stat().st_mtime_ns == finished
    assert rows_again[0] == rows[0] and rows_again[1]["error"] == pytest.approx(rows[1]["error"])
    text = study.table(tiny_study(), rows_again)
    assert "| head |" in text and "| chunks-mean |" in text and "Paper (Sun et al. 2019" in text


def test_more_seeds_later_runs_only_the_new_seeds(tiny_model_dir, shared_root, tmp_path):
    extra = ["--model", str(tiny_model_dir), "--data-dir", str(shared_root), "--limit", "16", "--epochs", "1",
             "--batch_size", "8", "--max-length", "32"]
    one = study.Study("one", "one cfimdb run", "x", tiny_study().runs[:1], paper_best="head")
    rows = study.run_study(one, tmp_path, seeds=[1], extra=extra)
    assert rows[0]["seeds"] == [1]
    seed_1 = tmp_path / "one" / "head" / "seed-1"
    # A finished seed's resume checkpoints are dropped (they are large); its best checkpoint stays.
    assert not (seed_1 / "checkpoints").exists() and (seed_1 / "best" / "model.safetensors").is_file()
    first = (tmp_path / "one" / "head" / "seed-1" / "result.json").stat().st_mtime_ns
    argvs = []

    def recording(module, argv):
        argvs.append(argv)
        return study.run_module(module, argv)

    rows = study.run_study(one, tmp_path, seeds=[1, 2], extra=extra, runner=recording)
    assert len(argvs) == 1 and "--resume" in argvs[0] and rows[0]["seeds"] == [1, 2]
    assert (tmp_path / "one" / "head" / "seed-1" / "result.json").stat().st_mtime_ns == first  # reused
    assert (tmp_path / "one" / "head" / "seed-2" / "result.json").is_file()
    argvs.clear()
    study.run_study(one, tmp_path, seeds=[2], extra=extra, runner=recording)  # covered: nothing runs
    assert argvs == []
    study.run_study(one, tmp_path / "kept", seeds=[1], extra=extra, keep_checkpoints=True)
    assert (tmp_path / "kept" / "one" / "head" / "seed-1" / "checkpoints" / "last.pt").is_file()


def test_verdict_says_whether_the_paper_best_is_ours():
    s = tiny_study()
    rows = [{"run": "head", "error": 0.10, "std": 0.01}, {"run": "chunks-mean", "error": 0.20, "std": 0.01}]
    assert study.verdict(s, rows).endswith(": agrees")
    rows = [{"run": "head", "error": 0.30, "std": 0.01}, {"run": "chunks-mean", "error": 0.20, "std": 0.01}]
    assert study.verdict(s, rows).endswith(": disagrees")
    rows = [{"run": "head", "error": 0.205, "std": 0.01}, {"run": "chunks-mean", "error": 0.20, "std": 0.01}]
    assert study.verdict(s, rows).endswith("agrees within one std")


def test_only_runs_the_named_runs_and_the_table_marks_the_rest_not_run(tiny_model_dir, shared_root, tmp_path):
    extra = ["--model", str(tiny_model_dir), "--data-dir", str(shared_root), "--limit", "16", "--epochs", "1",
             "--batch_size", "8", "--max-length", "32"]
    calls = []

    def recording(module, argv):
        calls.append(Path(argv[argv.index("--out") + 1]).name)
        return study.run_module(module, argv)

    rows = study.run_study(tiny_study(), tmp_path, seeds=[1], extra=extra, runner=recording,
                           only=["chunks-mean"])
    assert calls == ["chunks-mean"]
    assert rows[0] == {"run": "head", "error": None, "std": None, "seeds": [], "curves": []}
    assert rows[1]["error"] is not None
    text = study.table(tiny_study(), rows)
    assert "| head | not run | 0 |" in text and "the paper's best here, head, is not run yet" in text
    assert "(not run yet: head)" in text
    study.plot(tiny_study(), rows, tmp_path / "plot.png")  # draws the runs that are done
    assert (tmp_path / "plot.png").stat().st_size > 0
    with pytest.raises(ValueError, match="no run"):
        study.run_study(tiny_study(), tmp_path, seeds=[1], only=["tail"], runner=recording)


def test_only_a_pretrained_run_also_runs_the_pre_training_it_starts_from(tmp_path, capsys):
    few = study.build_studies()["few-shot"]
    assert study.run_study(few, tmp_path, seeds=[1], dry_run=True, only=["pretrained-0.01"]) == []
    err = capsys.readouterr().err
    assert "few-shot/pretrain-sst:" in err and "few-shot/pretrained-0.01:" in err and "plain-" not in err


def few_shot_rows(pairs: dict[float, tuple[float, float, float]]) -> list[dict]:
    """{fraction: (plain error, pretrained error, std of both)} -> the rows collect() gives."""
    rows = []
    for f, (plain, pretrained, std) in pairs.items():
        rows += [{"run": f"plain-{f}", "error": plain, "std": std, "seeds": [1, 2]},
                 {"run": f"pretrained-{f}", "error": pretrained, "std": std, "seeds": [1, 2]}]
    return rows


def test_few_shot_verdict_counts_only_differences_beyond_one_std():
    few = study.build_studies()["few-shot"]
    helped = few_shot_rows({0.004: (0.35, 0.30, 0.01), 0.01: (0.25, 0.20, 0.01), 0.1: (0.12, 0.12, 0.01)})
    text = study.verdict(few, helped)
    assert "lowered the error by more than one std at fractions [0.004, 0.01]" in text and "; agrees" in text
    noise = few_shot_rows({0.004: (0.35, 0.34, 0.02), 0.01: (0.22, 0.23, 0.02)})
    assert "disagrees: no difference beyond one std" in study.verdict(few, noise)
    hurt = few_shot_rows({0.004: (0.30, 0.35, 0.01), 0.01: (0.22, 0.22, 0.01)})
    text = study.verdict(few, hurt)
    assert "raised it at [0.004]" in text and text.split("; ")[1].startswith("disagrees (the paper")
    assert "not run yet" in study.verdict(few, helped + [{"run": "plain-0.2", "error": None, "std": None}])
    one_seed = [{**r, "seeds": [1], "std": 0.0} if r["run"].endswith("-0.1") else r for r in helped]
    assert "(one seed, not judged: [0.1])" in study.verdict(few, one_seed)


def test_table_only_writes_the_table_of_the_runs_done_and_runs_nothing(tmp_path, capsys):
    run_dir = tmp_path / "forgetting" / "lr2e-5"
    (run_dir / "seed-1").mkdir(parents=True)
    (run_dir / "summary.json").write_text(json.dumps(
        {"seeds": [1], "final": {"accuracy": {"mean": 0.8, "std": 0.0}}}))
    (run_dir / "seed-1" / "metrics.jsonl").write_text(
        "\n".join(json.dumps({"dev": {"sst2": {"accuracy": a}}}) for a in (0.7, 0.8)) + "\n")
    assert study.main(["forgetting", "--table-only", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "forgetting" / "table.md").read_text()
    assert "| lr2e-5 | 20.00 ± 0.00 | 1 |" in text and "| lr4e-4 | not run | 0 |" in text
    assert (tmp_path / "forgetting" / "plot.png").stat().st_size > 0
    assert sorted(p.name for p in (tmp_path / "forgetting").iterdir()) == ["lr2e-5", "plot.png", "table.md"]


def test_dry_run_prints_the_commands_and_runs_nothing(tmp_path, capsys):
    assert study.main(["forgetting", "--dry-run", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert err.count("python -m tasks.classify") == 4 and "--lr 4e-4" in err and not any(tmp_path.iterdir())


def test_multitask_then_single_task_starts_classify_from_the_multitask_encoder(tiny_model_dir, shared_root,
                                                                               tmp_path):
    mt = tmp_path / "multitask"
    assert multitask.main(["--model", str(tiny_model_dir), "--data-dir", str(SAMPLE_DIR), "--out", str(mt),
                           "--limit", "16", "--batch_size", "8", "--epochs", "1", "--max-length", "32",
                           "--max-steps", "2"]) == 0
    out = tmp_path / "fit"
    assert classify.main(["--model", str(mt / "best"), "--data-dir", str(shared_root), "--task", "cfimdb",
                          "--out", str(out), "--limit", "16", "--epochs", "1", "--batch_size", "8",
                          "--max-length", "32", "--lr", "2e-5"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["model"] == str(mt / "best") and config["lr"] == 2e-5


def test_an_interrupted_run_stops_the_study_with_how_to_continue_and_is_not_done(tmp_path, capsys):
    pretraining = study.Study("p", "one pre-training run", "", (study.Run("pre", "pretrain.run", (), seeded=False),),
                              paper_best="")

    def interrupted(module, argv):  # what a job does on SIGTERM: best/ of an earlier epoch, saved, exit 143
        out = Path(argv[argv.index("--out") + 1])
        (out / "best").mkdir(parents=True)
        (out / "best" / "model.safetensors").write_bytes(b"")
        (out / "run.json").write_text(json.dumps({"job": "pretrain"}))
        raise SystemExit(143)

    with pytest.raises(SystemExit) as stop:
        study.run_study(pretraining, tmp_path, seeds=[1], runner=interrupted)
    assert stop.value.code == 143
    assert "run the same study command again to continue" in capsys.readouterr().err
    assert not study.is_done(pretraining.runs[0], tmp_path / "p" / "pre")  # best/ alone is not finished
    (tmp_path / "p" / "pre" / "run.json").write_text(json.dumps({"job": "pretrain", "finished": "now"}))
    assert study.is_done(pretraining.runs[0], tmp_path / "p" / "pre")
