"""Configuration of masked-LM pretraining: the model shape, the optimisation and the run's bookkeeping.

A pretraining YAML (``deepspeed launch/pretrain.py --config run.yaml``) is one :class:`PretrainConfig`
mapping; ``model:`` and ``wandb:`` are nested mappings. Model sizes follow KLUE's BERT/RoBERTa
(``base``: 12 layers, 768 hidden, 12 heads, 3072 FFN; ``large``: 24/1024/16/4096; ``small``:
6/768/12/3072 as KLUE RoBERTa-small) plus two CPU-sized presets for tests and smoke runs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from kplm.config import build, load_yaml

# size → (layers, hidden, heads, ffn)
SIZE_PRESETS: dict[str, tuple[int, int, int, int]] = {
    "tiny": (2, 64, 2, 128),
    "mini": (4, 256, 4, 1024),
    "small": (6, 768, 12, 3072),
    "base": (12, 768, 12, 3072),
    "large": (24, 1024, 16, 4096),
}


@dataclass(kw_only=True)
class ModelConfig:
    """The encoder: an architecture, a size preset and optional overrides of the preset's shape."""

    arch: Literal["bert", "roberta", "modernbert"] = field(
        default="roberta",
        metadata={
            "help": "bert (token types, post-LN BERT), roberta (RoBERTa position scheme) or modernbert "
            "(pre-LN, rotary positions, GeGLU; leaves the masked-LM loss plateau far sooner at small scale)"
        },
    )
    size: Literal["tiny", "mini", "small", "base", "large"] = field(
        default="base", metadata={"help": "shape preset (tiny/mini for CPU; small/base/large as KLUE)"}
    )
    num_layers: int | None = field(default=None, metadata={"help": "override the preset's layer count"})
    hidden: int | None = field(default=None, metadata={"help": "override the preset's hidden size"})
    heads: int | None = field(default=None, metadata={"help": "override the preset's attention heads"})
    ffn: int | None = field(default=None, metadata={"help": "override the preset's feed-forward size"})
    dropout: float = field(default=0.1, metadata={"help": "hidden and attention dropout probability"})
    max_position: int | None = field(
        default=None,
        metadata={
            "help": "position embeddings (default: seq_len, plus pad id + 1 for RoBERTa; for modernbert the "
            "longest sequence its rotary positions are prepared for)"
        },
    )

    def __post_init__(self) -> None:
        for name in ("num_layers", "hidden", "heads", "ffn", "max_position"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name}: must be a positive integer, got {value}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout: must be in [0, 1), got {self.dropout}")
        layers, hidden, heads, ffn = self.shape()
        if hidden % heads:
            raise ValueError(f"heads: hidden size {hidden} is not divisible by {heads} heads")

    def shape(self) -> tuple[int, int, int, int]:
        """(layers, hidden, heads, ffn) after applying the overrides to the preset."""
        layers, hidden, heads, ffn = SIZE_PRESETS[self.size]
        return (
            self.num_layers or layers,
            self.hidden or hidden,
            self.heads or heads,
            self.ffn or ffn,
        )


@dataclass(kw_only=True)
class WandbConfig:
    """Weights & Biases logging (rank 0 only, scalars only; the WANDB_MODE variable wins over ``mode``)."""

    mode: Literal["disabled", "offline", "online"] = field(
        default="disabled", metadata={"help": "disabled, offline (local files) or online"}
    )
    project: str = field(default="kplm", metadata={"help": "wandb project"})
    group: str | None = field(
        default=None, metadata={"help": "wandb run group (default: $WANDB_RUN_GROUP, else arch-size)"}
    )
    name: str | None = field(default=None, metadata={"help": "wandb run name (default: output folder)"})


@dataclass(kw_only=True)
class PretrainConfig:
    """One masked-LM pretraining run on packed sequences (see ``kplm pack``)."""

    data: Path = field(
        metadata={"help": "folder written by kplm pack (train.npy, valid.npy, pack_meta.json)"}
    )
    tokenizer: Path = field(metadata={"help": "the Hugging Face tokenizer folder the data was packed with"})
    output: Path = field(metadata={"help": "run folder: checkpoints/, metrics.jsonl, kplm_record.json"})
    model: ModelConfig = field(default_factory=ModelConfig, metadata={"help": "encoder architecture"})
    seq_len: int = field(default=128, metadata={"help": "sequence length; must equal the pack's"})
    micro_batch_size: int = field(default=32, metadata={"help": "sequences per rank per micro-step"})
    grad_accum: int = field(default=1, metadata={"help": "micro-steps per optimizer step"})
    max_steps: int = field(default=10000, metadata={"help": "optimizer steps in the whole run"})
    lr: float = field(default=5e-4, metadata={"help": "peak learning rate"})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay (not on bias/LayerNorm)"})
    adam_beta1: float = field(default=0.9, metadata={"help": "AdamW beta1"})
    adam_beta2: float = field(default=0.98, metadata={"help": "AdamW beta2 (0.98 as RoBERTa)"})
    adam_eps: float = field(default=1e-6, metadata={"help": "AdamW epsilon"})
    warmup_steps: int = field(default=500, metadata={"help": "linear warm-up steps"})
    schedule: Literal["linear", "cosine"] = field(
        default="linear", metadata={"help": "decay to zero after warm-up: linear or cosine"}
    )
    grad_clip: float = field(default=1.0, metadata={"help": "gradient-norm clipping (0: off)"})
    precision: Literal["fp32", "bf16", "fp16"] = field(
        default="bf16", metadata={"help": "fp32, bf16 (mixed, fp32 master weights) or fp16 (GPU only)"}
    )
    zero_stage: int = field(default=1, metadata={"help": "DeepSpeed ZeRO stage 0-3"})
    gradient_checkpointing: bool = field(
        default=False, metadata={"help": "recompute activations in backward to save memory"}
    )
    seed: int = field(default=42, metadata={"help": "seed of initialisation, data order, masking, dropout"})
    mask_prob: float = field(default=0.15, metadata={"help": "share of tokens to predict (80/10/10 rule)"})
    masking: Literal["token", "eojeol", "morpheme"] = field(
        default="token",
        metadata={
            "help": "token: BERT's per-token choice; eojeol: whole eojeols (piece + its ## pieces); "
            "morpheme: whole MeCab-ko morphemes (needs a pack made with morpheme_boundaries)"
        },
    )
    save_every: int = field(default=1000, metadata={"help": "checkpoint every N steps (and at the end)"})
    keep_last: int = field(default=3, metadata={"help": "checkpoints to keep"})
    log_every: int = field(default=10, metadata={"help": "log a metrics line every N steps"})
    eval_every: int = field(
        default=1000, metadata={"help": "held-out MLM loss every N steps (and at the end)"}
    )
    eval_batches: int = field(
        default=50, metadata={"help": "held-out micro-batches per rank for each evaluation (at most)"}
    )
    peak_tflops: float | None = field(
        default=None, metadata={"help": "peak TFLOP/s of one device, to log model FLOPs utilisation (MFU)"}
    )
    wandb: WandbConfig = field(default_factory=WandbConfig, metadata={"help": "wandb logging"})
    deepspeed_config: Path | None = field(
        default=None, metadata={"help": "DeepSpeed JSON merged over the generated one (yours wins)"}
    )

    def __post_init__(self) -> None:
        positive = ("seq_len", "micro_batch_size", "grad_accum", "max_steps", "save_every", "keep_last")
        for name in (*positive, "log_every", "eval_every", "eval_batches"):
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"{name}: must be at least 1, got {value}")
        if self.seq_len < 8:
            raise ValueError(f"seq_len: must be at least 8, got {self.seq_len}")
        if not self.lr > 0:
            raise ValueError(f"lr: must be positive, got {self.lr}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay: must not be negative, got {self.weight_decay}")
        for name in ("adam_beta1", "adam_beta2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name}: must be in [0, 1), got {getattr(self, name)}")
        if not self.adam_eps > 0:
            raise ValueError(f"adam_eps: must be positive, got {self.adam_eps}")
        if not 0 <= self.warmup_steps <= self.max_steps:
            raise ValueError(
                f"warmup_steps: must be between 0 and max_steps ({self.max_steps}), got {self.warmup_steps}"
            )
        if self.grad_clip < 0:
            raise ValueError(f"grad_clip: must not be negative (0 turns clipping off), got {self.grad_clip}")
        if self.zero_stage not in (0, 1, 2, 3):
            raise ValueError(f"zero_stage: must be 0, 1, 2 or 3, got {self.zero_stage}")
        if not 0.0 < self.mask_prob < 1.0:
            raise ValueError(f"mask_prob: must be between 0 and 1, got {self.mask_prob}")
        if self.peak_tflops is not None and not self.peak_tflops > 0:
            raise ValueError(f"peak_tflops: must be positive, got {self.peak_tflops}")
        max_position = self.model.max_position
        if max_position is not None and max_position < self.seq_len:
            raise ValueError(f"model: max_position {max_position} is shorter than seq_len {self.seq_len}")


def load_pretrain_config(path: str | Path) -> PretrainConfig:
    """Read and validate a pretraining YAML (a :class:`PretrainConfig` mapping); errors name the field."""
    return build(PretrainConfig, load_yaml(path), where=str(path))


def absolute_paths(config: PretrainConfig) -> PretrainConfig:
    """A copy of ``config`` with its paths made absolute (for the resolved config kept with checkpoints)."""
    paths = {n: Path(getattr(config, n)).resolve() for n in ("data", "tokenizer", "output")}
    if config.deepspeed_config is not None:
        paths["deepspeed_config"] = Path(config.deepspeed_config).resolve()
    return dataclasses.replace(config, **paths)
