"""Scores the jobs report beyond the lesson's metrics (minbert/metrics.py): entity-level NER scoring.

    entities.py  conlleval-style entity precision / recall / F1 and a type confusion table

Read next: entities.py.
"""
