"""kplm.export: Hugging Face model folders from pretraining checkpoints (:mod:`kplm.export.hf`).

Importing this package does not import torch.
"""
