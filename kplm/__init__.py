"""kplm: raw Korean text in, pretrained Korean BERT/RoBERTa encoders out.

Stages (each a subpackage, each usable alone): ``kplm.corpus`` (read, normalise, filter, deduplicate),
``kplm.pii`` (detect and pseudonymise personal information), ``kplm.tokenizer`` (MeCab-ko morpheme-aware
subword vocabularies), ``kplm.training`` (pack token shards, DeepSpeed masked-LM pretraining),
``kplm.export`` (Hugging Face folders) and ``kplm.pipeline`` (one YAML config runs them all).
"""

__version__ = "0.1.0"
