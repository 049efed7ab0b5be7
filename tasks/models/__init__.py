"""What the jobs put on top of BertModel: task heads, losses, and task-specific models.

    heads.py           sentence classifier, SBERT-style cosine pair heads, the losses
    course_task.py     a course task as one row (data, head, loss, metric, output file, weight), the model
                       with a head per row, and a row's examples at work in the training loop
    classifier.py      tasks.classify's model: layer features, long texts by windows, label embeddings
    features.py        which layers a classifier reads, and pooling over a long text's windows
    structured.py      structured (layer-wise) classifiers for label hierarchies
    crf.py             a linear-chain CRF for BIO tagging
    spans.py           span enumeration, pooling and decoding for span-based NER

Sentence pooling (mean / cls / max) is not here: it is part of the library, minbert/pooling.py.

Read next: heads.py.
"""
