"""Text to model inputs: the WordPiece tokenizer and what it returns.

    tokenizer.py    BertTokenizer: WordPiece (on the `tokenizers` library), [CLS] A [SEP] B [SEP], callable
                    like transformers' tokenizers
    inputs.py       ModelInputs and BatchEncoding: the batch `model(**inputs)` takes
    truncation.py   which word pieces survive a window too short: head, tail, head+tail, a pair's budget

Read next: tokenizer.py.
"""
