"""Studies built from several job runs, and the scripts that print docs/results.md's tables from them.

`python -m experiments.study` runs the fine-tuning study of Sun et al. (2019): it chains pre-training
(pretrain.run) and classification (tasks.classify) runs, so it sits above both.

Levers measured on the main job's step and not kept (docs/results.md, "The jobs' own step"), each tested equal
to the readable path and measured again by `python -m bench.levers`: fused_qkv.py (queries, keys and values
from one product under bf16) and embedding_grad.py (the word embeddings' gradient rewritten row by row).

Read next: study.py.
"""
