"""Realistic student mistakes, as text patches on the reference, each with the component it must break.

tests/test_grading.py grades each mutant and checks that exactly its component loses points (a graded
test suite that a broken component passes is a bug in the tests) and that a failing test of it tells the
student what is wrong (`message`, a substring of the grader's output). Staff can run one by hand:

    .venv/bin/python tests/mutations.py                 list them
    .venv/bin/python tests/mutations.py NAME OUT_DIR    write the mutated copy (then grade it)

This file quotes the solutions; neither the handout nor the autograder archive ships tests/ (but for
tests/conftest.py and tests/graded/). tests/equivalents.py lists the other side: correct solutions
written another way, which must cost nothing; tests/fresh_bugs.py, bugs kept outside this catalogue to
measure how general the grader's messages are.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from grading.config import SUBMITTED_PACKAGES  # noqa: E402
from tasks.training.flags import output_dir  # noqa: E402


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
    Mutation("classifier-uses-pooler-output", "classifier", "minbert/task_heads.py",
             "self.classifier(self.dropout(self.sentence_vector(output, attention_mask)))",
             "self.classifier(self.dropout(output.pooler_output))",
             "the head always reads the pooler output, whatever pooling it was built with",
             "the logits come from the pooler output"),
    Mutation("classifier-pools-by-itself", "classifier", "minbert/task_heads.py",
             "self.classifier(self.dropout(self.sentence_vector(output, attention_mask)))",
             "self.classifier(self.dropout(pool(output, attention_mask, self.pooling)))",
             "pools by itself instead of through self.sentence_vector: the classify job's head is ignored",
             "instead of calling self.sentence_vector"),
    Mutation("classification-loss-softmax-twice", "classifier", "minbert/task_heads.py",
             "F.cross_entropy(logits, labels)",
             "F.cross_entropy(logits.softmax(dim=-1), labels)",
             "softmax before cross-entropy, which applies its own", "the loss applies the softmax itself"),
    Mutation("classifier-no-dropout", "classifier", "minbert/task_heads.py",
             "self.classifier(self.dropout(self.sentence_vector(output, attention_mask)))",
             "self.classifier(self.sentence_vector(output, attention_mask))",
             "the pooled vector goes to the linear layer without dropout",
             "self.dropout was not applied to the pooled vector"),
    Mutation("cosine-one-norm", "cosine", "minbert/task_heads.py",
             "(u.norm(dim=-1) * v.norm(dim=-1))", "(u.norm(dim=-1) * u.norm(dim=-1))",
             "normalises by |u|^2 instead of |u| |v|", "normalised by |u|^2 instead of |u| |v|"),
    Mutation("cosine-no-eps", "cosine", "minbert/task_heads.py",
             "(u.norm(dim=-1) * v.norm(dim=-1)).clamp(min=eps)", "(u.norm(dim=-1) * v.norm(dim=-1))",
             "no eps: a zero vector gives 0 / 0", "keep the denominator away from 0 (eps)"),
    Mutation("mlm-masks-special-tokens", "mlm_masking", "minbert/masking.py",
             "        if token in vocab.special_ids:\n            continue\n", "",
             "[CLS], [SEP] and [PAD] may be chosen for prediction", "hold special tokens, which belong to no unit"),
    Mutation("mlm-always-mask", "mlm_masking", "minbert/masking.py",
             'return "random" if draw < 0.9 else "keep"', 'return "mask"',
             "every chosen position becomes [MASK] (no 10% random, no 10% kept)",
             "BERT's rule is 80% / 10% / 10%"),
    Mutation("mlm-no-shuffle", "mlm_masking", "minbert/masking.py",
             "    rng.shuffle(units)\n    chosen = 0", "    chosen = 0",
             "the units are taken in order: always the first 15% of the sequence",
             "visit the units in a random order"),
    Mutation("mlm-global-random", "mlm_masking", "minbert/masking.py",
             "    rng.shuffle(units)\n", "    random.shuffle(units)\n",
             "the shuffle draws from the module `random`, not the rng it is given",
             "never from the module `random`"),
    Mutation("label-scores-replace-cls-to-cls", "label_attention", "minbert/label_attention.py",
             "new_cls_row = torch.cat([scores[:, :, :1, :1], best], dim=-1)  # (B, H, 1, T)",
             "new_cls_row = torch.cat([label_scores[:, :, :1, :1].max(dim=2, keepdim=True).values.maximum("
             "scores[:, :, :1, :1]), best], dim=-1)",
             "the [CLS] -> [CLS] score takes the label max too (the paper leaves it alone)",
             "the [CLS] -> [CLS] score changed"),
    Mutation("label-scores-summed", "label_attention", "minbert/label_attention.py",
             ".max(dim=2, keepdim=True).values  # (B, H, 1, T-1)",
             ".sum(dim=2, keepdim=True)  # (B, H, 1, T-1)",
             "the [CLS] row and the label scores are summed instead of maxed", "the scores were summed"),
    Mutation("r-precision-lowest-first", "r_precision", "minbert/metrics.py",
             "np.argsort(-np.asarray(scores, dtype=np.float64), kind=\"stable\")[:r]",
             "np.argsort(np.asarray(scores, dtype=np.float64), kind=\"stable\")[:r]",
             "ranks the labels lowest score first", "rank the highest first"),
    Mutation("top-labels-no-float-cast", "r_precision", "minbert/metrics.py",
             "np.argsort(-np.asarray(scores, dtype=np.float64), kind=\"stable\")[:r]",
             "np.argsort(-np.asarray(scores), kind=\"stable\")[:r]",
             "negates the scores as given: uint8 wraps around, bools raise", "negating unsigned integers wraps"),
    Mutation("r-precision-over-k", "r_precision", "minbert/metrics.py",
             "np.sum(g[top_labels(s, r)] > 0) / r)", "np.sum(g[top_labels(s, r)] > 0) / len(g))",
             "divides by the number of labels instead of R", "instead of R"),
    Mutation("r-precision-ties-reversed", "r_precision", "minbert/metrics.py",
             "np.argsort(-np.asarray(scores, dtype=np.float64), kind=\"stable\")[:r]",
             "np.argsort(np.asarray(scores, dtype=np.float64), kind=\"stable\")[::-1][:r]",
             "ranks by reversing an ascending sort, so ties go to the higher label", "ties must go to the lower label"),
    Mutation("top-labels-unstable-sort", "r_precision", "minbert/metrics.py",
             "np.argsort(-np.asarray(scores, dtype=np.float64), kind=\"stable\")[:r]",
             "np.argsort(-np.asarray(scores, dtype=np.float64))[:r]",
             "numpy's default sort, which keeps short runs of ties in order and long ones not",
             "numpy's default sort is not stable on long arrays"),
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
    # The sweep of 2026-11-27 (8a4967f): for every TODO, each argument of its signature, the gradient it must pass
    # on, its edge rows and ties, and the rules that only show on many inputs.
    Mutation("embeddings-ignores-position-ids", "embeddings", "minbert/embeddings.py",
             "+ self.position_embeddings(position_ids)  # (T, C) broadcast to (B, T, C)",
             "+ self.position_embeddings(torch.arange(inputs_embeds.size(1)))  # (T, C) broadcast to (B, T, C)",
             "the positions are always 0, 1, ..., T - 1, whatever position_ids says",
             "position_ids was ignored",
             whole_model=False),
    Mutation("embeddings-no-dropout", "embeddings", "minbert/embeddings.py",
             "embeddings = self.dropout(self.LayerNorm(embeddings))", "embeddings = self.LayerNorm(embeddings)",
             "no dropout on the embeddings in training", "self.dropout was not applied", whole_model=False),
    Mutation("embeddings-ignores-inputs-embeds", "embeddings", "minbert/embeddings.py",
             "        if inputs_embeds is None:\n            inputs_embeds = self.word_embeddings(input_ids)",
             "        if input_ids is not None:\n            inputs_embeds = self.word_embeddings(input_ids)\n"
             "        else:\n            inputs_embeds = self.word_embeddings.weight[:inputs_embeds.size(1)]",
             "inputs_embeds given directly is replaced by rows of the word table",
             "inputs_embeds was ignored",
             whole_model=False),
    Mutation("mask-minus-inf", "attention_mask", "minbert/model.py",
             "return (1.0 - keep) * torch.finfo(dtype).min",
             "return torch.zeros_like(keep).masked_fill(keep == 0, float(\"-inf\"))",
             "-inf for padding: a row of all padding becomes NaN after the softmax",
             "not -inf (a row of all padding",
             whole_model=False),
    Mutation("mask-float32-min", "attention_mask", "minbert/model.py",
             "return (1.0 - keep) * torch.finfo(dtype).min", "return (1.0 - keep) * torch.finfo(torch.float32).min",
             "float32's most negative number in every dtype: -inf in float16",
             "float32's minimum does not fit in torch.float16",
             whole_model=False),
    Mutation("attention-scaled-by-keys", "attention", "minbert/attention.py",
             "/ math.sqrt(query.size(-1))", "/ math.sqrt(key.size(-2))",
             "scores divided by the square root of the number of keys instead of the head size",
             "divided by sqrt(number of keys)"),
    Mutation("attention-mask-subtracted", "attention", "minbert/attention.py",
             "scores = scores + attention_mask", "scores = scores - attention_mask",
             "the additive mask subtracted: padding gets the large positive score",
             "the mask was subtracted"),
    Mutation("attention-no-dropout", "attention", "minbert/attention.py",
             "context = (probs if dropout is None else dropout(probs)) @ value",
             "context = probs @ value",
             "the `dropout` argument is never applied to the probabilities",
             "no dropout was applied", whole_model=False),
    Mutation("attention-masked-fill-minus-inf", "attention", "minbert/attention.py",
             "scores = scores + attention_mask", "scores = scores.masked_fill(attention_mask < 0, float(\"-inf\"))",
             "padding set to -inf instead of adding the finite mask: a row of all padding becomes NaN",
             "a row with no real key NaN", whole_model=False),
    Mutation("split-heads-channels-interleaved", "split_heads", "minbert/attention.py",
             "x.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)",
             "x.view(B, T, self.head_dim, self.num_heads).permute(0, 3, 1, 2)",
             "C split as (D, H): head h gets channels h, h + H, ... instead of h*D .. (h+1)*D - 1",
             "head h got channels h, h + H, h + 2H"),
    Mutation("layer-ffn-reads-context", "layer", "minbert/layer.py",
             "self.output(self.intermediate(attention_output), attention_output)",
             "self.output(self.intermediate(context), attention_output)",
             "the feed-forward reads the attention's context instead of its add & norm output",
             "the feed-forward read the attention's context"),
    Mutation("layer-residual-in-place", "layer", "minbert/layer.py",
             "return self.LayerNorm(residual + self.dropout(self.dense(hidden_states)))",
             "return self.LayerNorm(residual.add_(self.dropout(self.dense(hidden_states))))",
             "the residual add written in place: it overwrites the caller's tensor (the layer's input)",
             "changed its input in place"),
    Mutation("layer-no-attention-add-norm", "layer", "minbert/layer.py",
             "attention_output = self.attention.output(context, hidden_states)",
             "attention_output = context",
             "the attention's output projection and add & norm skipped",
             "the attention's add & norm (self.attention.output) was skipped"),
    Mutation("layer-ignores-mask", "layer", "minbert/layer.py",
             "self.attention.self(hidden_states, attention_mask, output_attentions)",
             "self.attention.self(hidden_states, torch.zeros_like(attention_mask), output_attentions)",
             "the attention_mask is not passed on: padding is attended to",
             "attention_mask was not passed to the self-attention"),
    Mutation("layer-drops-output-attentions", "layer", "minbert/layer.py",
             "self.attention.self(hidden_states, attention_mask, output_attentions)",
             "self.attention.self(hidden_states, attention_mask)",
             "output_attentions is not passed to the self-attention: the probabilities come back None",
             "pass output_attentions to the self-attention", whole_model=False),
    Mutation("encoder-drops-output-attentions", "encoder", "minbert/encoder.py",
             "hidden_states, probs = layer(hidden_states, attention_mask, output_attentions)",
             "hidden_states, probs = layer(hidden_states, attention_mask)",
             "output_attentions is not passed to the layers: the attentions are None",
             "output_attentions was not passed to the layers", whole_model=False),
    Mutation("encoder-hidden-before-layer", "encoder", "minbert/encoder.py",
             "            hidden_states, probs = layer(hidden_states, attention_mask, output_attentions)\n"
             "            if output_hidden_states:\n                all_hidden.append(hidden_states)\n",
             "            if output_hidden_states:\n                all_hidden.append(hidden_states)\n"
             "            hidden_states, probs = layer(hidden_states, attention_mask, output_attentions)\n",
             "each layer's input collected instead of its output: the embeddings twice, the last layer never",
             "collect each layer's output after the layer", whole_model=False),
    Mutation("encoder-detaches-between-layers", "encoder", "minbert/encoder.py",
             "hidden_states, probs = layer(hidden_states, attention_mask, output_attentions)",
             "hidden_states, probs = layer(hidden_states.detach(), attention_mask, output_attentions)",
             "each layer's input detached: training never reaches the lower layers or the embeddings",
             "no gradient reaches the embeddings", whole_model=False),
    Mutation("mlm-loss-sum", "pretraining_heads", "minbert/heads.py",
             "return F.cross_entropy(prediction_logits[predicted], labels[predicted])",
             "return F.cross_entropy(prediction_logits[predicted], labels[predicted], reduction=\"sum\")",
             "the masked-LM loss is summed over the predicted positions, not averaged",
             "it is the sum over the predicted positions"),
    Mutation("mlm-decoder-detached", "pretraining_heads", "minbert/heads.py",
             "F.linear(self.transform(hidden_states), word_embeddings, self.bias)",
             "F.linear(self.transform(hidden_states), word_embeddings.detach(), self.bias)",
             "the tied word embeddings detached: the decoder never trains them",
             "no gradient reached the word embeddings"),
    Mutation("nsp-labels-not-flattened", "pretraining_heads", "minbert/heads.py",
             "next_sentence_label.view(-1))", "next_sentence_label)",
             "labels given as (B, 1) are not flattened: cross-entropy refuses them",
             "labels may come as (B, 1)"),
    Mutation("nsp-binary-on-one-logit", "pretraining_heads", "minbert/heads.py",
             "return F.cross_entropy(seq_relationship_logits, next_sentence_label.view(-1))",
             "return F.binary_cross_entropy_with_logits(seq_relationship_logits[:, 1], "
             "next_sentence_label.view(-1).float())",
             "a sigmoid on the NotNext logit instead of the two-way softmax",
             "a two-way softmax cross-entropy"),
    Mutation("adamw-second-moment-not-decayed", "adamw", "optim/adamw.py",
             "exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)",
             "exp_avg_sq.addcmul_(grad, grad, value=1 - beta2)",
             "v is never multiplied by beta2: the second moment only grows",
             "the second moment v was never decayed by beta2"),
    Mutation("adamw-first-moment-not-decayed", "adamw", "optim/adamw.py",
             "exp_avg.lerp_(grad, 1 - beta1)", "exp_avg.add_(grad, alpha=1 - beta1)",
             "m is never multiplied by beta1", "the first moment m was never decayed by beta1"),
    Mutation("adamw-eps-on-uncorrected-root", "adamw", "optim/adamw.py",
             "denom = (exp_avg_sq.sqrt() / bias_correction2**0.5).add_(eps)",
             "denom = exp_avg_sq.sqrt().add_(eps) / bias_correction2**0.5",
             "eps added to sqrt(v) before dividing by sqrt(c2)",
             "eps was added before the bias correction"),
    Mutation("adamw-moment-rebound", "adamw", "optim/adamw.py",
             "exp_avg.lerp_(grad, 1 - beta1)", "exp_avg = exp_avg.lerp(grad, 1 - beta1)",
             "m computed into a new tensor: the optimizer's exp_avg never changes",
             "exp_avg was not updated in place"),
    Mutation("adamw-amsgrad-ignored", "adamw", "optim/adamw.py",
             "        torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)\n"
             "        exp_avg_sq = max_exp_avg_sq\n",
             "        pass\n",
             "amsgrad's running maximum of v is never kept nor used", "max_exp_avg_sq is still 0"),
    Mutation("adamw-amsgrad-overwrites-v", "adamw", "optim/adamw.py",
             "        torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)\n"
             "        exp_avg_sq = max_exp_avg_sq\n",
             "        torch.maximum(max_exp_avg_sq, exp_avg_sq, out=exp_avg_sq)\n"
             "        max_exp_avg_sq.copy_(exp_avg_sq)\n",
             "amsgrad writes the maximum into v itself, so v stops being a running average",
             "v must keep its own running average"),
    Mutation("adamw-bias-correction-off-by-one", "adamw", "optim/adamw.py",
             "bias_correction1 = 1 - beta1**step\n    bias_correction2 = 1 - beta2**step",
             "bias_correction1 = 1 - beta1**(step + 1)\n    bias_correction2 = 1 - beta2**(step + 1)",
             "the bias corrections use t + 1 (step already counts from 1)",
             "step already counts from 1"),
    Mutation("schedule-negative-after-end", "schedule", "optim/schedules.py",
             "return max(0.0, float(num_training_steps - step)", "return (float(num_training_steps - step)",
             "past num_training_steps the factor goes negative", "the factor must never go below 0"),
    Mutation("schedule-all-warmup-divides-by-zero", "schedule", "optim/schedules.py",
             "float(max(1, num_training_steps - num_warmup_steps))",
             "float(num_training_steps - num_warmup_steps)",
             "W = N divides by zero at the end of the warm-up", "divided by zero"),
    Mutation("schedule-warmup-one-step-early", "schedule", "optim/schedules.py",
             "float(step) / float(max(1, num_warmup_steps))", "float(step) / float(max(1, num_warmup_steps - 1))",
             "the warm-up divides by W - 1, so it reaches 1 at step W - 1", "the warm-up reaches 1 one step early"),
    Mutation("schedule-decay-wrong-end", "schedule", "optim/schedules.py",
             "float(num_training_steps - step)", "float(step - num_warmup_steps)",
             "after the warm-up the factor rises from 0 to 1 instead of falling from 1 to 0",
             "the decay runs to the wrong end"),
    Mutation("schedule-factor-squared", "schedule", "optim/schedules.py",
             "    if step < num_warmup_steps:\n        return float(step) / float(max(1, num_warmup_steps))\n",
             "    if step < num_warmup_steps:\n        return (float(step) / float(max(1, num_warmup_steps))) ** 2\n",
             "the warm-up factor applied twice: (t / W)^2", "the factor was applied twice"),
    Mutation("no-decay-only-bias", "no_decay", "optim/param_groups.py",
             "return own not in _NO_DECAY_NAMES and not any(module in _NO_DECAY_MODULES for module in "
             "modules)",
             "return own not in _NO_DECAY_NAMES",
             "only the parameter's own name is checked: LayerNorm weights are decayed",
             "it is a LayerNorm scale"),
    Mutation("no-decay-inverted", "no_decay", "optim/param_groups.py",
             "return own not in _NO_DECAY_NAMES and not any(module in _NO_DECAY_MODULES for module in "
             "modules)",
             "return own in _NO_DECAY_NAMES or any(module in _NO_DECAY_MODULES for module in modules)",
             "True for the exempt parameters: the answer inverted",
             "True means the parameter IS decayed"),
    Mutation("no-decay-last-module-only", "no_decay", "optim/param_groups.py",
             "not any(module in _NO_DECAY_MODULES for module in modules)",
             "modules[-1] not in _NO_DECAY_MODULES",
             "reads the last module part only: a top-level parameter (no module) raises IndexError",
             "none at all for a parameter at the top level"),
    Mutation("mean-pool-detached", "mean_pool", "minbert/pooling.py",
             "(hidden_states * mask).sum(dim=1)", "(hidden_states.detach() * mask).sum(dim=1)",
             "the token vectors detached: no gradient reaches the encoder",
             "no gradient reached the token vectors"),
    Mutation("mean-pool-squeezes", "mean_pool", "minbert/pooling.py",
             "return (hidden_states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)",
             "return ((hidden_states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)).squeeze()",
             "a .squeeze() that drops the batch axis of a batch of one", "a batch of one lost its batch axis"),
    Mutation("max-pool-ignores-mask", "max_cls_pool", "minbert/pooling.py",
             "hidden_states.masked_fill(padding, torch.finfo(hidden_states.dtype).min).amax(dim=1)",
             "hidden_states.amax(dim=1)",
             "the maximum runs over the padding too", "the padding token won the maximum"),
    Mutation("classifier-detached", "classifier", "minbert/task_heads.py",
             "self.classifier(self.dropout(self.sentence_vector(output, attention_mask)))",
             "self.classifier(self.dropout(self.sentence_vector(output, attention_mask).detach()))",
             "the pooled vector detached: fine-tuning never reaches BERT",
             "no gradient reached the encoder's output"),
    Mutation("classifier-ignores-mask", "classifier", "minbert/task_heads.py",
             "self.classifier(self.dropout(self.sentence_vector(output, attention_mask)))",
             "self.classifier(self.dropout(self.sentence_vector(output, torch.ones_like(attention_mask))))",
             "the attention_mask is not passed to the pooling: padding is pooled",
             "attention_mask was not passed to self.sentence_vector"),
    Mutation("classification-loss-sum", "classifier", "minbert/task_heads.py",
             "F.cross_entropy(logits, labels)", "F.cross_entropy(logits, labels, reduction=\"sum\")",
             "the loss summed over the batch instead of averaged", "it is the sum over the batch"),
    Mutation("classification-loss-no-log-softmax", "classifier", "minbert/task_heads.py",
             "F.cross_entropy(logits, labels)", "F.nll_loss(logits, labels)",
             "nll_loss on the raw logits: no log-softmax at all", "the log-softmax is missing"),
    Mutation("cosine-eps-added", "cosine", "minbert/task_heads.py",
             "(u.norm(dim=-1) * v.norm(dim=-1)).clamp(min=eps)", "(u.norm(dim=-1) * v.norm(dim=-1) + eps)",
             "eps added to |u| |v| instead of bounding it: short vectors get a cosine below 1",
             "eps was added to the denominator"),
    Mutation("cosine-norms-detached", "cosine", "minbert/task_heads.py",
             "(u.norm(dim=-1) * v.norm(dim=-1)).clamp(min=eps)",
             "(u.norm(dim=-1) * v.norm(dim=-1)).detach().clamp(min=eps)",
             "the lengths detached: the gradient treats |u| |v| as a constant",
             "it treats |u| |v| as a constant"),
    Mutation("mlm-stops-at-first-misfit", "mlm_masking", "minbert/masking.py",
             "continue  # a word that does not fit whole is skipped",
             "break  # a word that does not fit whole is skipped",
             "stops at the first word that does not fit the budget: about 12.6% masked instead of 15%",
             "a word that does not fit must be skipped, not end the masking"),
    Mutation("mlm-words-ignore-adjacency", "mlm_masking", "minbert/masking.py",
             "continues_word = (whole_word and vocab.is_continuation[token] and units\n"
             "                          and units[-1][-1] == position - 1)",
             "continues_word = whole_word and vocab.is_continuation[token] and units",
             "a continuation joins the previous unit even across a special token",
             "only if that piece sits at the previous position"),
    Mutation("mlm-units-ignore-whole-word", "mlm_masking", "minbert/masking.py",
             "continues_word = (whole_word and vocab.is_continuation[token] and units",
             "continues_word = (vocab.is_continuation[token] and units",
             "continuations grouped even when whole_word is False",
             "with whole_word=False every position is a unit of its own"),
    Mutation("mlm-replacement-once-per-word", "mlm_masking", "minbert/masking.py",
             "        for position in unit:\n            labels[position] = input_ids[position]\n"
             "            masked[position] = corrupt(input_ids[position], choose_replacement(rng), vocab, rng)",
             "        replacement = choose_replacement(rng)\n"
             "        for position in unit:\n            labels[position] = input_ids[position]\n"
             "            masked[position] = corrupt(input_ids[position], replacement, vocab, rng)",
             "the 80/10/10 decision drawn once per whole word (SpanBERT's rule) instead of per position",
             "80/10/10 per position"),
    Mutation("mlm-label-is-corrupted-token", "mlm_masking", "minbert/masking.py",
             "            labels[position] = input_ids[position]\n"
             "            masked[position] = corrupt(input_ids[position], choose_replacement(rng), vocab, rng)",
             "            masked[position] = corrupt(input_ids[position], choose_replacement(rng), vocab, rng)\n"
             "            labels[position] = masked[position]",
             "the label is what the model sees ([MASK] or the random token), not the original",
             "not the original token"),
    Mutation("span-mask-overlaps", "mlm_masking", "minbert/masking.py",
             "            taken[position] = True\n", "",
             "positions are never marked taken: spans may overlap or touch",
             "overlap or touch: mark a span's positions taken"),
    Mutation("span-mask-decision-per-position", "mlm_masking", "minbert/masking.py",
             "masked[position] = corrupt(input_ids[position], replacement, vocab, rng)",
             "masked[position] = corrupt(input_ids[position], choose_replacement(rng), vocab, rng)",
             "the 80/10/10 decision drawn per position inside a span", "once per span"),
    Mutation("span-mask-budget-not-counted", "mlm_masking", "minbert/masking.py",
             "        chosen += len(span)\n", "        chosen += 1\n",
             "a span counts as one position against the budget", "more positions than the budget"),
    Mutation("label-scores-without-cls-row", "label_attention", "minbert/label_attention.py",
             "best = torch.cat([cls_row, label_scores[..., 1:]],\n"
             "                     dim=2).max(dim=2, keepdim=True).values",
             "best = label_scores[..., 1:].max(dim=2, keepdim=True).values",
             "the maximum over the labels only: S[0, j] is not a candidate",
             "S[0, j] itself is one of the candidates"),
    Mutation("label-scores-in-place", "label_attention", "minbert/label_attention.py",
             "    return torch.cat([new_cls_row, scores[:, :, 1:]], dim=2)\n",
             "    scores[:, :, :1] = new_cls_row\n    return scores\n",
             "writes the new row into the caller's scores in place",
             "changed its input scores in place"),
    Mutation("r-precision-counts-positive-scores", "r_precision", "minbert/metrics.py",
             "np.sum(g[top_labels(s, r)] > 0) / r)", "np.sum(s[top_labels(s, r)] > 0) / r)",
             "counts the top labels whose score is positive instead of those that are gold",
             "count the gold labels among the R best (gold[top] > 0)"),
    Mutation("r-precision-floor-division", "r_precision", "minbert/metrics.py",
             "np.sum(g[top_labels(s, r)] > 0) / r)", "np.sum(g[top_labels(s, r)] > 0) // r)",
             "integer division: every document scores 0 or 1", "R-Precision is a fraction in [0, 1]"),
    Mutation("lora-no-dropout", "lora", "minbert/lora.py",
             "down = self.lora_dropout(x) @ self.lora_A.T", "down = x @ self.lora_A.T",
             "the adapter's dropout is never applied", "must go through self.lora_dropout"),
    # Edges every TODO meets: a batch of one, half precision, vectors near zero, and results read the way
    # their caller reads them (inclusive span ends, a budget in word pieces, a random token per position).
    Mutation("nsp-labels-squeezed", "pretraining_heads", "minbert/heads.py",
             "next_sentence_label.view(-1))", "next_sentence_label.squeeze())",
             "labels flattened with .squeeze(): a batch of one loses its batch axis and cross-entropy refuses it",
             "drops every axis of size 1"),
    Mutation("max-pool-fill-minus-1e9", "max_cls_pool", "minbert/pooling.py",
             "masked_fill(padding, torch.finfo(hidden_states.dtype).min)", "masked_fill(padding, -1e9)",
             "padding filled with -1e9, which float16 cannot hold", "does not fit in float16"),
    Mutation("mask-tokens-span-end-exclusive", "mlm_masking", "minbert/masking.py",
             "spans.append((unit[0], unit[-1]))", "spans.append((unit[0], unit[-1] + 1))",
             "spans recorded as (first, one past the last): pre-training reads both ends inclusive",
             "its last position included"),
    Mutation("span-mask-budget-in-words", "mlm_masking", "minbert/masking.py",
             "        chosen += len(span)\n", "        chosen += length\n",
             "the span's drawn length in words counted against a budget of word pieces: 2,268 of 2,400 spent",
             "the budget counts word pieces"),
    Mutation("span-mask-one-random-token", "mlm_masking", "minbert/masking.py",
             "            masked[position] = corrupt(input_ids[position], replacement, vocab, rng)\n",
             "            masked[position] = (copied if replacement == \"random\" and position > span[0]\n"
             "                                else corrupt(input_ids[position], replacement, vocab, rng))\n"
             "            copied = masked[position]\n",
             "one random token drawn for a randomly replaced span and copied over all its positions",
             "one random token was copied over the whole span"),
    Mutation("r-precision-ranked-by-gold", "r_precision", "minbert/metrics.py",
             "np.sum(g[top_labels(s, r)] > 0) / r)", "np.sum(g[top_labels(g, r)] > 0) / r)",
             "ranks the labels by the gold labels instead of the scores: always 1",
             "ranked by the gold labels"),
    Mutation("mask-without-heads-axis", "attention_mask", "minbert/model.py",
             "keep = attention_mask[:, None, None, :].to(dtype)", "keep = attention_mask[:, None, :].to(dtype)",
             "the mask built as (B, 1, T), without its heads axis", "the heads axis is missing",
             whole_model=True),
    Mutation("lora-dropout-on-base-too", "lora", "minbert/lora.py",
             "return self.base_layer(x) + self.scaling * (down @ self.lora_B.T)",
             "return self.base_layer(self.lora_dropout(x)) + self.scaling * (down @ self.lora_B.T)",
             "dropout on the frozen layer's input too", "not on its output or on the base layer's path"),
    Mutation("embeddings-no-layernorm", "embeddings", "minbert/embeddings.py",
             "embeddings = self.dropout(self.LayerNorm(embeddings))", "embeddings = self.dropout(embeddings)",
             "the LayerNorm on the summed embeddings forgotten", "the LayerNorm over the sum is missing"),
    Mutation("mask-on-queries-axis", "attention_mask", "minbert/model.py",
             "keep = attention_mask[:, None, None, :].to(dtype)", "keep = attention_mask[:, None, :, None].to(dtype)",
             "the padded queries (rows) masked instead of the padded keys (columns)", "the keys are the last axis"),
    Mutation("attention-key-dot-T", "attention", "minbert/attention.py",
             "query @ key.transpose(-1, -2)", "query @ key.T",
             "K^T written key.T, which reverses all four axes", ".T reverses all 4 axes of key"),
    Mutation("attention-mask-read-as-keep-flags", "attention", "minbert/attention.py",
             "scores = scores + attention_mask",
             "scores = scores.masked_fill(attention_mask == 0, float('-inf'))",
             "the additive mask read as 1/0 keep flags: the real keys filled with -inf",
             "add the mask to the scores"),
    Mutation("feed-forward-relu", "feed_forward", "minbert/layer.py",
             'F.gelu(self.dense(hidden_states), approximate="none")', "F.relu(self.dense(hidden_states))",
             "ReLU, as in the original Transformer, instead of GELU", "this is ReLU; BERT uses GELU"),
    Mutation("addnorm-no-dropout", "layer", "minbert/layer.py",
             "residual + self.dropout(self.dense(hidden_states))", "residual + self.dense(hidden_states)",
             "the residual dropout forgotten", "apply self.dropout to the projection before the residual add",
             whole_model=False),
    Mutation("addnorm-dropout-after-norm", "layer", "minbert/layer.py",
             "self.LayerNorm(residual + self.dropout(self.dense(hidden_states)))",
             "self.dropout(self.LayerNorm(residual + self.dense(hidden_states)))",
             "dropout on the sub-layer's normalised output", "dropout belongs on the projection only",
             whole_model=False),
    Mutation("pooler-no-tanh", "pooler", "minbert/model.py",
             "torch.tanh(self.dense(hidden_states[:, 0]))", "self.dense(hidden_states[:, 0])",
             "the pooler's tanh forgotten", "the tanh is missing"),
    Mutation("adamw-amsgrad-max-not-stored", "adamw", "optim/adamw.py",
             "torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)\n        exp_avg_sq = max_exp_avg_sq",
             "exp_avg_sq = torch.maximum(max_exp_avg_sq, exp_avg_sq)",
             "amsgrad's maximum taken but never stored in max_exp_avg_sq", "max_exp_avg_sq is still 0"),
    Mutation("no-decay-substring-any-part", "no_decay", "optim/param_groups.py",
             "    *modules, own = name.split(\".\")\n    return own not in _NO_DECAY_NAMES and not any("
             "module in _NO_DECAY_MODULES for module in modules)",
             "    return not any(part in name for part in _NO_DECAY_NAMES + _NO_DECAY_MODULES)",
             "a substring test of every exempt word on the whole name", "a module called 'biased' (not a bias)"),
    Mutation("no-decay-misses-top-level-bias", "no_decay", "optim/param_groups.py",
             "    *modules, own = name.split(\".\")\n    return own not in _NO_DECAY_NAMES and not any("
             "module in _NO_DECAY_MODULES for module in modules)",
             "    return not name.endswith(\".bias\") and \"LayerNorm\" not in name.split(\".\")",
             "only names ending in '.bias' and LayerNorm modules exempt", "it is a bias at the top level"),
    Mutation("mean-pool-plain-mean", "mean_pool", "minbert/pooling.py",
             "(hidden_states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)",
             "hidden_states.mean(dim=1)",
             "a plain mean over every position, padding included", "the padding token counted"),
    Mutation("cls-pool-pooler-output", "max_cls_pool", "minbert/pooling.py",
             "return output.last_hidden_state[:, 0]", "return output.pooler_output",
             "the [CLS] pooling returns the pooler's tanh output", "returned the pooler output"),
    Mutation("mlm-replacement-module-random", "mlm_masking", "minbert/masking.py",
             "    draw = rng.random()\n", "    draw = random.random()\n",
             "choose_replacement draws from the module random, not the seeded rng",
             "drew nothing from the rng it was given"),
    Mutation("label-scores-whole-cls-row", "label_attention", "minbert/label_attention.py",
             "    cls_row = scores[:, :, :1, 1:]  # (B, H, 1, T-1)\n"
             "    best = torch.cat([cls_row, label_scores[..., 1:]],\n"
             "                     dim=2).max(dim=2, keepdim=True).values  # (B, H, 1, T-1)\n"
             "    new_cls_row = torch.cat([scores[:, :, :1, :1], best], dim=-1)  # (B, H, 1, T)\n"
             "    return torch.cat([new_cls_row, scores[:, :, 1:]], dim=2)",
             "    best = torch.cat([scores[:, :, :1], label_scores], dim=2).max(dim=2, keepdim=True).values\n"
             "    return torch.cat([best, scores[:, :, 1:]], dim=2)",
             "the whole [CLS] row replaced by the label maximum, key 0 included",
             "the [CLS] -> [CLS] score changed"),
    Mutation("lora-no-scaling", "lora", "minbert/lora.py",
             "self.scaling * (down @ self.lora_B.T)", "(down @ self.lora_B.T)",
             "the update not scaled by alpha / r", "was not multiplied by alpha / r"),
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
    parser = argparse.ArgumentParser(prog="tests/mutations.py", description=__doc__,
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
        print("usage: tests/mutations.py NAME OUT_DIR\n")
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
    print(f"wrote {out}; grade it with: python -m grading.grade --submission {out} --edition full")
    return 0


if __name__ == "__main__":
    sys.exit(main())
