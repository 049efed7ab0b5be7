"""Studies built from several job runs, and the scripts that print docs/results.md's tables from them.

`python -m experiments.study` runs the fine-tuning study of Sun et al. (2019): it chains pre-training
(pretrain.run) and classification (tasks.classify) runs, so it sits above both.

Read next: study.py.
"""
