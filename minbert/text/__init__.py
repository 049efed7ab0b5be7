"""Text to model inputs: the WordPiece tokenizer (tokenizer.py), the batches it returns (inputs.py), and
which pieces survive a window too short for them (truncation.py).

Read next: tokenizer.py.
"""
