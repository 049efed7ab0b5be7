"""Loading and saving: a folder on disk to a minbert model and back (docs/architecture.md lists the files).
The lesson files import only pretrained.py of these (and reach forward_contract.py through it).

Read next: pretrained.py.
"""
