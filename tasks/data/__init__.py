"""Dataset readers: files to lists of small examples, with every bad row reported by file and line.

    examples.py       what every reader returns (examples, skipped rows, DataFileError)
    course.py         the CS224N course's CSV files (SST, CFIMDB, Quora, STS)
    sources.py        where the course files are found (or downloaded, or the demo sample)
    glue.py           GLUE small tasks and TREC
    classify_sets.py  the sets of tasks.classify: classes, metric, reader
    hierarchy.py      label hierarchies (HWV, 20 Newsgroups, Enron, TREC) and their readers
    conll.py          CoNLL files (WNUT-17)
    wordpieces.py     word <-> word-piece alignment for word-level labels
    batching.py       examples to length-bucketed, padded batches

Read next: examples.py.
"""
