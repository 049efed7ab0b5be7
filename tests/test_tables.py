"""experiments/tables.py prints docs/results.md's tables from run folders: figures as the runs wrote them,
and what is not run (or not finished) yet listed as such."""

from __future__ import annotations

import json

import pytest
import torch

from experiments import tables


def write(path, record) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


def spread(mean: float, std: float = 0.01) -> dict:
    return {"mean": mean, "std": std}


def test_label_attention_compares_the_arms_and_lists_the_cells_not_run(tmp_path, capsys):
    for arm, accuracy in (("vanilla", 0.5), ("label", 0.625)):
        write(tmp_path / "rte" / arm / "summary.json",
              {"seeds": [1, 2], "final": {"accuracy": spread(accuracy)}, "best": {"accuracy": spread(0.75)}})
    write(tmp_path / "sst2-0.01" / "vanilla" / "summary.json",
          {"seeds": [3], "final": {"accuracy": spread(0.8)}, "best": {"accuracy": spread(0.9)}})
    write(tmp_path / "sst2-0.01" / "vanilla" / "seed-3" / "result.json", {"train_examples": 1234})
    assert tables.main(["label-attention", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert ("| RTE (accuracy) | 2 | 50.0 ± 1.0 (best epoch 75.0) | 62.5 ± 1.0 (best epoch 75.0) | +12.5 | "
            "63.9 -> 66.4 |") in lines
    assert "| WNLI (accuracy) | 0 | not run | not run |  | 55.1 -> 57.8 |" in lines
    assert "| 1% | 1,234 | 1 | 80.0 ± 1.0 (best epoch 90.0) | not run |  |" in lines


def test_tagging_and_structured_list_each_method_and_variant(tmp_path, capsys):
    types = {f"f1_{t}": spread(0.5) for t in tables.TYPES}
    write(tmp_path / "tag" / "bio" / "summary.json", {"seeds": [1], "best": {"token_accuracy": spread(0.9)},
                                                      "final": {**{k: spread(0.25) for k in
                                                                   ("f1", "precision", "recall")}, **types}})
    assert tables.main(["tagging", str(tmp_path / "tag")]) == 0
    out = capsys.readouterr().out
    assert "| `bio` (all pieces labelled, first-piece decoding) | 1 | 0.250 ± 0.010 |" in out
    assert "| `span` (width <= 8, mean pooling) | 0 | not run |" + " |" * 9 + "\n" in out
    variant = tmp_path / "st" / "upper-half"
    write(variant / "summary.json", {"seeds": [1]})
    best = {"level1": 0.5, "level1_documents": 2, "level2": 0.0, "level2_documents": 0, "micro": 0.25,
            "macro": 0.125}
    write(variant / "seed-1" / "result.json",
          {"layer_map": [[3], [4]], "best": best, "test_of_best": {"micro": 0.5, "macro": 0.5}})
    assert tables.main(["structured", str(tmp_path / "st")]) == 0
    out = capsys.readouterr().out
    assert "| upper-half | L1<-3; L2<-4 | 1 | 50.0 ± 0.0 | n/a | 25.0 ± 0.0 | 12.5 ± 0.0 | 50.0 ± 0.0 |" \
        in out
    assert "| flat | | 0 | not run | | | | | |\n" in out
    assert "| upper-half | not run | | | | |\n" in out  # no analysis.json


def test_lora_reads_the_checkpoint_and_the_time_report_and_waits_for_unfinished_arms(tmp_path, capsys):
    for arm in ("r8-lr1e-3", "full", "r2-lr5e-4"):
        (tmp_path / arm).mkdir()
        finished = {"finished": "today"} if arm != "r2-lr5e-4" else {}
        (tmp_path / arm / "run.json").write_text(json.dumps(finished))
    history = [{"overall": 0.5, "train_s": 4.0, "global_step": 10,
                "dev": {"sst": {"accuracy": 0.5}, "para": {"accuracy": 0.75}, "sts": {"pearson": 0.25}}}]
    for arm in ("r8-lr1e-3", "full"):
        (tmp_path / arm / "metrics.jsonl").write_text(json.dumps(history[0]) + "\n")
        (tmp_path / arm / "checkpoints").mkdir()
        torch.save({"optimizer": {"state": {0: {"exp_avg": torch.zeros(4), "exp_avg_sq": torch.zeros(4)}}}},
                   tmp_path / arm / "checkpoints" / "last.pt")
        (tmp_path / f"{arm}.time").write_text("Maximum resident set size (kbytes): 1048576\n"
                                              "Elapsed (wall clock) time (h:mm:ss or m:ss): 1:02.33\n")
    assert tables.main(["lora", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()[2:]
    names = [line.split(" | ")[0] for line in lines]
    assert names == ["| full fine-tuning, lr 5e-5", "| LoRA r = 2, lr 5e-4", "| LoRA r = 8, lr 1e-3"]
    assert lines[0] == ("| full fine-tuning, lr 5e-5 | 0.500 | 0.750 | 0.250 | 0.5000 | 4 | 0.0 MiB | "
                        "0.40 s | 1.00 GiB | 1:02.33 |")
    assert lines[1] == "| LoRA r = 2, lr 5e-4 | not finished |" + " |" * 8


def test_a_table_names_its_choices_and_a_missing_folder_in_one_line(tmp_path):
    with pytest.raises(SystemExit, match="label-attention,lora,structured,tagging"):
        tables.main(["nothing"])
    with pytest.raises(SystemExit, match="no study here .run experiments/label_attention.sh first"):
        tables.main(["label-attention", str(tmp_path / "absent")])
