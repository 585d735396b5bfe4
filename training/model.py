"""The masked-LM models: Hugging Face BERT/RoBERTa/ModernBERT built from a config (never downloaded), and a
loss wrapper that runs the vocabulary projection only on the masked positions.

The wrapper is what DeepSpeed trains; ``wrapper.mlm`` is the plain ``BertForMaskedLM`` /
``RobertaForMaskedLM`` / ``ModernBertForMaskedLM`` whose weights are saved and exported, so checkpoints
load into stock transformers.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from kplm.training.config import ModelConfig
from kplm.training.data import IGNORE_INDEX


def hf_config(model: ModelConfig, *, vocab_size: int, seq_len: int, ids: dict[str, Any]) -> Any:
    """The transformers config of the encoder; RoBERTa gets ``pad_id + 1`` extra positions (its scheme).

    ModernBERT (pre-LN, rotary positions, GeGLU feed-forward of ``ffn`` units, no biases) is built with
    global attention in every layer: its alternating 128-token local windows only save work on sequences
    far longer than the 128–512 tokens encoders are pretrained on here.
    """
    from transformers import BertConfig, ModernBertConfig, RobertaConfig

    layers, hidden, heads, ffn = model.shape()
    if model.arch == "modernbert":
        return ModernBertConfig(
            vocab_size=vocab_size,
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=ffn,
            max_position_embeddings=max(model.max_position or 0, seq_len),
            layer_types=["full_attention"] * layers,
            embedding_dropout=model.dropout,
            attention_dropout=model.dropout,
            mlp_dropout=model.dropout,
            pad_token_id=ids["pad"],
            bos_token_id=ids["cls"],
            eos_token_id=ids["sep"],
            cls_token_id=ids["cls"],
            sep_token_id=ids["sep"],
            attn_implementation="sdpa",
        )
    common = {
        "vocab_size": vocab_size,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": ffn,
        "hidden_dropout_prob": model.dropout,
        "attention_probs_dropout_prob": model.dropout,
        "pad_token_id": ids["pad"],
        "attn_implementation": "sdpa",
    }
    if model.arch == "bert":
        return BertConfig(
            max_position_embeddings=model.max_position or seq_len,
            type_vocab_size=2,
            layer_norm_eps=1e-12,
            **common,
        )
    needed = seq_len + ids["pad"] + 1
    return RobertaConfig(
        max_position_embeddings=max(model.max_position or 0, needed),
        type_vocab_size=1,
        layer_norm_eps=1e-5,
        bos_token_id=ids["cls"],
        eos_token_id=ids["sep"],
        **common,
    )


def build_mlm(config: Any) -> nn.Module:
    """A freshly initialised masked LM (BERT, RoBERTa or ModernBERT) for ``config`` (SDPA attention)."""
    from transformers import BertForMaskedLM, ModernBertForMaskedLM, RobertaForMaskedLM

    classes = {"roberta": RobertaForMaskedLM, "modernbert": ModernBertForMaskedLM}
    config._attn_implementation = "sdpa"
    return classes.get(config.model_type, BertForMaskedLM)(config)


def mlm_logits(mlm: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """Vocabulary logits of the prediction head (transform + tied decoder) for the given hidden states."""
    if hasattr(mlm, "lm_head"):  # RoBERTa
        return mlm.lm_head(hidden)
    if hasattr(mlm, "cls"):  # BERT
        return mlm.cls(hidden)
    return mlm.decoder(mlm.head(hidden))  # ModernBERT


class SparseMLMLoss(nn.Module):
    """Encoder on all tokens, prediction head only where ``labels != -100``; returns the mean fp32 loss.

    Skipping the ~85% unmasked positions removes most of the (vocabulary × hidden) projection, the largest
    matrix of small encoders; the loss is computed in fp32 even when the model runs in bf16/fp16.
    """

    def __init__(self, mlm: nn.Module):
        super().__init__()
        self.mlm = mlm

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor
    ) -> torch.Tensor:
        hidden = self.mlm.base_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        chosen = labels != IGNORE_INDEX
        logits = mlm_logits(self.mlm, hidden[chosen])
        total = F.cross_entropy(logits.float(), labels[chosen], reduction="sum")
        return total / chosen.sum().clamp(min=1)


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW groups: decay on weight matrices, none on biases, LayerNorm and embeddings' norms."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        (no_decay if param.ndim < 2 or "LayerNorm" in name or "layer_norm" in name else decay).append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def count_params(model: nn.Module) -> int:
    """Distinct parameters (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters())


def flops_per_token(config: Any, params: int, seq_len: int, mask_prob: float) -> float:
    """Training FLOPs per token: 6 × matmul parameters (the vocab projection only on masked tokens)
    plus attention scores and values (12 × layers × hidden × seq_len), as in PaLM's MFU. Embedding
    lookups are not matmuls: token, learned position and token-type tables are left out (ModernBERT's
    rotary positions have no table)."""
    hidden, vocab = config.hidden_size, config.vocab_size
    if config.model_type == "modernbert":
        embeddings = vocab * hidden
    else:
        embeddings = (vocab + config.max_position_embeddings + config.type_vocab_size) * hidden
    dense = params - embeddings
    return 6.0 * (dense + mask_prob * vocab * hidden) + 12.0 * config.num_hidden_layers * hidden * seq_len
