"""What `--lora R` does to a fine-tuning job: adapters on the encoder, and best/ as peft's adapter folder.

Every fine-tuning job (multitask, sentiment, classify, hierarchical, tag) takes the flags (settings.py's
JobSettings); pre-training (pretrain.run) does not, since it is no fine-tuning. With --lora, `JobRun.train`
calls `add_adapters` before the loop: minbert/lora.py's LoRALinear replaces each targeted nn.Linear of
`model.bert` (--lora-targets, the paper's query and value by default), every other encoder weight is
frozen, and the task heads train fully. The loop's optimizer takes the trainable parameters only, so AdamW
keeps its two moments for the adapters and the heads alone. A resume checkpoint holds the adapted model as
it trains; --resume rebuilds the same adapters first (and refuses another --lora, like any setting).

A LoRA run's best/ (`save_encoder`):

    best/adapter_config.json, adapter_model.safetensors   the adapters in peft's own format
                                                          (peft.PeftModel.from_pretrained on the base model),
                                                          the tokenizer's files and sentence-transformers'
                                                          (where the job pooled sentences): so
                                                          SentenceTransformer(best/) builds base + adapters
    best/merged/                                          the encoder with the adapters merged in: a plain
                                                          Hugging Face folder (transformers opens it, --model
                                                          takes it, and sentence-transformers' files where
                                                          the job pooled sentences)
    best/heads.safetensors, heads.json                    the heads, as for a full run

The loading path itself (minbert/loading/hub.py) reads best/ as best/merged/: the job's own outputs,
--predict, `--model RUN/best`, `BertModel.from_pretrained(RUN/best)` and `SentenceEncoder(RUN/best)` read the
merged weights, so they all give the same predictions.

Read next: loop.py (the loop the adapters train in).
"""

from __future__ import annotations

import sys
from pathlib import Path

from torch import nn

from minbert.loading.adapter_files import save_merged, write_adapter
from minbert.loading.hub import MERGED  # best/merged/: the encoder with its adapters folded in
from minbert.lora import ALL_LINEAR, apply_lora, target_names


def add_adapters(bert: nn.Module, r: int, alpha: float, dropout: float, targets: str) -> list[str]:
    """--lora R's adapters on `bert`, the rest of it frozen; says on stderr what trains. Returns the adapted
    layers' names. A --lora-targets that names no linear layer of the encoder, or a rank beyond what its
    layers can use (B A of an O x I layer has rank at most min(O, I): more only costs memory, and an absurd
    rank more than the machine holds), is a SystemExit naming the flag."""
    chosen = targets if targets == ALL_LINEAR else tuple(targets.split(","))
    before = sum(p.numel() for p in bert.parameters())
    try:
        layers = [bert.get_submodule(name) for name in target_names(bert, chosen)]
    except ValueError as error:
        raise SystemExit(f"error: --lora-targets {targets}: {error}") from None
    most = min(min(layer.in_features, layer.out_features) for layer in layers)
    if r > most:
        raise SystemExit(f"error: --lora {r}: the adapted layers' B A has rank at most {most} (the smallest "
                         f"side of their weights), so a larger rank adds nothing; give --lora {most} or less")
    names = apply_lora(bert, r, alpha, dropout, chosen)
    adapters = sum(p.numel() for p in bert.parameters() if p.requires_grad)
    print(f"LoRA: r={r}, alpha={alpha:g}, dropout={dropout:g} on {len(names)} layers ({targets}): "
          f"{adapters:,} adapter parameters train, the encoder's {before:,} stay frozen; the heads train "
          "fully", file=sys.stderr)
    return names


def save_encoder(bert: nn.Module, directory: Path, tokenizer) -> Path:
    """A LoRA run's encoder into best/: peft's adapter files and the tokenizer's, and the merged plain folder
    best/merged/ (with the tokenizer's files). Returns the merged folder (sentence-transformers' files go in
    both)."""
    write_adapter(bert, directory)  # best/ is being written whole (save_checkpoint)
    tokenizer.save(directory)
    return save_merged(bert, directory / MERGED, tokenizer=tokenizer)

