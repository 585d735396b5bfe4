"""kplm.tokenizer: KLUE-style morpheme-aware vocabularies (``kplm tokenizer train`` / ``report``).

:func:`~kplm.tokenizer.train.train_tokenizer` learns a WordPiece (``##`` continuations, KLUE-BERT compatible)
or Metaspace BPE vocabulary from MeCab-ko morphemes (or whole words: ``mode="plain"``) and writes a
transformers tokenizer folder that runs on raw text without MeCab; morpheme-mode inference is
:func:`~kplm.tokenizer.morphemes.tokenize_morphemes`; :func:`~kplm.tokenizer.evaluate.report_tokenizer`
measures a tokenizer on any text next to reference vocabularies.
"""

from kplm.tokenizer.config import TokenizerConfig, TokenizerReportConfig
from kplm.tokenizer.evaluate import report_tokenizer
from kplm.tokenizer.morphemes import encode_morphemes, tokenize_morphemes
from kplm.tokenizer.train import train_tokenizer

__all__ = [
    "TokenizerConfig",
    "TokenizerReportConfig",
    "encode_morphemes",
    "report_tokenizer",
    "tokenize_morphemes",
    "train_tokenizer",
]
