"""Fast paths: each subclasses or wraps the lesson's modules and is tested equal to them.

    unpadded.py   UnpaddedBertModel: a padded batch's real tokens only, attention sequence by sequence
                  (UnpaddedSelfAttention overrides `attend`; training: sequences of one length batched,
                  one dropout draw, the same bits)
    dropout.py    nn.Dropout with a cheaper random mask on the CPU; use_fast_dropout(model) swaps it in

Read next: unpadded.py.
"""
