"""Dataset readers: files to lists of small examples, with every bad row reported by file and line.

    examples.py       what every reader returns (examples, skipped rows, DataFileError)
    numbers.py        how a label's text becomes a number, strictly (ASCII digits; also every numeric flag)
    inputs.py         what a job read: size and sha256 of each data file and model file, for its run folder
    course.py         the CS224N course's CSV files (SST, CFIMDB, Quora, STS) and prediction files
    sources.py        where the course files are found (or downloaded, or the demo sample)
    course_files.py   which course files a main-job run reads and writes (the starter's --sst_train ...)
    glue.py           GLUE small tasks and TREC
    classify_sets.py  the sets of tasks.classify: classes, metric, reader
    hierarchy.py      label hierarchies (HWV, 20 Newsgroups, Enron, TREC) and their readers
    conll.py          CoNLL files (WNUT-17)
    wordpieces.py     word <-> word-piece alignment for word-level labels
    encoding.py       texts and pairs to word-piece ids
    batching.py       examples to length-bucketed, padded batches; predictions in the input's order

Read next: examples.py.
"""
