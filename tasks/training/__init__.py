"""The machinery every job shares: one training loop and what hangs off it, one concept per file
(docs/architecture.md says what each is for).

Read next: loop.py.
"""
