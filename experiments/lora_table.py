"""docs/results.md's LoRA table from a finished (or partly finished) experiments/lora.sh.

    .venv/bin/python experiments/lora_table.py [runs/lora]

Per arm: the dev figures of its best epoch, the parameters AdamW trains and the bytes of its state (from the
kept checkpoints/last.pt), the mean training step (`train_s` over the steps), and the peak RSS and wall time
of the whole command (/usr/bin/time -v's <arm>.time). An arm still running is listed as such.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import torch

from minbert.loading.checkpoint import read_torch


def arm_name(arm: str) -> str:
    """experiments/lora.sh's arm (full, r<R>-lr<LR>) as the table says it."""
    if arm == "full":
        return "full fine-tuning, lr 5e-5"
    r, lr = re.fullmatch(r"r(\d+)-lr(.+)", arm).groups()
    return f"LoRA r = {r}, lr {lr}"


def arms_in(root: Path) -> list[str]:
    """The arms with a folder under `root`: full first, then by rank and learning rate."""
    def order(arm: str) -> tuple:
        found = re.fullmatch(r"r(\d+)-lr(.+)", arm)
        return (0, 0, 0.0) if arm == "full" else (1, int(found.group(1)), float(found.group(2)))
    return sorted((p.name for p in root.iterdir() if p.is_dir() and (p.name == "full" or
                                                                       re.fullmatch(r"r\d+-lr.+", p.name))),
                  key=order)


def optimizer_state(checkpoint: Path) -> tuple[int, int]:
    """(parameters with AdamW state, bytes of that state) in a run's resume checkpoint."""
    state = read_torch(checkpoint)["optimizer"]["state"]
    params = sum(s["exp_avg"].numel() for s in state.values())
    size = sum(t.numel() * t.element_size() for s in state.values() for t in s.values()
               if isinstance(t, torch.Tensor))
    return params, size


def time_report(path: Path) -> tuple[float, str]:
    """(peak RSS in GiB, wall clock) from /usr/bin/time -v's report."""
    text = path.read_text()
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1))
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", text).group(1)
    return rss_kb / 2**20, wall


def table(root: Path) -> str:
    lines = ["| arm | SST acc | Quora acc | STS Pearson | overall | parameters trained | AdamW state | "
             "step (mean) | peak RSS | wall (whole command) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for arm in arms_in(root):
        name = arm_name(arm)
        metrics = root / arm / "metrics.jsonl"
        if not (root / arm / "run.json").is_file() or "finished" not in (root / arm / "run.json").read_text():
            lines.append(f"| {name} | not finished |" + " |" * 8)
            continue
        history = [json.loads(line) for line in metrics.read_text().splitlines()]
        best = max(history, key=lambda r: r["overall"])
        dev = best["dev"]
        step_s = sum(r["train_s"] for r in history) / history[-1]["global_step"]
        params, size = optimizer_state(root / arm / "checkpoints" / "last.pt")
        rss, wall = time_report(root / f"{arm}.time")
        lines.append(f"| {name} | {dev['sst']['accuracy']:.3f} | {dev['para']['accuracy']:.3f} | "
                     f"{dev['sts']['pearson']:.3f} | {best['overall']:.4f} | {params:,} | "
                     f"{size / 2**20:.1f} MiB | {step_s:.2f} s | {rss:.2f} GiB | {wall} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(Path(sys.argv[1] if len(sys.argv) > 1 else "runs/lora")))
