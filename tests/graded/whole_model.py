"""The whole-model check: the student's BertModel holding the real all-MiniLM-L6-v2, against stored outputs.

A plain module shared by tests/graded/test_graded_model.py and its hidden twin (tests/graded/conftest.py
puts this folder on sys.path). Unlike the other graded tests it uses no stand-in: the student's every
model TODO runs, as in CS224N's sanity_check.py, so a bug anywhere in the model costs points here as well
as in its own component. The stored outputs are transformers' (a staff script made them); the message
names the first output that differs (the embeddings, a layer, the pooler), which tells the student where
the bug is, and the sentence and token where it differs most.

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
from graded_helpers import check_close, expectation, fail
from safetensors import safe_open

from minbert.model import BertModel

ATOL, RTOL = 1e-4, 1e-4


def load_reference(path: Path) -> tuple[dict[str, torch.Tensor], list]:
    """The stored batch (and, outside the grader's child, the outputs), and the sentences they encode."""
    with safe_open(str(path), "pt") as stored:
        tensors = {name: stored.get_tensor(name) for name in stored.keys()}
        sentences = json.loads(stored.metadata()["sentences"])
    return tensors, sentences


@expectation
def stored_output(path: Path, name: str) -> torch.Tensor:
    """One stored output: hidden_states (L + 1, N, C) at the real tokens, or pooler_output (B, C)."""
    return load_reference(path)[0][name]


# Cached: the visible and the hidden tests share one load per process (0.6 s each); they only read the model.
@functools.lru_cache(maxsize=1)
def load_student_model(model_dir: Path) -> BertModel:
    """all-MiniLM-L6-v2 in the student's BertModel, with the eager attention (the kernel students write)."""
    return BertModel.from_pretrained(model_dir, attn_implementation="eager")


def check_against_reference(model: BertModel, path: Path, pooler: bool) -> None:
    """Every hidden state and last_hidden_state (and, with `pooler`, the pooler output) equal the stored
    ones, or fail naming the first that differs."""
    __tracebackhide__ = True
    batch, sentences = load_reference(path)
    mask = batch["attention_mask"]
    with torch.no_grad():
        out = model(batch["input_ids"], mask, batch["token_type_ids"], output_hidden_states=True)
    layers = model.config.num_hidden_layers
    if out.hidden_states is None or len(out.hidden_states) != layers + 1:
        got = None if out.hidden_states is None else len(out.hidden_states)
        fail(f"BertModel(..., output_hidden_states=True) returned {got} hidden states; all-MiniLM-L6-v2 has "
             f"{layers} layers, so expected {layers + 1}: the embeddings, then each layer's output")
    real = mask.bool()  # (B, T)
    rows = [f"sentence {b} ({text(sentences[b])}), token {t}" for b, t in real.nonzero().tolist()]
    for i, hidden in enumerate(out.hidden_states):
        matched = "the embeddings matched" if i == 1 else f"the embeddings and layers 1 to {i - 1} matched"
        where = (f"layer {i}'s output (hidden_states[{i}]); {matched}" if i
                 else "the embeddings (hidden_states[0])")
        check_close(at_tokens(hidden, real, f"hidden_states[{i}]"), stored_output(path, "hidden_states")[i],
                    f"{FIRST} is {where}: it", rows=rows, atol=ATOL, rtol=RTOL)
    check_close(at_tokens(out.last_hidden_state, real, "last_hidden_state"),
                stored_output(path, "hidden_states")[-1], f"{FIRST} is last_hidden_state, though every one "
                "of hidden_states matched (it should be the last of them): it", rows=rows, atol=ATOL,
                rtol=RTOL)
    if pooler:
        pooled = out.pooler_output
        if not isinstance(pooled, torch.Tensor) or pooled.shape != (len(sentences), model.config.hidden_size):
            wanted = (len(sentences), model.config.hidden_size)
            fail(f"the pooler output should have shape (B, C) = {wanted}, got "
                 f"{tuple(pooled.shape) if isinstance(pooled, torch.Tensor) else pooled}")
        check_close(pooled, stored_output(path, "pooler_output"), f"{FIRST} is the pooler output; every "
                    "hidden state matched: it", rows=[f"sentence {b} ({text(s)})" for b, s in enumerate(
                        sentences)], atol=ATOL, rtol=RTOL)


FIRST = "the first output to differ from all-MiniLM-L6-v2's (computed by transformers)"


def text(sentence: list) -> str:
    return repr(" / ".join(s for s in sentence if s is not None))


def at_tokens(hidden: torch.Tensor, real: torch.Tensor, what: str) -> torch.Tensor:
    """(B, T, C) -> (N, C), the real tokens, after checking the shape."""
    __tracebackhide__ = True
    if not isinstance(hidden, torch.Tensor) or hidden.dim() != 3 or hidden.shape[:2] != real.shape:
        fail(f"{what} should have shape (B, T, C) = {(*real.shape, 'C')}, got "
             f"{tuple(hidden.shape) if isinstance(hidden, torch.Tensor) else type(hidden).__name__}")
    return hidden[real]
