"""Variants and tools built on the model, each used by one job or notebook.

    label_attention.py  label-embedding attention (Wang et al. 2020), for tasks.classify
    analysis.py         what layers do: angular distance, attention entropy, head KL (tasks.hierarchical)

Read next: label_attention.py.
"""
