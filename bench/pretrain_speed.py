"""Pre-training speed: tokens per second of a masked-LM + NSP training step, ours against transformers.

In one process, with one set of random weights at the MiniLM size (or bert-base), each runner does a
forward and backward pass of the full pre-training loss on the same batch: 32 windows of 128 tokens
([CLS] A [SEP] B [SEP], as pretrain.run builds them from long documents), 15% of the positions
masked (labels), NSP labels half and half. Runners:

- transformers-sdpa: transformers' BertForPreTraining, SDPA attention (its default);
- ours-forward: our BertForPreTraining.forward, which decodes all positions as transformers does;
- ours-pretrain: pretrain.run's PretrainingModel.losses, which decodes only the masked positions.

Before timing, the three losses are checked equal. Timing: warm-up calls, then rounds in which every
runner runs once in a rotating order; medians over rounds, tokens/s over all (non-padding) tokens, and
the ratio against transformers. Target: ours at least 1.0x. A benchmark, not a test.

    python -m bench.pretrain_speed                 # MiniLM size, ~2 minutes on 2 cores
    python -m bench.pretrain_speed --size bert-base --repeats 5
    python -m bench.pretrain_speed --quick

Read next: pretrain/run.py.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch
import transformers

from bench.model_speed import SIZES
from minbert.heads import BertForPreTraining
from pretrain.corpus import PretrainingExample
from minbert.masking import MaskingVocab, mask_tokens
from pretrain.run import PretrainingModel, collate
from tasks.training.flags import integer, non_negative_int, positive_int


def make_batch(config, batch_size: int, length: int, seed: int = 0):
    """Full windows of random ordinary ids, masked with our masking (15%, cap 20), NSP labels alternating."""
    rng = random.Random(seed)
    vocab = MaskingVocab(mask_id=103, vocab_size=config.vocab_size,
                         special_ids=frozenset({0, 100, 101, 102, 103}),
                         is_continuation=tuple(False for _ in range(config.vocab_size)))
    examples, masked = [], []
    half = (length - 3) // 2
    for row in range(batch_size):
        a = [rng.randrange(1000, config.vocab_size) for _ in range(half)]
        b = [rng.randrange(1000, config.vocab_size) for _ in range(length - 3 - half)]
        ids = [101] + a + [102] + b + [102]
        types = [0] * (half + 2) + [1] * (len(b) + 1)
        examples.append(PretrainingExample(ids, types, row % 2))
        masked.append(mask_tokens(ids, vocab, rng))
    return collate(examples, masked, pad_id=0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.pretrain_speed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="minilm")
    parser.add_argument("--batch-size", type=positive_int, default=32)
    # [CLS] A [SEP] B [SEP] with B one token at least, so that there is something to mask; the top (the
    # position table's size) is checked after argparse, where the size is known.
    parser.add_argument("--length", type=integer(4, "[CLS] A [SEP] B [SEP] with a token to mask"),
                        default=128)
    parser.add_argument("--repeats", type=positive_int, default=9)
    parser.add_argument("--warmup", type=non_negative_int, default=2)
    parser.add_argument("--quick", action="store_true", help="tiny batch and 2 rounds: a smoke run")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.quick:
        args.batch_size, args.length, args.repeats, args.warmup = 4, 32, 2, 1
    config = SIZES[args.size]
    if args.length > config.max_position_embeddings:
        parser.error(f"argument --length: must be at most {config.max_position_embeddings} "
                     f"(the position table of {args.size}), got {args.length}")
    torch.manual_seed(0)
    ours = BertForPreTraining(config, attn_implementation="sdpa")
    fields = {k: v for k, v in config.to_dict().items() if k not in ("architectures", "model_type")}
    theirs = transformers.BertForPreTraining(transformers.BertConfig(**fields, attn_implementation="sdpa"))
    theirs.load_state_dict(ours.state_dict(), strict=False)  # decoder weight: tied to the word embeddings
    theirs.tie_weights()
    fast = PretrainingModel(ours)
    batch = make_batch(config, args.batch_size, args.length)
    t, labels, nsp = batch.tokens, batch.labels, batch.next_sentence_labels

    def step_transformers():
        theirs.zero_grad(set_to_none=True)
        theirs(input_ids=t.input_ids, attention_mask=t.attention_mask, token_type_ids=t.token_type_ids,
               labels=labels, next_sentence_label=nsp).loss.backward()

    def step_ours_forward():
        ours.zero_grad(set_to_none=True)
        ours(t.input_ids, t.attention_mask, t.token_type_ids, labels=labels,
             next_sentence_label=nsp).loss.backward()

    def step_ours_pretrain():
        fast.zero_grad(set_to_none=True)
        fast.losses(batch).loss.backward()

    for model in (ours, theirs):
        model.train()  # dropout is 0 at these sizes, so train mode computes the same as eval
    with torch.no_grad():
        reference = theirs(input_ids=t.input_ids, attention_mask=t.attention_mask,
                           token_type_ids=t.token_type_ids, labels=labels, next_sentence_label=nsp).loss
        ours_full = ours(t.input_ids, t.attention_mask, t.token_type_ids, labels=labels,
                         next_sentence_label=nsp).loss
        ours_fast = fast.losses(batch).loss
    print(f"{args.size}, batch {args.batch_size} x {args.length}, "
          f"{int((labels != -100).sum())} masked positions, {torch.get_num_threads()} threads")
    print(f"loss: transformers {reference.item():.6f}, ours-forward {ours_full.item():.6f}, "
          f"ours-pretrain {ours_fast.item():.6f}")

    steps = {"transformers-sdpa": step_transformers, "ours-forward": step_ours_forward,
             "ours-pretrain": step_ours_pretrain}
    for step in steps.values():
        for _ in range(args.warmup):
            step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    names = list(steps)
    for r in range(args.repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = time.perf_counter()
            steps[name]()
            times[name].append(time.perf_counter() - start)
    tokens = int(t.attention_mask.sum())
    base = statistics.median(times["transformers-sdpa"])
    print(f"{'runner':<20}{'median s':>10}{'min s':>9}{'max s':>9}{'tokens/s':>10}{'vs transformers':>17}")
    for name in names:
        median = statistics.median(times[name])
        print(f"{name:<20}{median:>10.3f}{min(times[name]):>9.3f}{max(times[name]):>9.3f}"
              f"{tokens / median:>10.0f}{base / median:>16.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
