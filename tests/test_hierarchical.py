"""python -m tasks.hierarchical on a tiny model and a small HWV-format collection written here: every
artefact, the tables, the layer map actually used, the analysis, bad flags, and the notebook. Metrics are
checked in tests/test_structured.py; the shared collections are read in tests/test_hierarchy.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks import hierarchical
from tasks.models.structured import layer_map

TAXONOMY = "Root\tAnimals\tPlaces\nAnimals\tCats\tDogs\nPlaces\tCities\nCats\tLions\n"
PATHS = [["Animals", "Cats", "Lions"], ["Animals", "Cats"], ["Animals", "Dogs"], ["Places", "Cities"]]
TEXTS = {"Lions": "the lion roars on the savanna", "Cats": "a cat sat on the mat and purred",
         "Dogs": "the dog barked at the mail carrier", "Cities": "the city has a river and many bridges"}


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("data")
    (root / "hwv").mkdir()
    (root / "hwv" / "hwv.taxonomy").write_text(TAXONOMY, encoding="utf-8")
    for name, count in (("hwv_val.json", 30), ("hwv_test.json", 20)):
        lines = []
        for i in range(count):
            path = PATHS[i % len(PATHS)]
            lines.append(json.dumps({"token": [f"{TEXTS[path[-1]]} number {i}"], "label": path}))
        (root / "hwv" / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def run_args(tiny_model_dir, data_root, out, *extra):
    return ["--model", str(tiny_model_dir), "--data-dir", str(data_root), "--out", str(out),
            "--dataset", "hwv", "--batch_size", "8", "--epochs", "2", "--max-length", "32", *extra]


@pytest.fixture(scope="module")
def runs(tiny_model_dir, data_root, tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("hierarchical")
    for variant in ("flat", "in-pairs"):
        assert hierarchical.main(run_args(tiny_model_dir, data_root, base / variant,
                                          "--variant", variant)) == 0
    return {variant: base / variant for variant in ("flat", "in-pairs")}


def test_run_writes_every_artefact_with_the_layer_map_it_used(runs):
    out = runs["in-pairs"]
    assert not (out / "checkpoints").exists()  # a finished run drops its resume checkpoints
    for name in ("config.json", "metrics.jsonl", "loss_and_dev.png",
                 "best/model.safetensors", "best/heads.safetensors", "best/heads.json", "rprecision.md",
                 "result.json", "analysis.json", "predictions/test-output.jsonl"):
        assert (out / name).is_file(), name
    result = json.loads((out / "result.json").read_text())
    assert result["layer_map"] == [list(g) for g in layer_map("in-pairs", 2, 3)] == [[1], [2], [2]]
    config = json.loads((out / "config.json").read_text())
    assert config["labels_per_level"] == [2, 3, 1] and config["bias_init"] == "prior"
    for split in ("best", "test_of_best"):
        report = result[split]
        assert {f"level{n}" for n in (1, 2, 3)} <= set(report) and 0 <= report["micro"] <= 1
        assert report["macro"] == pytest.approx(sum(report[f"level{n}"] for n in (1, 2, 3)
                                                    if report[f"level{n}_documents"]) /
                                                sum(1 for n in (1, 2, 3) if report[f"level{n}_documents"]))
    table = (out / "rprecision.md").read_text()
    assert all(f"| level {n} |" in table for n in (1, 2, 3)) and "| micro |" in table and "| macro |" in table
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["epoch"] for m in metrics] == [1, 2] and "micro" in metrics[-1]["dev"]["hwv"]


def test_test_predictions_give_top_r_labels_of_each_level(runs):
    lines = (runs["flat"] / "predictions" / "test-output.jsonl").read_text().splitlines()
    assert len(lines) == 10  # 20% of the 50 documents
    for line in lines:
        row = json.loads(line)
        gold = set(row["gold"])
        assert len(row["top_r"]) == 3
        level2_gold = gold & {"Cats", "Dogs", "Cities"}
        assert len(row["top_r"][1]) == max(1, len(level2_gold))
        assert all(0 <= score <= 1 for level in row["top_r"] for _, score in level)


def test_analysis_has_one_entry_per_layer(runs):
    analysis = json.loads((runs["flat"] / "analysis.json").read_text())
    assert analysis["variant"] == "flat" and analysis["layer_map"] == [[2], [2], [2]]
    # 0..2
    assert len(analysis["cls_angular_distance"]) == 3 and len(analysis["cls_angular_distance"][0]) == 3
    assert len(analysis["attention_entropy"]) == 2 and len(analysis["head_kl"]) == 2
    assert len(analysis["layer_kl"]) == 2 and analysis["documents"] == 5  # the dev split: 10% of 50
    assert all(value >= 0 for value in analysis["attention_entropy"] + analysis["head_kl"])


def test_an_explicit_layer_map_is_used(tiny_model_dir, data_root, tmp_path):
    assert hierarchical.main(run_args(tiny_model_dir, data_root, tmp_path / "run",
                                      "--layer-map", "1:1;2:1,2;3:2", "--epochs", "1", "--no-analysis",
                                      "--bias-init", "default")) == 0
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["variant"] == "custom" and result["layer_map"] == [[1], [1, 2], [2]]
    assert not (tmp_path / "run" / "analysis.json").exists()
    assert json.loads((tmp_path / "run" / "config.json").read_text())["bias_init"] == "default"


@pytest.mark.parametrize("flags, message", [
    (["--variant", "flat", "--layer-map", "1:1;2:1;3:2"], "give --variant or --layer-map, not both"),
    (["--seed", "1", "--seeds", "1", "2"], "give --seed or --seeds, not both"),
    (["--variant", "deep"], "invalid choice: 'deep'"),
])
def test_contradictory_flags_are_errors(tiny_model_dir, data_root, tmp_path, flags, message, capsys):
    with pytest.raises(SystemExit) as error:
        hierarchical.main(run_args(tiny_model_dir, data_root, tmp_path / "run", *flags))
    assert error.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("layer_map_text, message", [
    ("1:1;2:2", "must name each level 1..3 once"),
    ("1:1;2:2;3:7", r"layers \[7\] do not exist: the model has layers 1..2"),
])
def test_bad_layer_maps_are_one_line_errors(tiny_model_dir, data_root, tmp_path, layer_map_text, message):
    with pytest.raises(SystemExit, match=message):
        hierarchical.main(run_args(tiny_model_dir, data_root, tmp_path / "run",
                                   "--layer-map", layer_map_text))


def test_missing_dataset_files_are_named(tiny_model_dir, tmp_path):
    (tmp_path / "hwv").mkdir()
    with pytest.raises(SystemExit, match=r"error: .*hwv\.taxonomy"):
        hierarchical.main(run_args(tiny_model_dir, tmp_path, tmp_path / "run"))


def test_structured_layers_notebook_runs_on_two_tiny_runs(runs, run_notebook):
    outputs = run_notebook("structured_layers.ipynb", {"MINBERT_FLAT_RUN": str(runs["flat"]),
                                                       "MINBERT_STRUCTURED_RUN": str(runs["in-pairs"])})
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 3
    printed = "".join(o.get("text", "") for o in outputs)
    assert "flat (flat)" in printed and "structured (in-pairs)" in printed
