"""kplm.training: pack token sequences and pretrain BERT/RoBERTa masked LMs with DeepSpeed.

- :mod:`kplm.training.pack`: ``kplm pack`` — encode a corpus folder, pack ``[CLS] … [SEP]`` sequences into
  memory-mapped ``train.npy`` / ``valid.npy``.
- :mod:`kplm.training.config`: :class:`PretrainConfig` (the pretraining YAML) and model size presets.
- :mod:`kplm.training.data`: memory-mapped batches and dynamic masking (token, whole-eojeol, whole-morpheme).
- :mod:`kplm.training.pretrain`: the trainer every rank runs (``deepspeed launch/pretrain.py --config X``),
  with its step loop in :mod:`kplm.training.loop`, input/resume checks in :mod:`kplm.training.checks` and
  ``weights_only`` checkpoint loading in :mod:`kplm.training.safe_load`.
- :func:`launch_pretraining`: start ``deepspeed`` on this machine from Python (used by ``kplm run``).

Importing this package does not import torch or DeepSpeed.
"""

from kplm.training.launch import launch_pretraining

__all__ = ["launch_pretraining"]
