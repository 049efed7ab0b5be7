"""Make the small stored tensors that visible graded tests compare with (staff only; not in the handout).

    .venv/bin/python tests/graded/hidden/make_references.py

Run it from the staff repository, whose solution regions are filled in: it runs the reference code on fixed
inputs (seed 0, the tiny config), checks each output against the definition written out here, and writes
tests/graded/reference/<component>_<what>.safetensors. Rerun it only when a test's inputs or the tiny config
change; the files are a few kilobytes. The visible tests read outputs from these files instead of computing
them, so the handout ships no code that computes a TODO's answer.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from minbert.config import BertConfig
from minbert.embeddings import BertEmbeddings
from minbert.heads import BertLMPredictionHead
from minbert.label_attention import merge_label_scores
from minbert.layer import AddNorm, BertIntermediate
from minbert.model import BertPooler

REFERENCE = Path(__file__).resolve().parents[1] / "reference"
CONFIG = BertConfig.tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # conftest's `config`


def randomized(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Non-trivial weights everywhere, LayerNorm scales around 1 (graded_helpers.randomize); its state."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(torch.randn_like(p) * 0.5 + (1.0 if name.endswith("LayerNorm.weight") else 0.0))
    return {name: t.detach().clone() for name, t in module.state_dict().items()}


def embeddings() -> dict[str, torch.Tensor]:
    """BertEmbeddings: weights; ids with two segments, and the same ids with segment 0 only; outputs."""
    emb = BertEmbeddings(CONFIG).eval()
    tensors = randomized(emb)
    ids = torch.randint(1, CONFIG.vocab_size, (2, 9))
    segments = torch.tensor([[0] * 5 + [1] * 4, [0] * 3 + [1] * 6])
    with torch.no_grad():
        tensors.update(ids=ids, segments=segments, output=emb(ids, segments), output_segment_0=emb(ids))
        ln = emb.LayerNorm  # the definition (BERT §3, Figure 2), dropout off, as an independent check
        for segs, out in ((segments, tensors["output"]),
                          (torch.zeros_like(ids), tensors["output_segment_0"])):
            total = (emb.word_embeddings.weight[ids] + emb.position_embeddings.weight[:9]
                     + emb.token_type_embeddings.weight[segs])
            definition = F.layer_norm(total, ln.normalized_shape, ln.weight, ln.bias, ln.eps)
            torch.testing.assert_close(out, definition, atol=1e-6, rtol=1e-6)
    return tensors


def lm_head() -> dict[str, torch.Tensor]:
    """BertLMPredictionHead: weights, hidden states, a decoder matrix, the logits, and the logits of the
    common mistake that skips the transform."""
    head = BertLMPredictionHead(CONFIG).eval()
    tensors = randomized(head)
    hidden = torch.randn(2, 5, CONFIG.hidden_size)
    embedding = torch.randn(CONFIG.vocab_size, CONFIG.hidden_size)
    with torch.no_grad():
        logits = head(hidden, embedding)
        torch.testing.assert_close(logits, head.transform(hidden) @ embedding.T + head.bias, atol=1e-5,
                                   rtol=1e-5)
        skipped = hidden @ embedding.T + head.bias
    tensors.update(hidden=hidden, word_embeddings=embedding, logits=logits, logits_without_transform=skipped)
    return tensors


def layer_add_norm() -> dict[str, torch.Tensor]:
    """AddNorm of both sizes (hidden 32 and intermediate 37 -> 32): weights, input, residual, output."""
    config, tensors = CONFIG, {}
    for size, in_features in (("hidden", config.hidden_size), ("intermediate", config.intermediate_size)):
        layer = AddNorm(in_features, config).eval()
        tensors.update({f"{size}.{name}": t for name, t in randomized(layer).items()})
        hidden, residual = torch.randn(2, 5, in_features), torch.randn(2, 5, config.hidden_size)
        with torch.no_grad():
            output = layer(hidden, residual)
        ln = layer.LayerNorm  # the definition, LayerNorm(x + W h + b) (dropout off), as an independent check
        definition = F.layer_norm(residual + F.linear(hidden, layer.dense.weight, layer.dense.bias),
                                  ln.normalized_shape, ln.weight, ln.bias, ln.eps)
        torch.testing.assert_close(output, definition, atol=1e-6, rtol=1e-6)
        tensors.update({f"{size}.hidden": hidden, f"{size}.residual": residual, f"{size}.output": output})
    return tensors


def feed_forward() -> dict[str, torch.Tensor]:
    """BertIntermediate: weights (std 1, so GELU's curve shows), hidden states, the output, and what the
    tanh GELU, ReLU and no activation give."""
    ffn = BertIntermediate(CONFIG).eval()
    with torch.no_grad():
        for p in ffn.parameters():
            p.normal_()
        hidden = torch.randn(3, 7, CONFIG.hidden_size)
        output, projected = ffn(hidden), F.linear(hidden, ffn.dense.weight, ffn.dense.bias)
        torch.testing.assert_close(output, F.gelu(projected), atol=0, rtol=0)  # x Phi(x), erf
    return {**{name: t.clone() for name, t in ffn.state_dict().items()}, "hidden": hidden, "output": output,
            "tanh_gelu": F.gelu(projected, approximate="tanh"), "relu": F.relu(projected),
            "no_activation": projected}


def pooler() -> dict[str, torch.Tensor]:
    """BertPooler: weights, hidden states, the output, and what four common mistakes give."""
    module = BertPooler(CONFIG).eval()
    tensors = randomized(module)
    hidden = torch.randn(3, 7, CONFIG.hidden_size)
    with torch.no_grad():
        def dense(x):
            return F.linear(x, module.dense.weight, module.dense.bias)

        output = module(hidden)
        torch.testing.assert_close(output, torch.tanh(dense(hidden[:, 0])))  # tanh(W h_[CLS] + b)
        tensors.update(hidden=hidden, output=output, mean_of_tokens=torch.tanh(dense(hidden.mean(dim=1))),
                       last_token=torch.tanh(dense(hidden[:, -1])), no_tanh=dense(hidden[:, 0]),
                       gelu=F.gelu(dense(hidden[:, 0])))
    return tensors


def label_attention() -> dict[str, torch.Tensor]:
    """merge_label_scores of random scores (2, 3, 6, 6) and label scores (2, 3, 4, 6), and the sum."""
    scores, labels = torch.randn(2, 3, 6, 6), torch.randn(2, 3, 4, 6)
    merged = merge_label_scores(scores, labels)
    best = torch.maximum(scores[:, :, 0, 1:], labels[..., 1:].max(dim=2).values)  # eq. 7-8
    torch.testing.assert_close(merged[:, :, 0, 1:], best, atol=0, rtol=0)
    summed = scores.clone()
    summed[:, :, 0, 1:] += labels[..., 1:].sum(dim=2)
    return dict(scores=scores, label_scores=labels, merged=merged, summed=summed)


MAKERS = {"embeddings": embeddings, "feed_forward": feed_forward, "layer_add_norm": layer_add_norm,
          "pooler": pooler,
          "pretraining_heads_lm_head": lm_head, "label_attention": label_attention}
# The stored outputs and mistakes' results; every other key is an input, named in the file's metadata, and
# only inputs reach the grader's child (grading/strip.py).
EXPECTED = {"embeddings": ("output", "output_segment_0"),
            "feed_forward": ("output", "tanh_gelu", "relu", "no_activation"),
            "layer_add_norm": ("hidden.output", "intermediate.output"),
            "pooler": ("output", "mean_of_tokens", "last_token", "no_tanh", "gelu"),
            "pretraining_heads_lm_head": ("logits", "logits_without_transform"),
            "label_attention": ("merged", "summed")}


def main() -> None:
    REFERENCE.mkdir(exist_ok=True)
    for name, make in MAKERS.items():
        torch.manual_seed(0)
        path = REFERENCE / f"{name}.safetensors"
        tensors = make()
        inputs = ",".join(sorted(key for key in tensors if key not in EXPECTED[name]))
        save_file(tensors, str(path), metadata={"inputs": inputs})
        print(f"wrote {path.relative_to(REFERENCE.parents[2])} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
