"""Fast paths: each subclasses or wraps the lesson's modules and is tested equal to them: unpadded.py (a
padded batch's real tokens only), dropout.py (nn.Dropout with a cheaper random mask on the CPU).

Read next: unpadded.py.
"""
