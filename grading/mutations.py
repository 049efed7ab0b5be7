"""Realistic student mistakes, as text patches on the reference, each with the component it must break.

tests/test_grading.py grades each mutant and checks that exactly its component loses points (a graded
test suite that a broken component passes is a bug in the tests) and that a failing test of it tells the
student what is wrong (`message`, a substring of the grader's output). Staff can run one by hand:

    python -m grading.mutations                 list them
    python -m grading.mutations NAME OUT_DIR    write the mutated copy (then grade it)

This file quotes the solutions; the handout leaves grading/ out.

Read next: nothing; that is the grader.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from grading.config import SUBMITTED_PACKAGES
from tasks.training.flags import output_dir


@dataclass(frozen=True)
class Mutation:
    name: str
    component: str
    path: str
    old: str
    new: str
    description: str
    message: str  # what the grader must tell the student: a substring of a failing test's output
    # Whether the whole-model tests (config.WHOLE_MODEL: eval mode, against a checkpoint) can see it too;
    # False for a bug only training mode shows (dropout in the wrong place).
    whole_model: bool = True

    def apply(self, root: Path) -> None:
        """Patch the copy at `root` in place; the old text must occur exactly once."""
        target = root / self.path
        text = target.read_text(encoding="utf-8")
        count = text.count(self.old)
        if count != 1:
            raise ValueError(f"mutation {self.name}: {self.path} contains the text to replace {count} times "
                             f"(expected once): {self.old!r}")
        target.write_text(text.replace(self.old, self.new), encoding="utf-8")


# adamw_update's body, whose decay (the first line) one mutation moves to the end.
_DECAY = "    param.mul_(1 - lr * weight_decay)\n"
ADAMW_BODY = """    param.mul_(1 - lr * weight_decay)
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    if max_exp_avg_sq is not None:
        torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
        exp_avg_sq = max_exp_avg_sq
    bias_correction1 = 1 - beta1**step
    bias_correction2 = 1 - beta2**step
    step_size = lr / bias_correction1
    # `** 0.5` rather than math.sqrt: torch writes it so, and we want its results bit for bit.
    denom = (exp_avg_sq.sqrt() / bias_correction2**0.5).add_(eps)
    param.addcdiv_(exp_avg, denom, value=-step_size)
"""

MUTATIONS: tuple[Mutation, ...] = (
    Mutation("embeddings-no-segments", "embeddings", "minbert/embeddings.py",
             "+ self.position_embeddings(position_ids)  # (T, C) broadcast to (B, T, C)\n"
             "                      + self.token_type_embeddings(token_type_ids))",
             "+ self.position_embeddings(position_ids))  # (T, C) broadcast to (B, T, C)",
             "segment (token type) embeddings left out of the sum",
             "the segment (token type) embeddings are missing"),
    Mutation("embeddings-dropout-before-norm", "embeddings", "minbert/embeddings.py",
             "embeddings = self.dropout(self.LayerNorm(embeddings))",
             "embeddings = self.LayerNorm(self.dropout(embeddings))",
             "dropout on the sum, then the LayerNorm (BERT drops the normalised embeddings)",
             "apply dropout after the LayerNorm",
             whole_model=False),
    Mutation("mask-not-inverted", "attention_mask", "minbert/model.py",
             "return (1.0 - keep) * torch.finfo(dtype).min", "return keep * torch.finfo(dtype).min",
             "the additive mask silences the real tokens instead of the padding",
             "real tokens got the large negative number and padding got 0"),
    Mutation("attention-scores-over-d", "attention", "minbert/attention.py",
             "/ math.sqrt(query.size(-1))", "/ query.size(-1)", "scores divided by D instead of sqrt(D)",
             "they were divided by D = 4; divide by sqrt(D) = 2"),
    Mutation("attention-no-scale", "attention", "minbert/attention.py",
             "query @ key.transpose(-1, -2) / math.sqrt(query.size(-1))", "query @ key.transpose(-1, -2)",
             "scores not divided by sqrt(D)", "did you scale by 1/sqrt(head size)?"),
    Mutation("attention-softmax-over-queries", "attention", "minbert/attention.py",
             "scores.softmax(dim=-1)", "scores.softmax(dim=-2)", "softmax over the wrong axis",
             "the softmax must run over the keys (the last axis)"),
    Mutation("attention-mask-not-applied", "attention", "minbert/attention.py",
             "scores = scores + attention_mask", "scores = scores", "the padding mask is never added",
             "the mask must be added before the softmax"),
    Mutation("attention-mask-multiplied", "attention", "minbert/attention.py",
             "scores = scores + attention_mask", "scores = scores * attention_mask",
             "the additive mask multiplied into the scores", "add the mask to the scores"),
    Mutation("attention-probs-after-dropout", "attention", "minbert/attention.py",
             "    probs = scores.softmax(dim=-1)  # each query's row sums to 1 over the keys\n"
             "    context = (probs if dropout is None else dropout(probs)) @ value  # (B, H, T, D)",
             "    probs = scores.softmax(dim=-1) if dropout is None else dropout(scores.softmax(dim=-1))\n"
             "    context = probs @ value",
             "the probabilities returned are the dropped ones (the docstring: before dropout)",
             "return them before dropout",
             whole_model=False),
    Mutation("split-heads-view-mixup", "split_heads", "minbert/attention.py",
             "x.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)",
             "x.view(B, self.num_heads, T, self.head_dim)",
             "(B, T, C) read directly as (B, H, T, D): every head sees a jumble of tokens",
             "tokens and heads are mixed up"),
    Mutation("merge-heads-no-transpose", "split_heads", "minbert/attention.py",
             "x.transpose(1, 2).reshape(B, T, self.num_heads * self.head_dim)",
             "x.reshape(B, T, self.num_heads * self.head_dim)",
             "(B, H, T, D) flattened to (B, T, C) without moving the heads behind the tokens",
             "the heads were not moved back behind the tokens"),
    Mutation("layer-tanh-gelu", "feed_forward", "minbert/layer.py",
             'approximate="none")  # (B, T, I)', 'approximate="tanh")  # (B, T, I)',
             "the tanh approximation of GELU instead of BERT's exact erf GELU", "tanh approximation of GELU"),
    Mutation("layer-pre-ln", "layer", "minbert/layer.py",
             "return self.LayerNorm(residual + self.dropout(self.dense(hidden_states)))",
             "return residual + self.LayerNorm(self.dropout(self.dense(hidden_states)))",
             "pre-LN style: the norm inside the branch, the residual stream never normalised",
             "the residual is added after the LayerNorm (pre-LN)"),
    Mutation("layer-dropout-on-sum", "layer", "minbert/layer.py",
             "return self.LayerNorm(residual + self.dropout(self.dense(hidden_states)))",
             "return self.LayerNorm(self.dropout(residual + self.dense(hidden_states)))",
             "LayerNorm(Dropout(x + W h)): dropout drops the residual stream too",
             "dropout belongs on the projection only",
             whole_model=False),
    Mutation("layer-ffn-residual-is-input", "layer", "minbert/layer.py",
             "self.output(self.intermediate(attention_output), attention_output)",
             "self.output(self.intermediate(attention_output), hidden_states)",
             "the feed-forward's add & norm adds the layer's input instead of the attention output",
             "the feed-forward's residual is the layer's input"),
    Mutation("encoder-layers-not-chained", "encoder", "minbert/encoder.py",
             "hidden_states, probs = layer(hidden_states, attention_mask, output_attentions)",
             "output, probs = layer(hidden_states, attention_mask, output_attentions)",
             "every layer reads the embeddings; the encoder returns the embeddings",
             "each layer must read the previous layer's output"),
    Mutation("pooler-mean", "pooler", "minbert/model.py",
             "torch.tanh(self.dense(hidden_states[:, 0]))",
             "torch.tanh(self.dense(hidden_states.mean(dim=1)))",
             "the pooler averages the tokens instead of reading [CLS]", "it pooled the mean of all tokens"),
    Mutation("mlm-head-skips-transform", "pretraining_heads", "minbert/heads.py",
             "F.linear(self.transform(hidden_states), word_embeddings, self.bias)",
             "F.linear(hidden_states, word_embeddings, self.bias)",
             "the masked-LM decoder reads the encoder's output without the head's transform",
             "the transform (dense, GELU, LayerNorm) was skipped"),
    Mutation("mlm-loss-over-all-positions", "pretraining_heads", "minbert/heads.py",
             "return F.cross_entropy(prediction_logits[predicted], labels[predicted])",
             "return F.cross_entropy(prediction_logits[predicted], labels[predicted], reduction=\"sum\") "
             "/ labels.numel()",
             "the masked-LM loss is divided by all B*T positions, not by the predicted ones",
             "divide by the number of predicted positions"),
    Mutation("mlm-loss-unpacks-b-t-v", "pretraining_heads", "minbert/heads.py",
             "    predicted = labels != IGNORE_INDEX  # (B, T) or (N,)\n",
             "    B, T, V = prediction_logits.shape\n    predicted = labels != IGNORE_INDEX  # (B, T) or (N,)\n",
             "unpacks B, T, V = logits.shape: crashes on the (N, V) scores pre-training passes",
             "do not unpack a fixed number of dimensions"),
    Mutation("mlm-loss-nan-when-nothing-predicted", "pretraining_heads", "minbert/heads.py",
             "    if not predicted.any():  # nothing to predict: 0, not the NaN of an empty mean\n"
             "        return prediction_logits.sum() * 0.0\n", "",
             "the mean over no predicted position: NaN for a batch with nothing masked",
             "with no predicted position the loss is NaN"),
    Mutation("mlm-loss-constant-zero", "pretraining_heads", "minbert/heads.py",
             "return prediction_logits.sum() * 0.0", "return torch.tensor(0.0)",
             "nothing predicted gives a constant 0 with no gradient: backward() fails",
             "does not depend on the logits"),
    Mutation("nsp-labels-swapped", "pretraining_heads", "minbert/heads.py",
             "next_sentence_label.view(-1))", "1 - next_sentence_label.view(-1))",
             "the next-sentence loss takes label 1 for IsNext", "label 0 means IsNext"),
    Mutation("mlm-head-no-bias", "pretraining_heads", "minbert/heads.py",
             "F.linear(self.transform(hidden_states), word_embeddings, self.bias)",
             "F.linear(self.transform(hidden_states), word_embeddings)",
             "the decoder's own bias b left out", "the head's bias b is missing"),
    Mutation("adamw-decay-in-moments", "adamw", "optim/adamw.py",
             "param.mul_(1 - lr * weight_decay)", "grad = grad.add(param, alpha=weight_decay)",
             "L2 regularisation (Adam): the decay goes into the gradient and so into the moments",
             "Adam with L2 regularisation"),
    Mutation("adamw-no-bias-correction", "adamw", "optim/adamw.py",
             "bias_correction1 = 1 - beta1**step\n    bias_correction2 = 1 - beta2**step",
             "bias_correction1 = 1.0\n    bias_correction2 = 1.0",
             "no bias correction (as in BERT's original TF optimizer)", "the bias correction is missing"),
    Mutation("adamw-eps-inside-sqrt", "adamw", "optim/adamw.py",
             "denom = (exp_avg_sq.sqrt() / bias_correction2**0.5).add_(eps)",
             "denom = (exp_avg_sq / bias_correction2).add_(eps).sqrt()",
             "eps added under the square root, sqrt(v_hat + eps)", "eps went inside the square root"),
    Mutation("adamw-decay-after-update", "adamw", "optim/adamw.py", ADAMW_BODY,
             ADAMW_BODY.replace(_DECAY, "") + _DECAY,
             "the decay shrinks the updated weights instead of the old ones",
             "the decay was applied after the Adam step"),
    Mutation("adamw-decay-without-lr", "adamw", "optim/adamw.py",
             "param.mul_(1 - lr * weight_decay)", "param.mul_(1 - weight_decay)",
             "the decay is not scaled by the learning rate", "the decay must be scaled by the learning rate"),
    Mutation("schedule-decay-from-zero", "schedule", "optim/schedules.py",
             "float(max(1, num_training_steps - num_warmup_steps))", "float(max(1, num_training_steps))",
             "the linear decay runs from step 0, so the warm-up ends below the base rate",
             "the decay runs from the end of the warm-up"),
    Mutation("schedule-warmup-from-one", "schedule", "optim/schedules.py",
             "float(step) / float(max(1, num_warmup_steps))",
             "float(step + 1) / float(max(1, num_warmup_steps))",
             "the warm-up is one step ahead: 1 / W at step 0", "the warm-up starts at 0 at step 0"),
    Mutation("no-decay-substring", "no_decay", "optim/param_groups.py",
             "return own not in _NO_DECAY_NAMES and not any(module in _NO_DECAY_MODULES for module in "
             "modules)",
             "return not any(word in name for word in (\"bias\", \"LayerNorm.weight\"))",
             "the common recipe's substring test: misses gamma/beta and layer_norm, exempts any '*bias*'",
             "old ports' names (gamma)"),
    Mutation("mean-pool-counts-padding", "mean_pool", "minbert/pooling.py",
             "mask.sum(dim=1).clamp(min=1.0)", "hidden_states.size(1)",
             "divides by the padded length instead of the number of real tokens",
             "divide by the number of real tokens, not the padded length"),
    Mutation("mean-pool-sums-padding", "mean_pool", "minbert/pooling.py",
             "(hidden_states * mask).sum(dim=1)", "hidden_states.sum(dim=1)",
             "the padding vectors are summed (the count is right)", "padding must count neither in the sum"),
    Mutation("mean-pool-divides-by-zero", "mean_pool", "minbert/pooling.py",
             "mask.sum(dim=1).clamp(min=1.0)", "mask.sum(dim=1)",
             "a row of padding only divides 0 by 0 (NaN)", "0 / 0 is NaN"),
    Mutation("max-pool-padding-zero", "max_cls_pool", "minbert/pooling.py",
             "masked_fill(padding, torch.finfo(hidden_states.dtype).min)", "masked_fill(padding, 0.0)",
             "padding set to 0 before the maximum: it wins wherever the real values are negative",
             "padding must never win"),
    Mutation("cls-pool-last-token", "max_cls_pool", "minbert/pooling.py",
             "return output.last_hidden_state[:, 0]", "return output.last_hidden_state[:, -1]",
             '"cls" pooling reads the last token', "[CLS] is the first token"),
    Mutation("classifier-uses-pooler-output", "classifier", "tasks/models/heads.py",
             "self.classifier(self.dropout(self.sentence_vector(output, attention_mask)))",
             "self.classifier(self.dropout(output.pooler_output))",
             "the head always reads the pooler output, whatever pooling it was built with",
             "the logits come from the pooler output"),
    Mutation("classifier-pools-by-itself", "classifier", "tasks/models/heads.py",
             "self.classifier(self.dropout(self.sentence_vector(output, attention_mask)))",
             "self.classifier(self.dropout(pool(output, attention_mask, self.pooling)))",
             "pools by itself instead of through self.sentence_vector: the classify job's head is ignored",
             "instead of calling self.sentence_vector"),
    Mutation("classification-loss-softmax-twice", "classifier", "tasks/models/heads.py",
             "F.cross_entropy(logits, labels)",
             "F.cross_entropy(logits.softmax(dim=-1), labels)",
             "softmax before cross-entropy, which applies its own", "the loss applies the softmax itself"),
    Mutation("classifier-no-dropout", "classifier", "tasks/models/heads.py",
             "self.classifier(self.dropout(self.sentence_vector(output, attention_mask)))",
             "self.classifier(self.sentence_vector(output, attention_mask))",
             "the pooled vector goes to the linear layer without dropout",
             "self.dropout was not applied to the pooled vector"),
    Mutation("cosine-one-norm", "cosine", "tasks/models/heads.py",
             "(u.norm(dim=-1) * v.norm(dim=-1))", "(u.norm(dim=-1) * u.norm(dim=-1))",
             "normalises by |u|^2 instead of |u| |v|", "normalised by |u|^2 instead of |u| |v|"),
    Mutation("cosine-no-eps", "cosine", "tasks/models/heads.py",
             "(u.norm(dim=-1) * v.norm(dim=-1)).clamp(min=eps)", "(u.norm(dim=-1) * v.norm(dim=-1))",
             "no eps: a zero vector gives 0 / 0", "keep the denominator away from 0 (eps)"),
    Mutation("mlm-masks-special-tokens", "mlm_masking", "pretrain/masking.py",
             "        if token in vocab.special_ids:\n            continue\n", "",
             "[CLS], [SEP] and [PAD] may be chosen for prediction", "are never masked"),
    Mutation("mlm-always-mask", "mlm_masking", "pretrain/masking.py",
             'return "random" if draw < 0.9 else "keep"', 'return "mask"',
             "every chosen position becomes [MASK] (no 10% random, no 10% kept)",
             "BERT's rule is 80% / 10% / 10%"),
    Mutation("mlm-no-shuffle", "mlm_masking", "pretrain/masking.py",
             "    rng.shuffle(units)\n    chosen = 0", "    chosen = 0",
             "the units are taken in order: always the first 15% of the sequence",
             "visit the units in a random order"),
    Mutation("mlm-global-random", "mlm_masking", "pretrain/masking.py",
             "    rng.shuffle(units)\n", "    random.shuffle(units)\n",
             "the shuffle draws from the module `random`, not the rng it is given",
             "never from the module `random`"),
    Mutation("label-scores-replace-cls-to-cls", "label_attention", "minbert/extras/label_attention.py",
             "new_cls_row = torch.cat([scores[:, :, :1, :1], best], dim=-1)  # (B, H, 1, T)",
             "new_cls_row = torch.cat([label_scores[:, :, :1, :1].max(dim=2, keepdim=True).values.maximum("
             "scores[:, :, :1, :1]), best], dim=-1)",
             "the [CLS] -> [CLS] score takes the label max too (the paper leaves it alone)",
             "the [CLS] -> [CLS] score changed"),
    Mutation("label-scores-summed", "label_attention", "minbert/extras/label_attention.py",
             ".max(dim=2, keepdim=True).values  # (B, H, 1, T-1)",
             ".sum(dim=2, keepdim=True)  # (B, H, 1, T-1)",
             "the [CLS] row and the label scores are summed instead of maxed", "the scores were summed"),
    Mutation("r-precision-lowest-first", "r_precision", "tasks/evaluation/metrics.py",
             "np.argsort(-np.asarray(scores, dtype=np.float64), kind=\"stable\")[:r]",
             "np.argsort(np.asarray(scores, dtype=np.float64), kind=\"stable\")[:r]",
             "ranks the labels lowest score first", "rank the highest first"),
    Mutation("top-labels-no-float-cast", "r_precision", "tasks/evaluation/metrics.py",
             "np.argsort(-np.asarray(scores, dtype=np.float64), kind=\"stable\")[:r]",
             "np.argsort(-np.asarray(scores), kind=\"stable\")[:r]",
             "negates the scores as given: uint8 wraps around, bools raise", "negating unsigned integers wraps"),
    Mutation("r-precision-over-k", "r_precision", "tasks/evaluation/metrics.py",
             "np.sum(g[top_labels(s, r)] > 0) / r)", "np.sum(g[top_labels(s, r)] > 0) / len(g))",
             "divides by the number of labels instead of R", "instead of R"),
    Mutation("r-precision-ties-reversed", "r_precision", "tasks/evaluation/metrics.py",
             "np.argsort(-np.asarray(scores, dtype=np.float64), kind=\"stable\")[:r]",
             "np.argsort(np.asarray(scores, dtype=np.float64), kind=\"stable\")[::-1][:r]",
             "ranks by reversing an ascending sort, so ties go to the higher label", "ties must go to the lower label"),
    Mutation("lora-scaled-by-alpha", "lora", "minbert/lora.py",
             "self.scaling * (down @ self.lora_B.T)", "self.lora_alpha * (down @ self.lora_B.T)",
             "the update is scaled by alpha instead of alpha / r",
             "scaled by alpha instead of alpha / r"),
    Mutation("lora-b-random", "lora", "minbert/lora.py",
             "nn.init.zeros_(self.lora_B)", "nn.init.kaiming_uniform_(self.lora_B, a=math.sqrt(5))",
             "B initialised like A, so a fresh adapter already changes the model",
             "B must start at zero"),
    Mutation("lora-base-trainable", "lora", "minbert/lora.py",
             "self.base_layer.requires_grad_(False)", "self.base_layer.requires_grad_(True)",
             "the base weight left trainable beside A and B", "the base layer must stay frozen"),
    Mutation("lora-merged-adds-again", "lora", "minbert/lora.py",
             "        if self.merged:\n            return self.base_layer(x)\n", "",
             "a merged layer's forward adds the update that W already holds",
             "a merged layer must not add the update again"),
    Mutation("lora-merge-twice", "lora", "minbert/lora.py",
             "        if self.merged:\n            warnings.warn(\"this LoRA layer is already merged",
             "        if False:\n            warnings.warn(\"this LoRA layer is already merged",
             "merge() on a merged layer adds the update a second time",
             "merging twice added the update twice"),
    Mutation("lora-dropout-on-output", "lora", "minbert/lora.py",
             "        down = self.lora_dropout(x) @ self.lora_A.T  # (N, I) -> (N, r)\n"
             "        return self.base_layer(x) + self.scaling * (down @ self.lora_B.T)",
             "        down = x @ self.lora_A.T\n"
             "        return self.base_layer(x) + self.scaling * self.lora_dropout(down @ self.lora_B.T)",
             "dropout on the adapter's output instead of its input",
             "dropout belongs on the adapter's input"),
)


def mutant(reference: Path, mutation: Mutation, out: Path) -> Path:
    """Copy the reference's packages to `out` and apply `mutation`; returns `out`."""
    for package in SUBMITTED_PACKAGES:
        if (reference / package).is_dir():
            shutil.copytree(reference / package, out / package,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    mutation.apply(out)
    return out


def listing() -> str:
    return "\n".join(f"  {m.name:<32} {m.component:<17} {m.description}" for m in MUTATIONS)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grading.mutations", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="mutations:\n" + listing())
    # Both optional so that no arguments at all lists the mutations; NAME without OUT_DIR is an error.
    parser.add_argument("name", nargs="?", choices=[m.name for m in MUTATIONS], metavar="NAME",
                        help="the mutation to apply (listed below)")
    parser.add_argument("out", nargs="?", type=output_dir, metavar="OUT_DIR",
                        help="where to write the mutated copy of the packages (new, or without them)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.name is None:
        print("usage: python -m grading.mutations NAME OUT_DIR\n")
        print(listing())
        return 0
    if args.out is None:
        parser.error("the following arguments are required: OUT_DIR")
    out = Path(args.out)
    # mutant() copies each package into a folder of its own; copytree will not write into one that exists.
    there = [package for package in SUBMITTED_PACKAGES if (out / package).exists()]
    if there:
        parser.error(f"argument OUT_DIR: {str(out)!r} already holds {', '.join(there)}; give a new folder")
    by_name = {m.name: m for m in MUTATIONS}
    out = mutant(Path(__file__).resolve().parents[1], by_name[args.name], out)
    print(f"wrote {out}; grade it with: python -m grading.grade --submission {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
