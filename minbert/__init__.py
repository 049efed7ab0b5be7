"""minbert: a from-scratch, teachable BERT in PyTorch that loads real Hugging Face checkpoints.

The names a library user needs, each defined in the file named:

    BertConfig          the sizes of a model, with config.json's field names (config.py)
    BertTokenizer       text to [CLS] A [SEP] B [SEP] ids; `tokenizer(texts)` gives the model's inputs
                        (tokenizer.py)
    BertModel           the encoder; `BertModel.from_pretrained(name_or_path)` loads a checkpoint (model.py)
    BertForPreTraining  BertModel with the masked-LM and next-sentence heads (heads.py)
    load_pretrained     the lower-level loader: (model, LoadReport) for a name or path (hub.py)
    SentenceEncoder     sentence embeddings in one call, as sentence-transformers gives them
                        (sentence_encoder.py)

Read next: config.py, then each file in turn as its "Read next" says (tokenizer.py, embeddings.py, ...).
"""

from minbert.config import BertConfig
from minbert.heads import BertForPreTraining
from minbert.hub import load_pretrained
from minbert.model import BertModel
from minbert.sentence_encoder import SentenceEncoder
from minbert.tokenizer import BertTokenizer

__all__ = ["BertConfig", "BertTokenizer", "BertModel", "BertForPreTraining", "load_pretrained",
           "SentenceEncoder"]
