"""minbert: a from-scratch, teachable BERT in PyTorch that loads real Hugging Face checkpoints.

The names a library user needs, each defined in the file named:

    BertConfig          the sizes of a model, with config.json's field names (config.py)
    BertTokenizer       text to [CLS] A [SEP] B [SEP] ids; `tokenizer(texts)` gives the model's inputs
                        (tokenizer.py)
    BertModel           the encoder; `BertModel.from_pretrained(name_or_path)` loads a checkpoint (model.py)
    UnpaddedBertModel   the same encoder, faster on padded batches: it runs on their real tokens only
                        (unpadded.py)
    BertForPreTraining  BertModel with the masked-LM and next-sentence heads (heads.py)
    SentenceEncoder     sentence embeddings in one call, as sentence-transformers gives them
                        (sentence_encoder.py)

Read next: config.py, then each file in turn as its "Read next" says (tokenizer.py, embeddings.py, ...).
"""

from minbert.config import BertConfig
from minbert.heads import BertForPreTraining
from minbert.model import BertModel
from minbert.sentence_encoder import SentenceEncoder
from minbert.tokenizer import BertTokenizer
from minbert.unpadded import UnpaddedBertModel

__all__ = ["BertConfig", "BertTokenizer", "BertModel", "UnpaddedBertModel", "BertForPreTraining",
           "SentenceEncoder"]
