"""Per-task fine-tuning hyperparameters, taken from KLUE-baseline's ``run_all.sh`` (base-size models).

``run_all.sh`` gives, for klue/bert-base and klue/roberta-{small,base}: YNAT lr 5e-5, batch 32, warmup 0.1,
length 128 (epochs not set there; 4 used here); STS lr 5e-5, 4 epochs, batch 32, warmup 0.1, weight decay 0,
length 128; NLI lr 5e-5, 5 epochs, batch 32, warmup 0.1, weight decay 0, length 128; NER 3 epochs, length 510
(lr/batch/warmup not set there: 5e-5 / 32 / 0.1 used here); RE lr 5e-5, 3 epochs, batch 32, warmup 0.1,
length 256; DP lr 5e-5, 10 epochs, batch 32, warmup 0.1, length 256; MRC lr 3e-5, 5 epochs, batch 16,
length 510 (warmup not set there: 0 here); WoS lr 3e-5, 5 epochs, batch 16, warmup 0.1, weight decay 0.01, length 510. KorSTS/KorNLI reuse
the KLUE-STS/KLUE-NLI rows. The ``large`` column holds klue/roberta-large's values where they differ.
"""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    "ynat": {
        "lr": 5e-5,
        "batch_size": 32,
        "epochs": 4,
        "warmup_ratio": 0.1,
        "weight_decay": 0.0,
        "max_length": 128,
    },
    "klue-sts": {
        "lr": 5e-5,
        "batch_size": 32,
        "epochs": 4,
        "warmup_ratio": 0.1,
        "weight_decay": 0.0,
        "max_length": 128,
    },
    "klue-nli": {
        "lr": 5e-5,
        "batch_size": 32,
        "epochs": 5,
        "warmup_ratio": 0.1,
        "weight_decay": 0.0,
        "max_length": 128,
    },
    "klue-ner": {
        "lr": 5e-5,
        "batch_size": 32,
        "epochs": 3,
        "warmup_ratio": 0.1,
        "weight_decay": 0.0,
        "max_length": 510,
    },
    "klue-re": {
        "lr": 5e-5,
        "batch_size": 32,
        "epochs": 3,
        "warmup_ratio": 0.1,
        "weight_decay": 0.0,
        "max_length": 256,
    },
    "klue-dp": {
        "lr": 5e-5,
        "batch_size": 32,
        "epochs": 10,
        "warmup_ratio": 0.1,
        "weight_decay": 0.0,
        "max_length": 256,
    },
    "klue-mrc": {
        "lr": 3e-5,
        "batch_size": 16,
        "epochs": 5,
        "warmup_ratio": 0.0,
        "weight_decay": 0.0,
        "max_length": 510,
    },
    "wos": {
        "lr": 3e-5,
        "batch_size": 16,
        "epochs": 5,
        "warmup_ratio": 0.1,
        "weight_decay": 0.01,
        "max_length": 510,
    },
}
PRESETS["korsts"] = dict(PRESETS["klue-sts"])
PRESETS["kornli"] = dict(PRESETS["klue-nli"])
PRESETS["nsmc"] = dict(PRESETS["ynat"])  # single-sentence classification, like YNAT

#: klue/roberta-large settings from ``run_all.sh`` where they differ from the base rows.
LARGE_OVERRIDES: dict[str, dict[str, Any]] = {
    "ynat": {"warmup_ratio": 0.2},
    "klue-sts": {"lr": 2e-5},
    "klue-nli": {"warmup_ratio": 0.2},
    "klue-ner": {"lr": 1e-5, "batch_size": 8},
    "klue-re": {"lr": 2e-5, "epochs": 10, "batch_size": 16, "warmup_ratio": 0.2},
    "klue-dp": {"epochs": 15, "warmup_ratio": 0.2},
    "wos": {"lr": 2e-5, "batch_size": 8},
}


def preset(task: str, large: bool = False) -> dict[str, Any]:
    """The hyperparameters of ``task`` (``large``: klue/roberta-large's row)."""
    values = dict(PRESETS[task])
    if large:
        values.update(LARGE_OVERRIDES.get(task, {}))
    return values
