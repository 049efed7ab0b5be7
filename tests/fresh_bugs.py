"""Realistic bugs outside tests/mutations.py's catalogue, to measure what the grader's first message says.

    .venv/bin/python tests/fresh_bugs.py            grade them all (full edition) and print the figure

Written on 2026-12-01 before the grader's answers to them were seen, and kept as they were: a bug gets
no catalogued mistake of its own here, so the figure measures how general the diagnosis is (verdict.py's
transforms, crashes.py's explanations, the tests' own checks). Each bug's `message` is a regular
expression of the words that name its mistake; the first failing test of its component (the first a
student reads) is classified as
- "names": it matches `message`, which was written to match only a message that names the cause, or a fact
  about the output that identifies it ("4 times the expected", "in another order", "5/6 of the expected",
  the operands' shapes that show the transposition, or the failing check's own words where the check exists
  to catch that mistake, as AddNorm's eps); the output's name, its shape, or where and by how much it
  differs do not count;
- "crash, no operands": a crash shown without what it computed on (no shape, no value of an operand);
- "values only": it says only which output, where and by how much, or its shape (no mistake named, none
  guessed);
- "a fact, not the cause": a transform of the expected values it equals that does not identify the bug
  ("plus -12 everywhere", "a function of the expected values that rises with them"), read by eye: a
  message that named another mistake would be "misleading" (none does).

Shares are over the bugs that cost points; a bug the tests cannot see is counted apart (`missed`).
"""

from __future__ import annotations

import re
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grading.config import COMPONENTS  # noqa: E402
from mutations import Mutation, mutant  # noqa: E402


def bug(name: str, component: str, old: str, new: str, description: str, names: str) -> Mutation:
    return Mutation(name, component, COMPONENTS[component][0].split("::")[0], old, new, description, names)


FRESH_BUGS: tuple[Mutation, ...] = (
    # ----- embeddings
    bug("emb-positions-plus-one", "embeddings", "self.position_embeddings(position_ids)",
        "self.position_embeddings(position_ids + 1)", "every position read one row too far",
        r"position.*(shift|one row|next)|shifted by one"),
    bug("emb-norm-before-segments", "embeddings", """        embeddings = (inputs_embeds
                      + self.position_embeddings(position_ids)  # (T, C) broadcast to (B, T, C)
                      + self.token_type_embeddings(token_type_ids))
        embeddings = self.dropout(self.LayerNorm(embeddings))""", """        embeddings = self.LayerNorm(inputs_embeds + self.position_embeddings(position_ids))
        embeddings = self.dropout(embeddings + self.token_type_embeddings(token_type_ids))""",
        "the LayerNorm before the segment vectors are added", r"LayerNorm over the sum|comes after the sum"),
    bug("emb-positions-twice", "embeddings", "+ self.token_type_embeddings(token_type_ids))",
        "+ self.position_embeddings(position_ids))", "the position vectors added twice, no segment vectors",
        r"segment \(token type\) embeddings are missing"),
    bug("emb-layer-norm-without-affine", "embeddings",
        "        embeddings = self.dropout(self.LayerNorm(embeddings))",
        "        embeddings = self.dropout(torch.nn.functional.layer_norm(embeddings, embeddings.shape[-1:]))",
        "F.layer_norm without the module's weight and bias", r"LayerNorm's (weight|scale)|weight and bias|affine"),
    # ----- attention_mask
    bug("mask-minus-ten-thousand", "attention_mask", "return (1.0 - keep) * torch.finfo(dtype).min",
        "return (1.0 - keep) * -10000.0", "the old BERT constant -10000 instead of the dtype's minimum",
        r"most negative|finfo|all -1e\+04"),
    bug("mask-always-float32", "attention_mask", "keep = attention_mask[:, None, None, :].to(dtype)",
        "keep = attention_mask[:, None, None, :].float()", "the mask made in float32 whatever dtype is asked",
        r"build the mask in the dtype"),
    bug("mask-keeps-ones", "attention_mask", "return (1.0 - keep) * torch.finfo(dtype).min",
        "return keep * 0.0 + (1.0 - keep) * torch.finfo(dtype).min + keep",
        "tokens get 1 instead of 0", r"tokens got 1|are all 1|plus 1"),
    # ----- attention
    bug("scores-times-sqrt", "attention", "/ math.sqrt(query.size(-1))", "* math.sqrt(query.size(-1))",
        "the scores multiplied by sqrt(D) instead of divided", r"4 times|too large"),
    bug("softmax-before-mask", "attention", """    scores = scores + attention_mask
    probs = scores.softmax(dim=-1)  # each query's row sums to 1 over the keys""", """    probs = scores.softmax(dim=-1)  # each query's row sums to 1 over the keys
    scores = scores + attention_mask""", "the softmax taken before the mask is added",
        r"mask must be added before the softmax|padding keys are attended"),
    bug("dropout-on-context", "attention",
        "    context = (probs if dropout is None else dropout(probs)) @ value  # (B, H, T, D)",
        "    context = probs @ value\n    context = context if dropout is None else dropout(context)",
        "dropout on the context instead of the probabilities", r"apply `dropout` to the probabilities|dropout .*(probabilities|context)|exactly 0 at"),
    bug("key-transposed-wrong-axes", "attention", "query @ key.transpose(-1, -2)", "query @ key.transpose(1, 2)",
        "K transposed on the heads and tokens axes", r"pairs the last axis"),
    bug("log-softmax", "attention", "probs = scores.softmax(dim=-1)", "probs = scores.log_softmax(dim=-1)",
        "log_softmax instead of softmax", r"not 1|log"),
    # ----- split_heads
    bug("split-permute-wrong", "split_heads", ".transpose(1, 2)  # (B, T, C) -> (B, H, T, D)",
        ".permute(0, 2, 3, 1)  # (B, T, C) -> (B, H, T, D)", "the split permuted to (B, H, D, T)",
        r"in another order"),
    bug("merge-view-after-transpose", "split_heads", "x.transpose(1, 2).reshape(B, T, self.num_heads * self.head_dim)",
        "x.transpose(1, 2).view(B, T, self.num_heads * self.head_dim)", ".view after a transpose",
        r"reshape"),
    # ----- feed_forward
    bug("gelu-before-dense", "feed_forward", 'F.gelu(self.dense(hidden_states), approximate="none")',
        "self.dense(F.gelu(hidden_states))", "GELU applied to the input, then the dense layer",
        r"GELU|activation"),
    bug("quick-gelu", "feed_forward", 'F.gelu(self.dense(hidden_states), approximate="none")',
        "self.dense(hidden_states) * torch.sigmoid(1.702 * self.dense(hidden_states))",
        "OpenAI's quick GELU, x sigmoid(1.702 x)", r"GELU|erf|approximation"),
    bug("silu", "feed_forward", 'F.gelu(self.dense(hidden_states), approximate="none")',
        "F.silu(self.dense(hidden_states))", "SiLU instead of GELU", r"GELU|erf|Phi|activation|function of the expected values"),
    # ----- layer
    bug("add-norm-unbiased-variance", "layer",
        "return self.LayerNorm(residual + self.dropout(self.dense(hidden_states)))", """x = residual + self.dropout(self.dense(hidden_states))
        centred = x - x.mean(dim=-1, keepdim=True)
        x = centred / torch.sqrt(x.var(dim=-1, keepdim=True) + self.LayerNorm.eps)
        return x * self.LayerNorm.weight + self.LayerNorm.bias""", "LayerNorm written out with the unbiased variance",
        r"unbiased"),
    bug("add-norm-default-eps", "layer",
        "return self.LayerNorm(residual + self.dropout(self.dense(hidden_states)))",
        "return F.layer_norm(residual + self.dropout(self.dense(hidden_states)), self.LayerNorm.normalized_shape, "
        "self.LayerNorm.weight, self.LayerNorm.bias)", "F.layer_norm with torch's default eps 1e-5",
        r"eps"),
    bug("add-norm-dropout-on-residual", "layer",
        "return self.LayerNorm(residual + self.dropout(self.dense(hidden_states)))",
        "return self.LayerNorm(self.dropout(residual) + self.dense(hidden_states))",
        "dropout on the residual instead of the projection", r"dropout belongs on the projection"),
    bug("layer-attention-residual-is-context", "layer",
        "attention_output = self.attention.output(context, hidden_states)",
        "attention_output = self.attention.output(context, context)",
        "the attention's add & norm adds the context as its residual", r"residual .*(context|attention)"),
    bug("layer-ffn-reads-input", "layer", "self.output(self.intermediate(attention_output), attention_output)",
        "self.output(self.intermediate(hidden_states), attention_output)",
        "the feed-forward expands the layer's input instead of the attention output", r"feed-forward (read|expand)s? .*input"),
    bug("layer-ffn-residual-is-expansion", "layer",
        "layer_output = self.output(self.intermediate(attention_output), attention_output)",
        "expanded = self.intermediate(attention_output)\n        layer_output = self.output(expanded, expanded)",
        "the feed-forward's add & norm adds the (B, T, I) expansion as its residual", r"residual is \(B, T, I\)"),
    # ----- encoder
    bug("encoder-attentions-last-only", "encoder", "                all_attentions.append(probs)",
        "                all_attentions[:] = [probs]", "only the last layer's probabilities kept",
        r"must give 3 tensors"),
    bug("encoder-reversed", "encoder", "        for layer in self.layer:", "        for layer in reversed(self.layer):",
        "the layers run last to first", r"revers|last to first|order"),
    bug("encoder-hidden-states-aliased", "encoder", "                all_hidden.append(hidden_states)",
        "                all_hidden.append(all_hidden[0])", "hidden_states collects the embeddings again and again",
        r"embeddings (twice|again)|expected values of its index 0, repeated"),
    # ----- pooler
    bug("pooler-relu", "pooler", "torch.tanh(self.dense(hidden_states[:, 0]))",
        "torch.relu(self.dense(hidden_states[:, 0]))", "ReLU instead of tanh", r"tanh|activation|function of the expected values|exactly 0 at"),
    bug("pooler-second-token", "pooler", "torch.tanh(self.dense(hidden_states[:, 0]))",
        "torch.tanh(self.dense(hidden_states[:, 1]))", "the pooler reads token 1", r"\[CLS\]|position 0|first token"),
    # ----- pretraining_heads
    bug("lm-head-untransposed", "pretraining_heads",
        "return F.linear(self.transform(hidden_states), word_embeddings, self.bias)",
        "return self.transform(hidden_states) @ word_embeddings + self.bias",
        "E used as (C, V): the matrix product's axes do not meet", r"pairs the last axis|\.T\b"),
    bug("lm-head-transform-twice", "pretraining_heads",
        "return F.linear(self.transform(hidden_states), word_embeddings, self.bias)",
        "return F.linear(self.transform(self.transform(hidden_states)), word_embeddings, self.bias)",
        "the transform applied twice", r"transform"),
    bug("mlm-loss-plain-cross-entropy", "pretraining_heads", """    predicted = labels != IGNORE_INDEX  # (B, T) or (N,)
    if not predicted.any():  # nothing to predict: 0, not the NaN of an empty mean
        return prediction_logits.sum() * 0.0
    return F.cross_entropy(prediction_logits[predicted], labels[predicted])  # over (N, V) and (N,)""",
        """    return F.cross_entropy(prediction_logits.reshape(-1, prediction_logits.size(-1)), labels.reshape(-1))""",
        "cross_entropy over everything: right, but NaN when nothing is predicted", r"NaN"),
    bug("mlm-loss-predicted-inverted", "pretraining_heads", "predicted = labels != IGNORE_INDEX  # (B, T) or (N,)",
        "predicted = labels == IGNORE_INDEX  # (B, T) or (N,)", "the ignored positions selected",
        r"ignored|IGNORE_INDEX"),
    bug("mlm-loss-sum-over-batch", "pretraining_heads",
        "return F.cross_entropy(prediction_logits[predicted], labels[predicted])  # over (N, V) and (N,)",
        "return F.cross_entropy(prediction_logits[predicted], labels[predicted], reduction='sum') / len(labels)",
        "the sum divided by the batch size", r"3/2"),
    bug("nsp-softmax-first", "pretraining_heads",
        "return F.cross_entropy(seq_relationship_logits, next_sentence_label.view(-1))",
        "return F.cross_entropy(seq_relationship_logits.softmax(-1), next_sentence_label.view(-1))",
        "softmax before cross-entropy", r"softmax"),
    bug("nsp-nll-raw", "pretraining_heads",
        "return F.cross_entropy(seq_relationship_logits, next_sentence_label.view(-1))",
        "return F.nll_loss(seq_relationship_logits, next_sentence_label.view(-1))",
        "nll_loss on the raw logits", r"log.softmax|raw logits"),
    # ----- adamw
    bug("adamw-correction-step-minus-one", "adamw",
        "bias_correction1 = 1 - beta1**step\n    bias_correction2 = 1 - beta2**step",
        "bias_correction1 = 1 - beta1**(step - 1) + 1e-12\n    bias_correction2 = 1 - beta2**(step - 1) + 1e-12",
        "the bias corrections with t - 1", r"bias correction"),
    bug("adamw-v-of-abs-grad", "adamw", "exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)",
        "exp_avg_sq.mul_(beta2).add_(grad.abs(), alpha=1 - beta2)", "v averages |g| instead of g^2",
        r"g\^2|\|g\|"),
    bug("adamw-step-without-lr", "adamw", "step_size = lr / bias_correction1", "step_size = 1 / bias_correction1",
        "the step not scaled by the learning rate", r"learning rate|\blr\b"),
    bug("adamw-decay-grows", "adamw", "param.mul_(1 - lr * weight_decay)", "param.mul_(1 + lr * weight_decay)",
        "the decay's sign flipped: weights grow", r"sign|1 \+"),
    bug("adamw-m-with-beta2", "adamw", "exp_avg.lerp_(grad, 1 - beta1)", "exp_avg.lerp_(grad, 1 - beta2)",
        "the first moment averaged with beta2", r"beta1|0\.01 times"),
    # ----- schedule
    bug("schedule-warmup-over-w-plus-one", "schedule", "float(step) / float(max(1, num_warmup_steps))",
        "float(step) / float(max(1, num_warmup_steps + 1))", "the warm-up divided by W + 1",
        r"4/5"),
    bug("schedule-integer-division", "schedule", "float(step) / float(max(1, num_warmup_steps))",
        "float(step // max(1, num_warmup_steps))", "integer division in the warm-up", r"are 0|integer|exactly 0 at"),
    bug("schedule-decay-one-late", "schedule", "float(num_training_steps - step)",
        "float(num_training_steps - step + 1)", "the decay one step late", r"shifted|next index|previous index"),
    # ----- no_decay
    bug("no-decay-any-norm", "no_decay",
        "return own not in _NO_DECAY_NAMES and not any(module in _NO_DECAY_MODULES for module in modules)",
        'return own not in _NO_DECAY_NAMES and "norm" not in name.lower()',
        "any name holding 'norm' exempt", r"norm"),
    bug("no-decay-first-module-only", "no_decay",
        "return own not in _NO_DECAY_NAMES and not any(module in _NO_DECAY_MODULES for module in modules)",
        "return own not in _NO_DECAY_NAMES and not any(module in _NO_DECAY_MODULES for module in modules[:1])",
        "only the first module part looked at", r"it is a LayerNorm"),
    # ----- mean_pool
    bug("mean-pool-batch-count", "mean_pool", "mask.sum(dim=1).clamp(min=1.0)", "mask.sum().clamp(min=1.0)",
        "divided by the number of real tokens in the whole batch", r"whole batch|each row's own|factor of their own at each index"),
    bug("mean-pool-over-features", "mean_pool", "(hidden_states * mask).sum(dim=1)", "(hidden_states * mask).sum(dim=2)",
        "the sum taken over the features", r"axis|features"),
    # ----- max_cls_pool
    bug("max-pool-minus-inf", "max_cls_pool", "masked_fill(padding, torch.finfo(hidden_states.dtype).min)",
        'masked_fill(padding, float("-inf"))', "padding filled with -inf", r"finite|finfo"),
    bug("max-pool-over-features", "max_cls_pool", ".amax(dim=1)", ".amax(dim=2)", "the maximum over the features",
        r"axis|features"),
    bug("cls-first-sequence", "max_cls_pool", "return output.last_hidden_state[:, 0]",
        "return output.last_hidden_state[0]", "the first sequence instead of the first token", r"\[CLS\]|first token"),
    # ----- classifier
    bug("classifier-dropout-on-logits", "classifier",
        "self.classifier(self.dropout(self.sentence_vector(output, attention_mask)))",
        "self.dropout(self.classifier(self.sentence_vector(output, attention_mask)))",
        "dropout on the logits instead of the pooled vector", r"dropout"),
    bug("classification-loss-transposed", "classifier", "return F.cross_entropy(logits, labels)",
        "return F.cross_entropy(logits.T, labels)", "the logits transposed", r"\(K, B\)"),
    bug("classification-loss-label-smoothing", "classifier", "return F.cross_entropy(logits, labels)",
        "return F.cross_entropy(logits, labels, label_smoothing=0.1)", "label smoothing 0.1", r"smoothing"),
    # ----- cosine
    bug("cosine-norm-over-batch", "cosine", "(u.norm(dim=-1) * v.norm(dim=-1))", "(u.norm(dim=0) * v.norm(dim=0))",
        "the lengths taken over the batch axis", r"is \(2,\)|\(C,\)"),
    bug("cosine-distance", "cosine", "return (u * v).sum(dim=-1) /",
        "return 1 - (u * v).sum(dim=-1) /", "1 - cos, the cosine distance", r"1 minus"),
    bug("cosine-squared-lengths", "cosine", "(u.norm(dim=-1) * v.norm(dim=-1))",
        "((u * u).sum(dim=-1) * (v * v).sum(dim=-1))", "the squared lengths", r"square|length"),
    # ----- mlm_masking
    bug("units-skip-mask-id-only", "mlm_masking", "        if token in vocab.special_ids:\n            continue\n",
        "        if token == vocab.mask_id:\n            continue\n", "only [MASK] skipped, not the other specials",
        r"special tokens"),
    bug("replacement-no-keep", "mlm_masking", 'return "random" if draw < 0.9 else "keep"', 'return "random"',
        "no position kept: 80% mask, 20% random", r"gave \['mask', 'random'\]"),
    bug("replacement-thresholds-off", "mlm_masking", "    if draw < 0.8:\n", "    if draw < 0.85:\n",
        "85% [MASK]", r"'mask'.* is 0\.85"),
    bug("mask-tokens-label-is-mask-id", "mlm_masking", "            labels[position] = input_ids[position]\n"
        "            masked[position] = corrupt(input_ids[position], choose_replacement(rng), vocab, rng)",
        "            labels[position] = vocab.mask_id\n"
        "            masked[position] = corrupt(input_ids[position], choose_replacement(rng), vocab, rng)",
        "the label is the [MASK] id", r"not the original token"),
    bug("mask-tokens-budget-off-by-one", "mlm_masking", "        if chosen + len(unit) > budget:\n",
        "        if chosen + len(unit) >= budget:\n", "a unit that would exactly fill the budget skipped",
        r"5/6"),
    bug("span-mask-spans-as-lengths", "mlm_masking", "        spans.append((span[0], span[-1]))\n        chosen",
        "        spans.append((span[0], len(span)))\n        chosen", "spans recorded as (start, length)",
        r"ends before it starts"),
    # ----- label_attention
    bug("label-scores-every-row", "label_attention", """    cls_row = scores[:, :, :1, 1:]  # (B, H, 1, T-1)
    best = torch.cat([cls_row, label_scores[..., 1:]],
                     dim=2).max(dim=2, keepdim=True).values  # (B, H, 1, T-1)
    new_cls_row = torch.cat([scores[:, :, :1, :1], best], dim=-1)  # (B, H, 1, T)
    return torch.cat([new_cls_row, scores[:, :, 1:]], dim=2)""", """    best = label_scores.max(dim=2, keepdim=True).values  # (B, H, 1, T)
    merged = torch.maximum(scores, best)
    merged[:, :, :, :1] = scores[:, :, :, :1]
    return merged""", "every query row takes the label maximum, not only [CLS]'s", r"other queries"),
    bug("label-scores-min", "label_attention", ".max(dim=2, keepdim=True).values  # (B, H, 1, T-1)",
        ".min(dim=2, keepdim=True).values  # (B, H, 1, T-1)", "the minimum instead of the maximum",
        r"minimum|maximum"),
    # ----- r_precision
    bug("top-labels-sorted-scores", "r_precision",
        'return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[:r]',
        'return np.sort(-np.asarray(scores, dtype=np.float64), kind="stable")[:r]',
        "the sorted scores returned instead of their labels", r"labels, not|indices|scores instead"),
    bug("r-precision-all-gold", "r_precision", "return float(np.sum(g[top_labels(s, r)] > 0) / r)",
        "return float(np.sum(g > 0) / r)", "counts every gold label, not those among the R best", r"every gold label"),
    # ----- lora
    bug("lora-scaling-on-base", "lora", "return self.base_layer(x) + self.scaling * (down @ self.lora_B.T)",
        "return self.scaling * (self.base_layer(x) + down @ self.lora_B.T)", "alpha / r scales the base output too",
        r"scal(ed|ing|es) .*(base|frozen)|the base .*(scal|times)"),
    bug("lora-a-untransposed", "lora", "down = self.lora_dropout(x) @ self.lora_A.T", "down = self.lora_dropout(x) @ self.lora_A",
        "A used as (I, r): the product's axes do not meet", r"pairs the last axis|\.T\b"),
)


def classify(output: str, names: str) -> str:
    """The kind of a first failing test's output (see the module docstring)."""
    first = output.split("\n\n")[0]
    if re.search(names, first, re.IGNORECASE):
        return "names"
    if "its operands could not be shown" in first or re.search(r"failed: (\w+Error|Exception)\b(?!: .*`)", first) \
            and "AssertionError" not in first:
        return "crash, no operands"
    values_only = re.search(r"differs at|is -?[\d.e+-]+, expected|is nan, expected|gave .* expected|should be|"
                            r"has shape \(", first)
    return "values only" if values_only and " is wrong: " not in first else "a fact, not the cause"


def main() -> int:
    from grading.grade import STAFF_ROOT, grade

    groups: list[list[Mutation]] = []
    for one in FRESH_BUGS:  # one per component per tree, as the mutants are graded
        group = next((g for g in groups if all(m.component != one.component for m in g)), None)
        if group is None:
            groups.append(group := [])
        group.append(one)
    scratch = Path(tempfile.mkdtemp(prefix="minbert-fresh-bugs-"))

    def run(numbered):
        number, group = numbered
        tree = mutant(STAFF_ROOT, group[0], scratch / f"batch-{number}")
        for one in group[1:]:
            one.apply(tree)
        return group, grade(tree, edition="full", components=sorted({m.component for m in group}))

    kinds: dict[str, list[str]] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        for group, results in pool.map(run, enumerate(groups)):
            for one in group:
                failed = [t["output"] for t in results["tests"] if t["tags"] == [one.component]
                          and t["status"] == "failed"]
                kind = classify(failed[0], one.message) if failed else "missed"
                kinds.setdefault(kind, []).append(one.name)
                shown = (failed[0].split("\n\n")[0].replace("\n", " | ")[:400] if failed else "(no test fails)")
                print(f"{kind:<20} {one.name:<36} {shown}")
    seen = sum(len(v) for k, v in kinds.items() if k != "missed")
    print(f"\n{len(FRESH_BUGS)} bugs, {seen} cost points")
    for kind, names in sorted(kinds.items()):
        share = f"{len(names) / seen:.0%}" if kind != "missed" else "-"
        print(f"  {kind:<20} {len(names):>3}  {share}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
