"""Fine-tuning jobs on one BertModel, each run as `python -m tasks.<job>`.

The jobs sit at the top of this package; what they share sits in four subpackages below them:

    multitask.py     SST sentiment + Quora paraphrase + STS similarity (the main job)
    sentiment.py     one sentiment task (SST or CFIMDB)
    classify.py      small classification sets (GLUE, TREC, CFIMDB, 20 Newsgroups), label-embedding attention
    hierarchical.py  structured classifiers for label hierarchies
    tag.py           named entities: BIO, BIO + CRF, spans
    data/            dataset readers, examples, length-bucketed batches
    models/          task heads and task-specific models (pair heads, CRF, spans, structured classifiers)
    training/        the one training loop, its run directory and settings, job plumbing, torchrun
    evaluation/      metrics (accuracy, F1, Pearson, R-Precision) and entity-level scoring

Imports point down: jobs use the subpackages; models/ and training/ use data/ and evaluation/ where they
need to; nothing here imports pre-training (pretrain/ builds on training/, not the other way round).

Read next: multitask.py (the main job), then training/loop.py.
"""
