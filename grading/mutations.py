"""Realistic student mistakes, as text patches on the reference, each with the component it must break.

tests/test_grading.py grades each mutant and checks that exactly its component loses points: a graded
test suite that a broken component passes is a bug in the tests. Staff can run one by hand:

    python -m grading.mutations                 list them
    python -m grading.mutations NAME OUT_DIR    write the mutated copy (then grade it)

This file quotes the solutions; the handout leaves grading/ out.

Read next: nothing; that is the grader.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from grading.config import SUBMITTED_PACKAGES


@dataclass(frozen=True)
class Mutation:
    name: str
    component: str
    path: str
    old: str
    new: str
    description: str

    def apply(self, root: Path) -> None:
        """Patch the copy at `root` in place; the old text must occur exactly once."""
        target = root / self.path
        text = target.read_text(encoding="utf-8")
        count = text.count(self.old)
        if count != 1:
            raise ValueError(f"mutation {self.name}: {self.path} contains the text to replace {count} times "
                             f"(expected once): {self.old!r}")
        target.write_text(text.replace(self.old, self.new), encoding="utf-8")


MUTATIONS: tuple[Mutation, ...] = (
    Mutation("attention-no-scale", "attention", "minbert/attention.py",
             "query @ key.transpose(-1, -2) / math.sqrt(query.size(-1))", "query @ key.transpose(-1, -2)",
             "scores not divided by sqrt(D)"),
    Mutation("attention-softmax-over-queries", "attention", "minbert/attention.py",
             "scores.softmax(dim=-1)", "scores.softmax(dim=-2)", "softmax over the wrong axis"),
    Mutation("attention-mask-not-applied", "attention", "minbert/attention.py",
             "scores = scores + attention_mask", "scores = scores", "the padding mask is never added"),
    Mutation("layer-pre-ln", "layer", "minbert/layer.py",
             "return self.LayerNorm(residual + self.dropout(self.dense(hidden_states)))",
             "return residual + self.LayerNorm(self.dropout(self.dense(hidden_states)))",
             "pre-LN style: the norm inside the branch, the residual stream never normalised"),
    Mutation("layer-tanh-gelu", "layer", "minbert/layer.py",
             'approximate="none")  # (B, T, I)', 'approximate="tanh")  # (B, T, I)',
             "the tanh approximation of GELU instead of BERT's exact erf GELU"),
    Mutation("adamw-decay-in-moments", "adamw", "optim/adamw.py",
             "param.mul_(1 - lr * weight_decay)", "grad = grad.add(param, alpha=weight_decay)",
             "L2 regularisation (Adam): the decay goes into the gradient and so into the moments"),
    Mutation("adamw-no-bias-correction", "adamw", "optim/adamw.py",
             "bias_correction1 = 1 - beta1**step\n    bias_correction2 = 1 - beta2**step",
             "bias_correction1 = 1.0\n    bias_correction2 = 1.0",
             "no bias correction (as in BERT's original TF optimizer)"),
    Mutation("embeddings-no-segments", "embeddings", "minbert/embeddings.py",
             "+ self.position_embeddings(position_ids)  # (T, C) broadcast to (B, T, C)\n"
             "                      + self.token_type_embeddings(token_type_ids))",
             "+ self.position_embeddings(position_ids))  # (T, C) broadcast to (B, T, C)",
             "segment (token type) embeddings left out of the sum"),
    Mutation("encoder-layers-not-chained", "encoder", "minbert/model.py",
             "hidden_states, probs = layer(hidden_states, attention_mask, output_attentions)",
             "output, probs = layer(hidden_states, attention_mask, output_attentions)",
             "every layer reads the embeddings; the encoder returns the embeddings"),
    Mutation("mean-pool-counts-padding", "mean_pool", "minbert/pooling.py",
             "mask.sum(dim=1).clamp(min=1.0)", "hidden_states.size(1)",
             "divides by the padded length instead of the number of real tokens"),
    Mutation("mlm-masks-special-tokens", "mlm_masking", "pretrain/masking.py",
             "        if token in vocab.special_ids:\n            continue\n", "",
             "[CLS], [SEP] and [PAD] may be chosen for prediction"),
    Mutation("mlm-always-mask", "mlm_masking", "pretrain/masking.py",
             'return "random" if draw < 0.9 else "keep"', 'return "mask"',
             "every chosen position becomes [MASK] (no 10% random, no 10% kept)"),
    Mutation("label-scores-replace-cls-to-cls", "label_attention", "minbert/label_attention.py",
             "new_cls_row = torch.cat([scores[:, :, :1, :1], best], dim=-1)  # (B, H, 1, T)",
             "new_cls_row = torch.cat([label_scores[:, :, :1, :1].max(dim=2, keepdim=True).values.maximum("
             "scores[:, :, :1, :1]), best], dim=-1)",
             "the [CLS] -> [CLS] score takes the label max too (the paper leaves it alone)"),
    Mutation("label-scores-summed", "label_attention", "minbert/label_attention.py",
             ".max(dim=2, keepdim=True).values  # (B, H, 1, T-1)",
             ".sum(dim=2, keepdim=True)  # (B, H, 1, T-1)",
             "the [CLS] row and the label scores are summed instead of maxed"),
    Mutation("cosine-one-norm", "cosine", "tasks/models/heads.py",
             "(u.norm(dim=-1) * v.norm(dim=-1))", "(u.norm(dim=-1) * u.norm(dim=-1))",
             "normalises by |u|^2 instead of |u| |v|"),
    Mutation("r-precision-lowest-first", "r_precision", "tasks/evaluation/metrics.py",
             "np.argsort(-s.astype(np.float64), kind=\"stable\")[:r]",
             "np.argsort(s.astype(np.float64), kind=\"stable\")[:r]",
             "ranks the labels lowest score first"),
    Mutation("r-precision-over-k", "r_precision", "tasks/evaluation/metrics.py",
             "return float(np.sum(g[top] > 0) / r)", "return float(np.sum(g[top] > 0) / len(g))",
             "divides by the number of labels instead of R"),
)


def mutant(reference: Path, mutation: Mutation, out: Path) -> Path:
    """Copy the reference's packages to `out` and apply `mutation`; returns `out`."""
    for package in SUBMITTED_PACKAGES:
        if (reference / package).is_dir():
            shutil.copytree(reference / package, out / package,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    mutation.apply(out)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    by_name = {m.name: m for m in MUTATIONS}
    if len(argv) != 2 or argv[0] not in by_name:
        print("usage: python -m grading.mutations NAME OUT_DIR\n")
        for m in MUTATIONS:
            print(f"  {m.name:<32} {m.component:<11} {m.description}")
        return 0 if not argv else 2
    out = mutant(Path(__file__).resolve().parents[1], by_name[argv[0]], Path(argv[1]))
    print(f"wrote {out}; grade it with: python -m grading.grade --submission {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
