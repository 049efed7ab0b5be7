"""Tools built on the model, each for one job or notebook: analysis.py, what layers do (tasks.hierarchical).

Read next: analysis.py.
"""
