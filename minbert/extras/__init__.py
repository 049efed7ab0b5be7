"""Tools built on the model, each used by one job or notebook.

    analysis.py         what layers do: angular distance, attention entropy, head KL (tasks.hierarchical)

Read next: analysis.py.
"""
