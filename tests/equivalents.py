"""Correct solutions written another way, as text patches on the reference: each must earn every point.

tests/mutations.py lists bugs that must cost points; this lists the other side, what a strong student
writes instead of the reference and is right: other kernels (einsum, baddbmm, matmul), the softmax or the
LayerNorm written out, F.dropout with the module's rate, indexing instead of nn.Embedding, the `_foreach_`
AdamW, eps folded into the step, a stable sort by another route, the 80/10/10 rule drawn another way. A
test that fails one of them asks for more than its docstring and hints state (docs/teaching.md, Writing a
graded test). tests/test_equivalents.py grades them, a few at once (at most one per component per tree).

Each patch names its component; the file is the component's (grading/config.py COMPONENTS), so the list
follows the lesson files wherever they move.
"""

from __future__ import annotations

from grading.config import COMPONENTS
from mutations import Mutation


def alternative(name: str, component: str, old: str, new: str, description: str) -> Mutation:
    """A correct alternative: a Mutation whose message is empty (it must cost nothing)."""
    return Mutation(name, component, COMPONENTS[component][0].split("::")[0], old, new, description, "")


_EMB_OLD = """        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)  # (B, T, C)
        embeddings = (inputs_embeds
                      + self.position_embeddings(position_ids)  # (T, C) broadcast to (B, T, C)
                      + self.token_type_embeddings(token_type_ids))
        embeddings = self.dropout(self.LayerNorm(embeddings))
"""
_ATTN_OLD = """    scores = attention_scores(query, key)  # (B, H, T, T)
    scores = scores + attention_mask
    probs = scores.softmax(dim=-1)  # each query's row sums to 1 over the keys
    context = (probs if dropout is None else dropout(probs)) @ value  # (B, H, T, D)
"""
_ADAMW_OLD = """    param.mul_(1 - lr * weight_decay)
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
_SCHEDULE_OLD = """    if step < num_warmup_steps:
        return float(step) / float(max(1, num_warmup_steps))
    return max(0.0, float(num_training_steps - step) / float(max(1, num_training_steps - num_warmup_steps)))
"""
_UNITS_OLD = """    units: list[list[int]] = []
    for position, token in enumerate(input_ids):
        if token in vocab.special_ids:
            continue
        continues_word = (whole_word and vocab.is_continuation[token] and units
                          and units[-1][-1] == position - 1)
        if continues_word:
            units[-1].append(position)
        else:
            units.append([position])
    return units
"""
_REPLACE_OLD = """    draw = rng.random()
    if draw < 0.8:
        return "mask"
    return "random" if draw < 0.9 else "keep"
"""
_MASK_OLD = """    rng.shuffle(units)
    chosen = 0
    for unit in units:
        if chosen == budget:
            break
        if chosen + len(unit) > budget:
            continue  # a word that does not fit whole is skipped, as in Google's whole-word masking
        chosen += len(unit)
        for position in unit:
            labels[position] = input_ids[position]
            masked[position] = corrupt(input_ids[position], choose_replacement(rng), vocab, rng)
        spans.append((unit[0], unit[-1]))
"""
_LABEL_OLD = """    cls_row = scores[:, :, :1, 1:]  # (B, H, 1, T-1)
    best = torch.cat([cls_row, label_scores[..., 1:]],
                     dim=2).max(dim=2, keepdim=True).values  # (B, H, 1, T-1)
    new_cls_row = torch.cat([scores[:, :, :1, :1], best], dim=-1)  # (B, H, 1, T)
    return torch.cat([new_cls_row, scores[:, :, 1:]], dim=2)
"""
_LORA_OLD = """        down = self.lora_dropout(x) @ self.lora_A.T  # (N, I) -> (N, r)
        return self.base_layer(x) + self.scaling * (down @ self.lora_B.T)  # (N, r) -> (N, O)
"""
_ENCODER_OLD = """        for layer in self.layer:
            hidden_states, probs = layer(hidden_states, attention_mask, output_attentions)
            if output_hidden_states:
                all_hidden.append(hidden_states)
            if output_attentions:
                all_attentions.append(probs)
"""

EQUIVALENTS: tuple[Mutation, ...] = (
    # ----- embeddings
    alternative("embeddings-index-the-weight", "embeddings", "inputs_embeds = self.word_embeddings(input_ids)",
                "inputs_embeds = self.word_embeddings.weight[input_ids]",
                "the word vectors read by indexing the table's weight (no padding_idx gradient rule)"),
    alternative("embeddings-f-embedding", "embeddings", _EMB_OLD, """        import torch.nn.functional as F

        if inputs_embeds is None:
            inputs_embeds = F.embedding(input_ids, self.word_embeddings.weight)
        positions = F.embedding(position_ids, self.position_embeddings.weight)
        segments = F.embedding(token_type_ids, self.token_type_embeddings.weight)
        embeddings = self.dropout(self.LayerNorm(segments + positions + inputs_embeds))
""", "F.embedding for the three lookups, summed in another order"),
    alternative("embeddings-f-dropout-and-layer-norm", "embeddings",
                "        embeddings = self.dropout(self.LayerNorm(embeddings))\n", """        import torch.nn.functional as F

        ln = self.LayerNorm
        embeddings = F.layer_norm(embeddings, ln.normalized_shape, ln.weight, ln.bias, ln.eps)
        embeddings = F.dropout(embeddings, self.dropout.p, self.training)
""", "F.layer_norm with the module's parameters and eps, F.dropout with the module's rate"),
    alternative("embeddings-positions-by-index", "embeddings",
                "+ self.position_embeddings(position_ids)  # (T, C) broadcast to (B, T, C)",
                "+ self.position_embeddings.weight[position_ids]  # (T, C) broadcast to (B, T, C)",
                "the position vectors read by indexing the table"),
    # ----- attention_mask
    alternative("mask-where", "attention_mask",
                "    keep = attention_mask[:, None, None, :].to(dtype)  # (B, 1, 1, T)\n"
                "    return (1.0 - keep) * torch.finfo(dtype).min\n",
                "    low = torch.tensor(torch.finfo(dtype).min, dtype=dtype)\n"
                "    return torch.where(attention_mask.bool(), torch.zeros((), dtype=dtype), low)[:, None, None, :]\n",
                "torch.where between 0 and the dtype's minimum"),
    alternative("mask-masked-fill-unsqueeze", "attention_mask",
                "    keep = attention_mask[:, None, None, :].to(dtype)  # (B, 1, 1, T)\n"
                "    return (1.0 - keep) * torch.finfo(dtype).min\n",
                "    padding = (attention_mask == 0).unsqueeze(1).unsqueeze(2)\n"
                "    return torch.zeros(padding.shape, dtype=dtype).masked_fill(padding, torch.finfo(dtype).min)\n",
                "masked_fill of zeros, axes added with unsqueeze"),
    # ----- attention
    alternative("scores-einsum", "attention", "return query @ key.transpose(-1, -2) / math.sqrt(query.size(-1))",
                'return torch.einsum("bhqd,bhkd->bhqk", query, key) / query.size(-1) ** 0.5',
                "the scores with einsum"),
    alternative("scores-prescaled-matmul", "attention",
                "return query @ key.transpose(-1, -2) / math.sqrt(query.size(-1))",
                "return torch.matmul(query * query.size(-1) ** -0.5, key.mT)",
                "the query scaled first, then torch.matmul with .mT"),
    alternative("attention-baddbmm", "attention", _ATTN_OLD, """    B, H, T, D = query.shape
    bias = attention_mask.expand(B, H, T, key.size(-2)).reshape(B * H, T, key.size(-2))
    scores = torch.baddbmm(bias, query.reshape(B * H, T, D), key.reshape(B * H, -1, D).transpose(1, 2),
                           alpha=D ** -0.5)
    probs = torch.softmax(scores, dim=-1).view(B, H, T, -1)
    if dropout is not None:
        context = torch.matmul(F.dropout(probs, dropout.p, dropout.training), value)
    else:
        context = torch.matmul(probs, value)
""", "scores and mask in one baddbmm, F.dropout with the module's rate"),
    alternative("attention-softmax-written-out", "attention", _ATTN_OLD, """    scores = attention_scores(query, key) + attention_mask  # (B, H, T, T)
    weights = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    probs = weights / weights.sum(dim=-1, keepdim=True)
    context = torch.einsum("bhqk,bhkd->bhqd", probs if dropout is None else dropout(probs), value)
""", "the softmax written out (max subtracted), the context with einsum"),
    alternative("attention-masked-fill-from-additive", "attention", "    scores = scores + attention_mask\n",
                "    scores = scores.add(attention_mask)\n", "the mask added with Tensor.add"),
    # ----- split_heads
    alternative("split-reshape-permute", "split_heads",
                "return x.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)",
                "return x.reshape(B, T, self.num_heads, -1).permute(0, 2, 1, 3)",
                "reshape and permute"),
    alternative("split-unflatten", "split_heads",
                "return x.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)",
                "return x.unflatten(-1, (self.num_heads, self.head_dim)).movedim(2, 1)",
                "unflatten and movedim"),
    alternative("merge-contiguous-view", "split_heads",
                "return x.transpose(1, 2).reshape(B, T, self.num_heads * self.head_dim)  # (B, H, T, D) -> (B, T, C)",
                "return x.permute(0, 2, 1, 3).contiguous().view(B, T, -1)", "permute, contiguous, view"),
    alternative("merge-flatten", "split_heads",
                "return x.transpose(1, 2).reshape(B, T, self.num_heads * self.head_dim)  # (B, H, T, D) -> (B, T, C)",
                "return x.transpose(1, 2).flatten(2)", "transpose and flatten"),
    # ----- feed_forward
    alternative("gelu-default", "feed_forward", 'return F.gelu(self.dense(hidden_states), approximate="none")',
                "return F.gelu(self.dense(hidden_states))", "F.gelu's default, the exact form"),
    alternative("gelu-written-out", "feed_forward", 'return F.gelu(self.dense(hidden_states), approximate="none")',
                "x = self.dense(hidden_states)\n        return x * 0.5 * (1.0 + torch.erf(x / 2.0 ** 0.5))",
                "x Phi(x) with torch.erf, written out"),
    alternative("gelu-module-linear", "feed_forward", 'return F.gelu(self.dense(hidden_states), approximate="none")',
                "return nn.GELU()(F.linear(hidden_states, self.dense.weight, self.dense.bias))",
                "nn.GELU of F.linear with the layer's weights"),
    # ----- layer
    alternative("add-norm-written-out", "layer",
                "return self.LayerNorm(residual + self.dropout(self.dense(hidden_states)))", """x = residual + self.dropout(self.dense(hidden_states))
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        return (x - mean) / torch.sqrt(var + self.LayerNorm.eps) * self.LayerNorm.weight + self.LayerNorm.bias""",
                "LayerNorm written out with the module's eps and the biased variance"),
    alternative("add-norm-functional", "layer",
                "return self.LayerNorm(residual + self.dropout(self.dense(hidden_states)))",
                "ln = self.LayerNorm\n        projected = F.dropout(F.linear(hidden_states, self.dense.weight, "
                "self.dense.bias), self.dropout.p, self.training)\n"
                "        return F.layer_norm(projected + residual, ln.normalized_shape, ln.weight, ln.bias, eps=ln.eps)",
                "F.linear, F.dropout with the module's rate, F.layer_norm with its eps"),
    alternative("layer-keywords", "layer", """        context, probs = self.attention.self(hidden_states, attention_mask, output_attentions)
        attention_output = self.attention.output(context, hidden_states)
        layer_output = self.output(self.intermediate(attention_output), attention_output)
""", """        attended = self.attention.self(hidden_states, attention_mask, output_attentions=output_attentions)
        context, probs = attended.context, attended.probs
        attention_output = self.attention.output(context, residual=hidden_states)
        expanded = self.intermediate(attention_output)
        layer_output = self.output(expanded, residual=attention_output)
""", "the sub-layers called with keywords, the outputs read by name"),
    # ----- encoder
    alternative("encoder-collect-after", "encoder", _ENCODER_OLD, """        for number, layer in enumerate(self.layer):
            out = layer(hidden_states, attention_mask, output_attentions=output_attentions)
            hidden_states = out.hidden_states
            if output_hidden_states:
                all_hidden += [hidden_states]
            if output_attentions:
                all_attentions += [out.attention_probs]
""", "enumerate, the layer's output read by name, lists extended with +="),
    # ----- pooler
    alternative("pooler-functional", "pooler", "return torch.tanh(self.dense(hidden_states[:, 0]))",
                "import torch.nn.functional as F\n\n"
                "        return F.linear(hidden_states.select(1, 0), self.dense.weight, self.dense.bias).tanh()",
                "select, F.linear, Tensor.tanh"),
    alternative("pooler-narrow", "pooler", "return torch.tanh(self.dense(hidden_states[:, 0]))",
                "return torch.tanh(self.dense(hidden_states.narrow(1, 0, 1))).squeeze(1)",
                "narrow to the first token, then squeeze its axis"),
    # ----- pretraining_heads
    alternative("lm-head-matmul", "pretraining_heads",
                "return F.linear(self.transform(hidden_states), word_embeddings, self.bias)",
                "return self.transform(hidden_states) @ word_embeddings.T + self.bias", "matmul with E^T"),
    alternative("lm-head-einsum", "pretraining_heads",
                "return F.linear(self.transform(hidden_states), word_embeddings, self.bias)",
                'return torch.einsum("btc,vc->btv", self.transform(hidden_states), word_embeddings) + self.bias',
                "einsum"),
    alternative("mlm-loss-ignore-index", "pretraining_heads", """    predicted = labels != IGNORE_INDEX  # (B, T) or (N,)
    if not predicted.any():  # nothing to predict: 0, not the NaN of an empty mean
        return prediction_logits.sum() * 0.0
    return F.cross_entropy(prediction_logits[predicted], labels[predicted])  # over (N, V) and (N,)
""", """    flat_logits = prediction_logits.reshape(-1, prediction_logits.size(-1))
    flat_labels = labels.reshape(-1)
    if (flat_labels == IGNORE_INDEX).all():
        return (flat_logits * 0).sum()
    return F.cross_entropy(flat_logits, flat_labels, ignore_index=IGNORE_INDEX)
""", "cross_entropy's own ignore_index over the flattened batch"),
    alternative("mlm-loss-log-softmax", "pretraining_heads", """    predicted = labels != IGNORE_INDEX  # (B, T) or (N,)
    if not predicted.any():  # nothing to predict: 0, not the NaN of an empty mean
        return prediction_logits.sum() * 0.0
    return F.cross_entropy(prediction_logits[predicted], labels[predicted])  # over (N, V) and (N,)
""", """    keep = (labels != IGNORE_INDEX).reshape(-1)
    log_probs = prediction_logits.reshape(-1, prediction_logits.size(-1)).log_softmax(dim=-1)
    picked = log_probs[keep].gather(1, labels.reshape(-1)[keep].unsqueeze(1)).squeeze(1)
    return -picked.sum() / keep.sum().clamp(min=1)
""", "log_softmax and gather, divided by the count (at least 1)"),
    alternative("nsp-reshape", "pretraining_heads", "next_sentence_label.view(-1))",
                "next_sentence_label.reshape(-1).long())", "labels flattened with reshape"),
    alternative("nsp-nll", "pretraining_heads",
                "return F.cross_entropy(seq_relationship_logits, next_sentence_label.view(-1))",
                "return F.nll_loss(F.log_softmax(seq_relationship_logits, dim=-1), next_sentence_label.flatten())",
                "nll_loss of log_softmax"),
    # ----- adamw
    alternative("adamw-foreach", "adamw", _ADAMW_OLD, """    params, grads, m, v = [param], [grad], [exp_avg], [exp_avg_sq]
    torch._foreach_mul_(params, 1 - lr * weight_decay)
    torch._foreach_lerp_(m, grads, 1 - beta1)
    torch._foreach_mul_(v, beta2)
    torch._foreach_addcmul_(v, grads, grads, 1 - beta2)
    if max_exp_avg_sq is not None:
        torch._foreach_maximum_([max_exp_avg_sq], v)
        v = [max_exp_avg_sq]
    bias_correction1 = 1 - beta1**step
    bias_correction2 = 1 - beta2**step
    denom = torch._foreach_div(torch._foreach_sqrt(v), bias_correction2**0.5)
    torch._foreach_add_(denom, eps)
    torch._foreach_addcdiv_(params, m, denom, -lr / bias_correction1)
""", "torch._foreach_ operations on one-element lists"),
    alternative("adamw-eps-folded", "adamw", """    step_size = lr / bias_correction1
    # `** 0.5` rather than math.sqrt: torch writes it so, and we want its results bit for bit.
    denom = (exp_avg_sq.sqrt() / bias_correction2**0.5).add_(eps)
    param.addcdiv_(exp_avg, denom, value=-step_size)
""", """    # eps folded into the step: lr sqrt(c2) / c1 * m / (sqrt(v) + eps sqrt(c2))
    step_size = lr * bias_correction2**0.5 / bias_correction1
    param.addcdiv_(exp_avg, exp_avg_sq.sqrt().add(eps * bias_correction2**0.5), value=-step_size)
""", "eps folded into the step (the same real numbers)"),
    alternative("adamw-operators", "adamw", _ADAMW_OLD, """    param.sub_(lr * weight_decay * param)
    exp_avg.mul_(beta1).add_((1 - beta1) * grad)
    exp_avg_sq.copy_(beta2 * exp_avg_sq + (1 - beta2) * grad * grad)
    v = exp_avg_sq
    if max_exp_avg_sq is not None:
        max_exp_avg_sq.copy_(torch.maximum(max_exp_avg_sq, exp_avg_sq))
        v = max_exp_avg_sq
    m_hat = exp_avg / (1 - beta1**step)
    v_hat = v / (1 - beta2**step)
    param.sub_(lr * m_hat / (v_hat.sqrt() + eps))
""", "plain operators and copy_, the decay as a subtraction, m_hat and v_hat named"),
    # ----- schedule
    alternative("schedule-one-expression", "schedule", _SCHEDULE_OLD, """    W, N = num_warmup_steps, num_training_steps
    return step / max(1, W) if step < W else max(0.0, (N - step) / max(1, N - W))
""", "one conditional expression"),
    alternative("schedule-min-max", "schedule", _SCHEDULE_OLD, """    warmup = step / num_warmup_steps if num_warmup_steps else 1.0
    decay = (num_training_steps - step) / max(num_training_steps - num_warmup_steps, 1)
    return float(min(warmup, max(decay, 0.0))) if step < num_warmup_steps else float(max(decay, 0.0))
""", "the warm-up and the decay computed apart"),
    # ----- no_decay
    alternative("no-decay-set", "no_decay", """    *modules, own = name.split(".")
    return own not in _NO_DECAY_NAMES and not any(module in _NO_DECAY_MODULES for module in modules)
""", """    parts = name.split(".")
    return parts[-1] not in set(_NO_DECAY_NAMES) and not set(parts[:-1]) & set(_NO_DECAY_MODULES)
""", "sets of the name's parts"),
    alternative("no-decay-rpartition", "no_decay", """    *modules, own = name.split(".")
    return own not in _NO_DECAY_NAMES and not any(module in _NO_DECAY_MODULES for module in modules)
""", """    path, _, own = name.rpartition(".")
    if own in _NO_DECAY_NAMES:
        return False
    return all(module not in _NO_DECAY_MODULES for module in path.split(".") if module)
""", "rpartition, then a loop over the modules"),
    # ----- mean_pool
    alternative("mean-pool-masked-fill", "mean_pool", """    mask = attention_mask.unsqueeze(-1).to(hidden_states.dtype)  # (B, T, 1)
    return (hidden_states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
""", """    padding = attention_mask.unsqueeze(-1) == 0
    total = hidden_states.masked_fill(padding, 0.0).sum(dim=1)
    return total / (~padding).sum(dim=1).clamp_min(1).to(hidden_states.dtype)
""", "masked_fill, then the count of real tokens"),
    alternative("mean-pool-einsum", "mean_pool", """    mask = attention_mask.unsqueeze(-1).to(hidden_states.dtype)  # (B, T, 1)
    return (hidden_states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
""", """    mask = attention_mask.to(hidden_states.dtype)
    return torch.einsum("btc,bt->bc", hidden_states, mask) / mask.sum(-1, keepdim=True).clamp(min=1.0)
""", "einsum over the tokens"),
    # ----- max_cls_pool
    alternative("max-pool-where", "max_cls_pool", """    padding = (attention_mask == 0).unsqueeze(-1)  # (B, T, 1)
    return hidden_states.masked_fill(padding, torch.finfo(hidden_states.dtype).min).amax(dim=1)
""", """    low = torch.full_like(hidden_states, torch.finfo(hidden_states.dtype).min)
    return torch.where(attention_mask.bool()[..., None], hidden_states, low).max(dim=1).values
""", "torch.where against the dtype's minimum, .max(dim).values"),
    alternative("cls-select", "max_cls_pool", "return output.last_hidden_state[:, 0]",
                "return output.last_hidden_state.select(1, 0)", "select the first token"),
    # ----- classifier
    alternative("classifier-f-dropout", "classifier",
                "return self.classifier(self.dropout(self.sentence_vector(output, attention_mask)))",
                "pooled = self.sentence_vector(output, attention_mask)\n"
                "        return self.classifier(F.dropout(pooled, p=self.dropout.p, training=self.training))",
                "F.dropout with the module's rate"),
    alternative("classifier-f-linear", "classifier",
                "return self.classifier(self.dropout(self.sentence_vector(output, attention_mask)))",
                "s = self.dropout(self.sentence_vector(output, attention_mask))\n"
                "        return F.linear(s, self.classifier.weight, self.classifier.bias)",
                "F.linear with the layer's weights"),
    alternative("classification-loss-nll", "classifier", "return F.cross_entropy(logits, labels)",
                "return F.nll_loss(logits.log_softmax(dim=-1), labels)", "nll_loss of log_softmax"),
    alternative("classification-loss-module", "classifier", "return F.cross_entropy(logits, labels)",
                "return nn.CrossEntropyLoss()(logits, labels)", "nn.CrossEntropyLoss"),
    # ----- cosine
    alternative("cosine-normalise-each", "cosine",
                "return (u * v).sum(dim=-1) / (u.norm(dim=-1) * v.norm(dim=-1)).clamp(min=eps)",
                "return (F.normalize(u, dim=-1, eps=eps) * F.normalize(v, dim=-1, eps=eps)).sum(dim=-1)",
                "each vector normalised first"),
    alternative("cosine-torch", "cosine",
                "return (u * v).sum(dim=-1) / (u.norm(dim=-1) * v.norm(dim=-1)).clamp(min=eps)",
                "return F.cosine_similarity(u, v, dim=-1, eps=eps)", "torch's own cosine with eps"),
    alternative("cosine-vecdot", "cosine",
                "return (u * v).sum(dim=-1) / (u.norm(dim=-1) * v.norm(dim=-1)).clamp(min=eps)",
                "lengths = torch.linalg.vector_norm(u, dim=-1) * torch.linalg.vector_norm(v, dim=-1)\n"
                "    return torch.linalg.vecdot(u, v) / torch.clamp_min(lengths, eps)",
                "vecdot over vector_norm, clamp_min"),
    # ----- mlm_masking
    alternative("units-two-passes", "mlm_masking", _UNITS_OLD, """    units = []
    previous = None
    for position, token in enumerate(input_ids):
        if token in vocab.special_ids:
            previous = None
        elif whole_word and vocab.is_continuation[token] and previous == position - 1:
            units[-1] = units[-1] + [position]
            previous = position
        else:
            units.append([position])
            previous = position
    return units
""", "the previous position tracked, special tokens resetting it"),
    alternative("replacement-choices", "mlm_masking", _REPLACE_OLD, """    return rng.choices(["mask", "random", "keep"], weights=[0.8, 0.1, 0.1])[0]
""", "rng.choices with the weights"),
    alternative("replacement-googles-order", "mlm_masking", _REPLACE_OLD, """    if rng.random() < 0.8:
        return "mask"
    return "keep" if rng.random() < 0.5 else "random"
""", "Google's create_pretraining_data.py: 80% [MASK], then half kept, half random"),
    alternative("replacement-other-intervals", "mlm_masking", _REPLACE_OLD, """    draw = rng.random()
    if draw < 0.1:
        return "keep"
    if draw < 0.2:
        return "random"
    return "mask"
""", "the intervals in another order"),
    alternative("mask-tokens-sample", "mlm_masking", _MASK_OLD, """    chosen = 0
    for unit in rng.sample(units, len(units)):
        if chosen + len(unit) > budget:
            continue
        chosen += len(unit)
        for position in unit:
            labels[position] = input_ids[position]
            replacement = choose_replacement(rng)
            masked[position] = corrupt(input_ids[position], replacement, vocab, rng)
        spans.append((min(unit), max(unit)))
""", "rng.sample for the random order, no early break"),
    alternative("span-mask-other-order", "mlm_masking", """        replacement = choose_replacement(rng)
        for position in span:
            taken[position] = True
            labels[position] = input_ids[position]
            masked[position] = corrupt(input_ids[position], replacement, vocab, rng)
        spans.append((span[0], span[-1]))
        chosen += len(span)
""", """        replacement = choose_replacement(rng)
        chosen += len(span)
        spans.append((min(span), max(span)))
        for position in span:
            labels[position], taken[position] = input_ids[position], True
            masked[position] = corrupt(input_ids[position], replacement, vocab, rng)
""", "the budget and the span recorded first"),
    # ----- label_attention
    alternative("label-scores-maximum", "label_attention", _LABEL_OLD, """    best = torch.maximum(scores[:, :, 0, 1:], label_scores[..., 1:].amax(dim=2))  # (B, H, T-1)
    merged = scores.clone()
    merged[:, :, 0, 1:] = best
    return merged
""", "torch.maximum against amax, written into a copy"),
    alternative("label-scores-where", "label_attention", _LABEL_OLD, """    row = scores[:, :, 0, :]
    labels_best = label_scores.max(dim=2).values
    keys = torch.arange(scores.size(-1), device=scores.device) > 0
    new_row = torch.where(keys & (labels_best > row), labels_best, row)
    return torch.cat([new_row.unsqueeze(2), scores[:, :, 1:]], dim=2)
""", "torch.where on the whole row, key 0 left by a mask"),
    # ----- r_precision
    alternative("top-labels-lexsort", "r_precision",
                'return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[:r]',
                "s = np.asarray(scores, dtype=np.float64)\n    return np.lexsort((np.arange(len(s)), -s))[:r]",
                "np.lexsort by (-score, label)"),
    alternative("top-labels-sorted", "r_precision",
                'return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[:r]',
                "s = [float(x) for x in np.asarray(scores).reshape(-1)]\n"
                "    return sorted(range(len(s)), key=lambda i: (-s[i], i))[:r]",
                "Python's sorted with a (-score, label) key"),
    alternative("r-precision-sets", "r_precision",
                "return float(np.sum(g[top_labels(s, r)] > 0) / r)",
                "gold = set(np.flatnonzero(g > 0).tolist())\n"
                "    return len(gold & {int(i) for i in top_labels(s, r)}) / r",
                "a set intersection"),
    # ----- lora
    alternative("lora-f-linear", "lora", _LORA_OLD, """        from torch.nn.functional import linear

        update = linear(linear(self.lora_dropout(x), self.lora_A), self.lora_B)
        return self.base_layer(x) + update * self.scaling
""", "two F.linear"),
    alternative("lora-einsum", "lora", _LORA_OLD, """        down = torch.einsum("...i,ri->...r", self.lora_dropout(x), self.lora_A)
        return self.base_layer(x) + self.scaling * torch.einsum("...r,or->...o", down, self.lora_B)
""", "einsum over the leading axes"),
)
