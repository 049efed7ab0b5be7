"""What the jobs put on top of BertModel: task heads, losses, and task-specific models.

    heads.py           sentence classifier, SBERT-style cosine pair heads, the losses
    sentiment_task.py  the sentiment task (SST, CFIMDB): batches, cross-entropy with R-Drop, predictions
    pair_task.py       the main job's pair tasks (Quora paraphrase, STS similarity)
    classifier.py      tasks.classify's model: layer features, long texts by windows, label embeddings
    features.py        which layers a classifier reads, and pooling over a long text's windows
    structured.py      structured (layer-wise) classifiers for label hierarchies
    crf.py             a linear-chain CRF for BIO tagging
    spans.py           span enumeration, pooling and decoding for span-based NER

Sentence pooling (mean / cls / max) is not here: it is part of the library, minbert/pooling.py.

Read next: heads.py.
"""
