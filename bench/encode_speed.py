"""Sentence embeddings: SentenceEncoder.encode against sentence-transformers' encode, on the same folder.

Both load the embedded all-MiniLM-L6-v2 (or --model, any folder both can read) on the CPU and encode the
same sentences, the course's STS dev file's 863 sentence pairs split into 1,726 sentences
($MINBERT_DATA/cs224n/sts-dev.csv, or --data-dir), in batches of 32. They take turns, in an order that
alternates each round, and the table gives each one's median over the rounds in sentences per second,
the ratio (ours over theirs; the target is at least 1.0x) and the largest difference between the two
sets of vectors.

    python -m bench.encode_speed                 # about a minute on 2 cores
    python -m bench.encode_speed --rounds 5 --threads 1

Read next: minbert/sentence_encoder.py.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from bench.batches import default_data_dir
from minbert.loading.hub import resolve_model
from minbert.sentence_encoder import SentenceEncoder
from tasks.training.flags import existing_dir, nonempty, positive_int


def sts_sentences(data_dir: Path) -> list[str]:
    with open(data_dir / "sts-dev.csv", encoding="utf-8", newline="") as file:
        rows = list(csv.DictReader(file, delimiter="\t"))
    return [row[key] for row in rows for key in ("sentence1", "sentence2") if row.get(key)]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.encode_speed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--model", type=nonempty, default=None,
                        help="a folder or name both libraries read (default: the embedded all-MiniLM-L6-v2)")
    parser.add_argument("--data-dir", type=existing_dir, default=None,
                        help="the course data folder (default: $MINBERT_DATA/cs224n)")
    parser.add_argument("--rounds", type=positive_int, default=3, help="rounds of both (default 3)")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="sentences per batch (default 32)")
    parser.add_argument("--threads", type=positive_int, default=None, help="torch threads (default: torch's)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    sentences = sts_sentences(Path(args.data_dir) if args.data_dir else default_data_dir())
    folder = resolve_model(args.model)
    runners = {"ours (SentenceEncoder)": SentenceEncoder(folder, device="cpu"),
               "sentence-transformers": SentenceTransformer(str(folder), device="cpu")}
    vectors, seconds = {}, {name: [] for name in runners}
    for name, model in runners.items():  # warm-up
        model.encode(sentences[:64], batch_size=args.batch_size)
    for round_ in range(args.rounds):
        for name in (list(runners) if round_ % 2 == 0 else list(runners)[::-1]):
            start = time.perf_counter()
            vectors[name] = runners[name].encode(sentences, batch_size=args.batch_size)
            seconds[name].append(time.perf_counter() - start)
    ours, theirs = (statistics.median(seconds[name]) for name in runners)
    print(f"{len(sentences)} sentences, batch {args.batch_size}, {torch.get_num_threads()} threads, "
          f"{args.rounds} rounds, {folder}")
    print("| encoder | sentences / s (median) | range |")
    print("|---|---|---|")
    for name, times in seconds.items():
        print(f"| {name} | {len(sentences) / statistics.median(times):.1f} | "
              f"{len(sentences) / max(times):.1f}-{len(sentences) / min(times):.1f} |")
    difference = np.abs(np.asarray(vectors[list(runners)[0]]) - np.asarray(vectors[list(runners)[1]])).max()
    print(f"ours / sentence-transformers: {theirs / ours:.2f}x; largest difference between the vectors: "
          f"{difference:.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
