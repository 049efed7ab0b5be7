"""The main job's course-starter flags (--sst_train ... --sts_test_out) and its predict-only mode
(--predict RUN_DIR): a student's commands carry over, and a finished run predicts files it never saw."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks import multitask, sentiment
from tasks.data.course import read_predictions, read_split
from tasks.data.sources import SAMPLE_DIR

PREFIXES = {"sst": "ids-sst", "para": "quora", "sts": "sts"}


def first_rows(source: Path, target: Path, rows: int) -> Path:
    """The header and the first `rows` data rows of a course file, as a new file."""
    target.write_text("".join(source.read_text(encoding="utf-8").splitlines(keepends=True)[:rows + 1]),
                      encoding="utf-8")
    return target


def ids_of(path: Path) -> list[str]:
    return [row[0] for row in read_predictions(path)[1]]


@pytest.fixture(scope="module")
def finished_run(tiny_multitask_run, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("course") / "run"
    assert multitask.main(tiny_multitask_run(out)) == 0
    return out


def test_every_course_flag_is_there_with_the_courses_name_and_dashed(tmp_path):
    parser = multitask.build_parser()
    flags = {option for action in parser._actions for option in action.option_strings}
    given = tmp_path / "given.csv"
    given.write_text("x")
    for prefix in ("sst", "para", "sts"):
        for split in ("train", "dev", "test"):
            assert f"--{prefix}-{split}" in flags  # --help shows the dashed name; the course's is taken too
            for spelled in (f"--{prefix}_{split}", f"--{prefix}-{split}"):
                assert getattr(parser.parse([spelled, str(given)]).files, f"{prefix}_{split}") == str(given)
        for split in ("dev", "test"):
            assert f"--{prefix}-{split}-out" in flags
            assert getattr(parser.parse([f"--{prefix}_{split}_out", str(given)]).files,
                           f"{prefix}_{split}_out") == str(given)
    files = parser.parse([]).files
    assert files.sst_train is None and files.sts_test_out is None  # unset: --data-dir's and --out's files


def test_file_flags_replace_the_data_folders_files(tiny_multitask_run, tmp_path):
    sst_dev = first_rows(SAMPLE_DIR / "ids-sst-dev.csv", tmp_path / "my-sst-dev.csv", 5)
    sts_train = first_rows(SAMPLE_DIR / "sts-train.csv", tmp_path / "my-sts-train.csv", 9)
    custom_out = tmp_path / "elsewhere" / "sst-dev.csv"
    out = tmp_path / "run"
    assert multitask.main(tiny_multitask_run(out, "--sst_dev", str(sst_dev), "--sts_train",
                                   str(sts_train), "--sst_dev_out", str(custom_out))) == 0
    assert ids_of(custom_out) == [e.id for e in read_split(SAMPLE_DIR, "sst", "dev").examples[:5]]
    assert not (out / "predictions" / "sst-dev-output.csv").exists()  # it went where the flag said
    assert (out / "predictions" / "sst-test-output.csv").is_file()  # the others keep their place
    config = json.loads((out / "config.json").read_text())
    assert config["sst_dev"] == str(sst_dev) and config["sts_train"] == str(sts_train)


def test_a_flag_naming_a_missing_file_or_a_folder_is_refused(tiny_multitask_run, tmp_path, capsys):
    with pytest.raises(SystemExit):
        multitask.main(tiny_multitask_run(tmp_path / "a", "--para_dev", str(tmp_path / "nothing.csv")))
    assert "--para-dev" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        multitask.main(tiny_multitask_run(tmp_path / "b", "--sts_test_out", str(tmp_path)))
    assert "--sts-test-out" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_predict_rewrites_the_runs_own_predictions(finished_run, tmp_path, capsys, same_predictions):
    out = tmp_path / "predicted"
    assert multitask.main(["--predict", str(finished_run), "--data-dir", str(SAMPLE_DIR), "--limit", "16",
                           "--out", str(out)]) == 0
    for prefix in PREFIXES:
        for split in ("dev", "test"):
            name = f"{prefix}-{split}-output.csv"
            own = read_predictions(finished_run / "predictions" / name)
            same_predictions(read_predictions(out / name), own)
    err = capsys.readouterr().err
    assert "sst dev: accuracy=" in err and "sts dev: pearson=" in err
    best = json.loads((finished_run / "metrics.jsonl").read_text().splitlines()[-1])["dev"]
    assert f"accuracy={best['sst']['accuracy']:.4f}" in err


def test_predict_writes_only_the_files_named(finished_run, tmp_path):
    sts_test = first_rows(SAMPLE_DIR / "sts-test-student.csv", tmp_path / "new-sts-test.csv", 7)
    target = tmp_path / "answers" / "sts.csv"
    out = tmp_path / "predicted"
    assert multitask.main(["--predict", str(finished_run / "best"), "--sts_test", str(sts_test),
                           "--sts_test_out", str(target), "--out", str(out)]) == 0
    header, rows = read_predictions(target)
    assert header == "Predicted_Similiary" and len(rows) == 7
    assert all(0 <= float(value) <= 5 for _, value in rows)
    assert not out.exists()  # nothing else was asked for


@pytest.mark.parametrize("extra, message", [
    (["--sst_train", "SAMPLE"], "--sst-train belong(s) to training"),
    (["--resume"], "--resume belong(s) to training"),
])
def test_predict_refuses_training_flags(finished_run, extra, message, capsys):
    extra = [str(SAMPLE_DIR / "ids-sst-train.csv") if e == "SAMPLE" else e for e in extra]
    with pytest.raises(SystemExit) as error:
        multitask.main(["--predict", str(finished_run), *extra])
    assert error.value.code == 2 and message in capsys.readouterr().err  # a usage error, before any work


def test_predict_names_what_is_wrong_with_the_folder(tiny_model_dir, tmp_path):
    with pytest.raises(SystemExit) as error:
        multitask.main(["--predict", str(tmp_path)])
    assert "heads.json" in str(error.value.code) and "tasks.multitask run" in str(error.value.code)
    sentiment_run = tmp_path / "sentiment"
    assert sentiment.main(["--model", str(tiny_model_dir), "--data-dir", str(SAMPLE_DIR), "--out",
                           str(sentiment_run), "--limit", "16", "--epochs", "1", "--max-steps", "1"]) == 0
    with pytest.raises(SystemExit) as error:
        multitask.main(["--predict", str(sentiment_run)])
    assert "written by tasks.sentiment" in str(error.value.code)
