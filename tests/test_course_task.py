"""A course task is one row: a fourth task (CFIMDB sentiment, from the shared data) added to the main job in
one row trains with the three others and gets its own file flags, head, dev metrics, overall share, weight
and prediction files; --predict rebuilds it. The three rows' losses: test_multitask_levers.py."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from safetensors.torch import load_file

from tasks import multitask
from tasks.data.course import read_predictions, read_split
from tasks.models.course_task import Accuracy, Classifier, Cosine, CourseTask, argmax, cross_entropy

# The fourth task: everything a task needs, in one row.
CFIMDB = CourseTask("cfimdb", "cfimdb", "cfimdb", Classifier(2, pooling="mean"), cross_entropy, argmax,
                    Accuracy(), "Predicted_Sentiment", weight=2.0)
FOUR = multitask.TASKS + (CFIMDB,)


def test_the_course_file_flags_are_made_from_the_table(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # argparse wraps at the terminal's width, and breaks paths at hyphens
    flags = {option for action in multitask.build_parser(FOUR)._actions for option in action.option_strings}
    assert {"--cfimdb-train", "--cfimdb-dev", "--cfimdb-test", "--cfimdb-dev-out",
            "--cfimdb-test-out"} <= flags
    help_text = multitask.build_parser(FOUR).format_help()
    assert "instead of <data-dir>/ids-cfimdb-train.csv" in help_text
    assert "instead of <out>/predictions/cfimdb-test-output.csv" in help_text
    assert "--cfimdb-train" not in multitask.build_parser().format_help()  # the main job's own three


def test_a_row_whose_head_does_not_read_its_examples_is_refused():
    with pytest.raises(ValueError, match="cfimdb's examples are sentences, but its head reads pairs"):
        replace(CFIMDB, head=Cosine(learn_scale=False))


def test_a_fourth_task_trains_with_the_three_others(data_dir, tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    argv = ["--model", str(tiny_model_dir), "--data-dir", str(data_dir), "--limit", "16", "--batch_size", "8",
            "--max-length", "64", "--epochs", "1", "--out", str(out)]
    assert multitask.main(argv, FOUR) == 0  # 8 steps, 2 a task

    record = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert set(record["dev"]) == set(record["train_loss"]) == {"sst", "para", "sts", "cfimdb"}
    assert record["train_loss"]["cfimdb"] > 0 and 0 <= record["dev"]["cfimdb"]["accuracy"] <= 1
    scores = [record["dev"]["sst"]["accuracy"], record["dev"]["para"]["accuracy"],
              (record["dev"]["sts"]["pearson"] + 1) / 2, record["dev"]["cfimdb"]["accuracy"]]
    assert record["overall"] == pytest.approx(sum(scores) / 4)
    config = json.loads((out / "config.json").read_text())
    assert config["task_weights"] == [["sts", 4.0], ["cfimdb", 2.0]]  # each row's own weight
    assert "cfimdb_train" in config and "cfimdb_test_out" in config
    heads = load_file(out / "best" / "heads.safetensors")
    assert heads["cfimdb.classifier.weight"].shape == (2, 32)  # its own head beside SST's 5 classes
    assert heads["sentiment.classifier.weight"].shape == (5, 32)

    for split in ("dev", "test"):
        header, rows = read_predictions(out / "predictions" / f"cfimdb-{split}-output.csv")
        assert header == "Predicted_Sentiment"
        examples = read_split(data_dir / "cs224n", "cfimdb", split).examples[:16]
        assert [r[0] for r in rows] == [e.id for e in examples]
        assert {r[1] for r in rows} <= {"0", "1"}

    predicted = tmp_path / "predicted"
    assert multitask.main(["--predict", str(out), "--data-dir", str(data_dir), "--limit", "16", "--out",
                           str(predicted)], FOUR) == 0
    for split in ("dev", "test"):
        name = f"cfimdb-{split}-output.csv"
        assert read_predictions(predicted / name) == read_predictions(out / "predictions" / name)
