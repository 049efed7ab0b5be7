"""Scores the jobs report: sentence-level metrics and entity-level NER scoring.

    metrics.py   accuracy, F1, Matthews, Pearson, Spearman, R-Precision
    entities.py  conlleval-style entity precision / recall / F1 and a type confusion table

Read next: metrics.py.
"""
