"""kplm.tokenizer: KLUE-style morpheme-based WordPiece vocabularies (``kplm tokenizer train``).

:func:`~kplm.tokenizer.train.train_tokenizer` learns the vocabulary from MeCab-ko morphemes and writes a
transformers ``BertTokenizer`` folder that runs on raw text without MeCab; morpheme-mode inference is in
:mod:`kplm.tokenizer.morphemes`.
"""

from kplm.tokenizer.config import TokenizerConfig
from kplm.tokenizer.morphemes import encode_morphemes, tokenize_morphemes
from kplm.tokenizer.train import train_tokenizer

__all__ = ["TokenizerConfig", "encode_morphemes", "tokenize_morphemes", "train_tokenizer"]
