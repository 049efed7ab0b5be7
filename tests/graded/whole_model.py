"""The whole-model check: the student's BertModel holding the real all-MiniLM-L6-v2, against stored outputs.

A plain module shared by tests/graded/test_graded_model.py and its hidden twin (tests/graded/conftest.py
puts this folder on sys.path). Unlike the other graded tests it uses no stand-in: the student's every
model TODO runs, as in CS224N's sanity_check.py, so a bug anywhere in the model costs points here as well
as in its own component. The stored outputs are transformers' (a staff script made them);
the message names the first output that differs (the embeddings, a layer, the pooler), which tells the
student where the bug is.

Tolerance: ATOL + RTOL |expected| at every real token (padding positions mean nothing). Our reference
model, with any attention kernel, lies within 2.1e-6 of transformers' on these sentences (float32
rounding: 50 times below), and the subtlest model bug the staff's mutation tests plant, the tanh GELU,
moves layer 1's output by 1.2e-3 (12 times above); the staff's teaching guide has the table.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import torch
from graded_helpers import fail
from safetensors import safe_open

from minbert.model import BertModel

ATOL, RTOL = 1e-4, 1e-4


def load_reference(path: Path) -> tuple[dict[str, torch.Tensor], list]:
    """The stored batch and outputs, and the sentences they encode."""
    with safe_open(str(path), "pt") as stored:
        tensors = {name: stored.get_tensor(name) for name in stored.keys()}
        sentences = json.loads(stored.metadata()["sentences"])
    return tensors, sentences


# Cached: the visible and the hidden tests share one load per process (0.6 s each); they only read the model.
@functools.lru_cache(maxsize=1)
def load_student_model(model_dir: Path) -> BertModel:
    """all-MiniLM-L6-v2 in the student's BertModel, with the eager attention (the kernel students write)."""
    return BertModel.from_pretrained(model_dir, attn_implementation="eager")


def check_against_reference(model: BertModel, path: Path, pooler: bool) -> None:
    """Every hidden state and last_hidden_state (and, with `pooler`, the pooler output) equal the stored
    ones, or fail naming the first that differs."""
    __tracebackhide__ = True
    expected, sentences = load_reference(path)
    mask = expected["attention_mask"]
    with torch.no_grad():
        out = model(expected["input_ids"], mask, expected["token_type_ids"], output_hidden_states=True)
    states = expected["hidden_states"]  # (L + 1, N, C) at the real tokens
    if out.hidden_states is None or len(out.hidden_states) != len(states):
        got = None if out.hidden_states is None else len(out.hidden_states)
        fail(f"BertModel(..., output_hidden_states=True) returned {got} hidden states; all-MiniLM-L6-v2 has "
             f"{len(states) - 1} layers, so expected {len(states)}: the embeddings, then each layer's output")
    real = mask.bool()  # (B, T)
    tokens = [(int(b), int(t)) for b, t in real.nonzero()]  # (sentence, token) of each of the N rows
    for i, hidden in enumerate(out.hidden_states):
        matched = "the embeddings matched" if i == 1 else f"the embeddings and layers 1 to {i - 1} matched"
        where = (f"layer {i}'s output (hidden_states[{i}]); {matched}" if i else
                 "the embeddings (hidden_states[0])")
        compare(at_tokens(hidden, real, f"hidden_states[{i}]"), states[i], tokens, where, sentences)
    compare(at_tokens(out.last_hidden_state, real, "last_hidden_state"), states[-1], tokens,
            "last_hidden_state, though every one of hidden_states matched (it should be the last of them)",
            sentences)
    if pooler:
        pooled = out.pooler_output
        if not isinstance(pooled, torch.Tensor) or pooled.shape != expected["pooler_output"].shape:
            fail(f"the pooler output should have shape (B, C) = {tuple(expected['pooler_output'].shape)}, "
                 f"got {tuple(pooled.shape) if isinstance(pooled, torch.Tensor) else pooled}")
        compare(pooled, expected["pooler_output"], [(b, 0) for b in range(len(sentences))],
                "the pooler output; every hidden state matched", sentences)


def at_tokens(hidden: torch.Tensor, real: torch.Tensor, what: str) -> torch.Tensor:
    """(B, T, C) -> (N, C), the real tokens, after checking the shape."""
    __tracebackhide__ = True
    if not isinstance(hidden, torch.Tensor) or hidden.dim() != 3 or hidden.shape[:2] != real.shape:
        fail(f"{what} should have shape (B, T, C) = {(*real.shape, 'C')}, got "
             f"{tuple(hidden.shape) if isinstance(hidden, torch.Tensor) else type(hidden).__name__}")
    return hidden[real]


def compare(actual: torch.Tensor, expected: torch.Tensor, tokens: list[tuple[int, int]], where: str,
            sentences: list) -> None:
    """actual (N, C) equals expected (N, C) within the tolerance, or fail saying where it differs most;
    tokens: the (sentence, token) of each row."""
    __tracebackhide__ = True
    if actual.shape != expected.shape:
        fail(f"{where}: shape {tuple(actual.shape)} at the real tokens, expected {tuple(expected.shape)}")
    actual, expected = actual.detach().double(), expected.double()
    difference = (actual - expected).abs().nan_to_num(float("inf"))
    excess = difference - ATOL - RTOL * expected.abs()
    if (excess <= 0).all():
        return
    row, feature = (int(i) for i in torch.unravel_index(excess.argmax(), excess.shape))
    sentence, token = tokens[row]
    text = " / ".join(s for s in sentences[sentence] if s is not None)
    how = ("It holds NaN" if torch.isnan(actual).any() else
           f"The largest difference there is {difference.max().item():.3g}")
    fail(f"the first output to differ from all-MiniLM-L6-v2's (computed by transformers) is {where}. "
         f"{how}; in sentence {sentence} ({text!r}; "
         f"counting from 0), token {token}, feature {feature} it is {actual[row, feature].item():.6g}, "
         f"expected {expected[row, feature].item():.6g} (tolerance {ATOL:g} + {RTOL:g} |expected|). The "
         "graded tests of each component check the parts one at a time and say which is wrong.")
