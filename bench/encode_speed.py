"""Sentence embeddings: SentenceEncoder.encode against sentence-transformers' encode, side by side.

Both load the embedded all-MiniLM-L6-v2 (or --model) on the CPU and encode the same real sentences, read with
the course's reader (tasks/data/course.py): STS-B's (train, then dev, both sentences of each pair) and Quora's
questions (dev, then train), half of --sentences from each, in batches of 32. The arms take turns, in an order
that alternates each round; each is timed in wall-clock seconds (and CPU seconds, which a shared machine
disturbs less), and the table gives medians over the rounds with their ranges: the speed, the ratios to
sentence-transformers at the same precision (round by round), and the cosine of each arm's vectors to our
fp32 vectors (the smallest over the sentences). bf16 is torch.autocast around encode, for both libraries;
by default it runs only where the CPU multiplies bfloat16 natively (AVX-512 BF16 or AMX), and --precisions
bf16 forces it (then emulated, and said).

    python -m bench.encode_speed                                  # 10,000 sentences, 3 rounds: minutes
    python -m bench.encode_speed --sentences 2000 --rounds 5 --threads 1 --arms ours,ours-sdpa,st

Read next: minbert/sentence_encoder.py (why encode is fast: one tokenizer call, batches sorted by tokens).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from bench.batches import default_data_dir
from minbert.loading.hub import resolve_model
from minbert.sentence_encoder import SentenceEncoder
from tasks.data.course import read_split
from tasks.training.flags import choice_list, existing_dir, nonempty, positive_int
from tasks.training.process import resolve_precision

ARMS = {"ours": "ours (SentenceEncoder, unpadded)", "ours-sdpa": "ours (SentenceEncoder, sdpa)",
        "st": "sentence-transformers"}


def course_sentences(data_dir, n: int) -> list[str]:
    """n // 2 STS-B sentences (train, then dev) and n - n // 2 Quora questions (dev, then train), in order."""
    def sentences(task: str, splits: tuple[str, ...]) -> list[str]:
        return [text for split in splits for e in read_split(data_dir, task, split).examples
                for text in (e.sentence1, e.sentence2)]
    sts, quora = sentences("sts", ("train", "dev")), sentences("quora", ("dev", "train"))
    if len(sts) < n // 2 or len(quora) < n - n // 2:
        raise SystemExit(f"error: --sentences {n}: the files hold {len(sts)} STS and {len(quora)} Quora "
                         "sentences")
    return sts[:n // 2] + quora[:n - n // 2]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.encode_speed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--model", type=nonempty, default=None,
                        help="a folder or name both libraries read (default: the embedded all-MiniLM-L6-v2)")
    parser.add_argument("--data-dir", type=existing_dir, default=None,
                        help="the course data folder (default: $MINBERT_DATA/cs224n)")
    parser.add_argument("--sentences", type=positive_int, default=10_000, help="how many (default 10,000)")
    parser.add_argument("--rounds", type=positive_int, default=3, help="rounds of every arm (default 3)")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="sentences per batch (default 32)")
    parser.add_argument("--threads", type=positive_int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--arms", type=choice_list(tuple(ARMS)), default=["ours", "st"],
                        help=f"comma-separated, of {', '.join(ARMS)} (default ours,st)")
    parser.add_argument("--precisions", type=choice_list(("fp32", "bf16")), default=None,
                        help="fp32, bf16 or both (default: fp32, and bf16 where the CPU has it natively)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    arms, native = args.arms, resolve_precision("auto", "cpu")[0] == "bf16"
    precisions = args.precisions or (["fp32", "bf16"] if native else ["fp32"])
    if "st" not in arms or "fp32" not in precisions:
        raise SystemExit("error: --arms must hold st and --precisions fp32: the ratios and cosines need them")
    sentences = course_sentences(args.data_dir or default_data_dir(), args.sentences)
    folder = str(resolve_model(args.model))
    models = {"ours": SentenceEncoder(folder, device="cpu"),
              "ours-sdpa": SentenceEncoder(folder, device="cpu", attn_implementation="sdpa"),
              "st": SentenceTransformer(folder, device="cpu")}
    runs = [(arm, precision) for precision in precisions for arm in arms]
    seconds: dict = {run: [] for run in runs}
    vectors: dict = {}
    for round_ in range(args.rounds + 1):  # round 0 warms every arm up on the first batches, untimed
        for arm, precision in runs if round_ % 2 else runs[::-1]:
            bf16 = torch.autocast("cpu", torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()
            with bf16:
                wall, cpu = time.perf_counter(), time.process_time()
                out = models[arm].encode(sentences if round_ else sentences[:64], batch_size=args.batch_size)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            if round_:
                seconds[arm, precision].append((wall, cpu))
                vectors[arm, precision] = np.asarray(out, dtype=np.float32)
    reference = vectors["ours" if "ours" in arms else arms[0], "fp32"]
    unit = reference / np.linalg.norm(reference, axis=1, keepdims=True)
    print(f"{len(sentences)} sentences (STS-B and Quora), batch {args.batch_size}, {torch.get_num_threads()} "
          f"threads, {args.rounds} rounds, {args.model or 'the embedded all-MiniLM-L6-v2'}; bf16 "
          f"{'native' if native else 'NOT native on this CPU: emulated'}")
    print("| arm | precision | sentences / s | wall time, st / arm | CPU time, st / arm | "
          "min cosine to fp32 |")
    print("|---|---|---|---|---|---|")
    def spread(values: list[float], form: str) -> str:
        return f"{statistics.median(values):{form}} ({min(values):{form}}-{max(values):{form}})"
    for arm, precision in runs:
        times, theirs = seconds[arm, precision], seconds["st", precision]  # (wall, cpu) per round
        ratios = [[s[i] / t[i] for s, t in zip(theirs, times)] for i in (0, 1)]  # round by round
        got = vectors[arm, precision] / np.linalg.norm(vectors[arm, precision], axis=1, keepdims=True)
        print(f"| {ARMS[arm]} | {precision} | {spread([len(sentences) / w for w, _ in times], '.0f')} | "
              f"{spread(ratios[0], '.2f')} | {spread(ratios[1], '.2f')} | "
              f"{(got * unit).sum(axis=1).min():.6f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
