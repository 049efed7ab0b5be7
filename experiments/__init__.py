"""Studies built from several job runs, and docs/results.md's tables printed from them
(`python -m experiments.tables`).

`python -m experiments.study` runs the fine-tuning study of Sun et al. (2019): it chains pre-training
(pretrain.run) and classification (tasks.classify) runs, so it sits above both.

Read next: study.py.
"""
