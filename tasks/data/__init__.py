"""Dataset readers: files to lists of small examples, with every bad row reported by file and line
(docs/architecture.md lists the files).

Read next: examples.py.
"""
