"""What the jobs put on top of BertModel: task heads, losses, and task-specific models.

    course_task.py     a course task as one row (data, head, loss, metric, output file, weight), the model
                       with a head per row, and a row's examples at work in the training loop
    classifier.py      tasks.classify's model: layer features, long texts by windows, label embeddings
    features.py        which layers a classifier reads, and pooling over a long text's windows
    structured.py      structured (layer-wise) classifiers for label hierarchies
    crf.py             a linear-chain CRF for BIO tagging
    spans.py           span enumeration, pooling and decoding for span-based NER

The heads and losses every job shares (the sentence classifier, the cosine pair head) and sentence pooling
are not here: they are lesson files, minbert/task_heads.py and minbert/pooling.py.

Read next: course_task.py.
"""
