"""Sentence(-pair) classification (YNAT, KLUE-NLI, KorNLI), regression (KLUE-STS, KorSTS) and KLUE-NER.

Classification and regression put ``AutoModelForSequenceClassification``'s head on ``[CLS]``; KLUE-NER
tags tokens with ``AutoModelForTokenClassification`` and maps the predictions back to one tag per
character (:func:`decode_ner`), the unit KLUE scores NER in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from kplm.errors import KplmError
from kplm.finetune import metrics
from kplm.finetune.data import NER_LABELS, NLI_LABELS, NSMC_LABELS, YNAT_LABELS
from kplm.finetune.loop import TaskBase, batches

LABELS = {
    "ynat": YNAT_LABELS,
    "klue-nli": NLI_LABELS,
    "kornli": NLI_LABELS,
    "klue-ner": NER_LABELS,
    "nsmc": NSMC_LABELS,
}
REGRESSION = ("klue-sts", "korsts")
MAIN_METRIC = {
    "ynat": "macro_f1",
    "klue-sts": "pearsonr",
    "korsts": "pearsonr",
    "klue-nli": "accuracy",
    "kornli": "accuracy",
    "klue-ner": "entity_macro_f1",
    "nsmc": "accuracy",
}


def encode_ner(tokenizer: Any, examples: list, max_length: int) -> list[dict[str, Any]]:
    """Tokenise each sentence's text; a token's label is the first ``B-`` tag in its characters, else the
    tag of its first character. ``spans`` keep each token's character range for decoding."""
    out = []
    for ex in examples:
        text = "".join(ex["chars"])
        if len(text) != len(ex["chars"]):
            raise KplmError(f"{ex['guid']}: a KLUE-NER row holds more than one character")
        enc = tokenizer(text, truncation=True, max_length=max_length, return_offsets_mapping=True)
        labels, spans = [], []
        for start, end in enc["offset_mapping"]:
            if end <= start:
                labels.append(-100)
                spans.append(None)
                continue
            tags = ex["tags"][start:end]
            tag = next((t for t in tags if t.startswith("B-")), tags[0])
            labels.append(NER_LABELS.index(tag))
            spans.append((start, end))
        out.append(
            {
                "input_ids": enc["input_ids"],
                "attention_mask": enc["attention_mask"],
                "labels": labels,
                "spans": spans,
            }
        )
    return out


def decode_ner(spans: list, predicted: list[int], n_chars: int) -> list[str]:
    """Character tags from token predictions: ``B-X`` on a token's first character, ``I-X`` on the rest;
    characters no token covers (spaces) get ``I-X`` when they sit inside an entity of type X, else ``O``."""
    tags = ["O"] * n_chars
    covered = [False] * n_chars
    for span, label_id in zip(spans, predicted, strict=False):
        if span is None:
            continue
        tag = NER_LABELS[label_id]
        start, end = span
        tags[start] = tag
        inner = "O" if tag == "O" else "I-" + tag[2:]
        for i in range(start, end):
            covered[i] = True
            if i > start:
                tags[i] = inner
    previous = "O"
    for i in range(n_chars):
        if covered[i]:
            previous = tags[i]
            continue
        following = next((tags[j] for j in range(i + 1, n_chars) if covered[j]), "O")
        if previous != "O" and following == "I-" + previous[2:]:
            tags[i] = following
    return tags


class Task(TaskBase):
    """YNAT, KLUE-STS/NLI/NER, KorSTS and KorNLI."""

    def __init__(self, name: str, hp: dict[str, Any], config: Any) -> None:
        super().__init__(name, hp, config)
        self.main_metric = MAIN_METRIC[name]

    def load(self, folder: Path, train: list[dict[str, Any]]) -> None:
        from transformers import (
            AutoModelForSequenceClassification,
            AutoModelForTokenClassification,
            AutoTokenizer,
        )

        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        if self.name == "klue-ner":
            if not self.tokenizer.is_fast:
                raise KplmError(
                    f"{folder}: KLUE-NER needs a fast tokenizer (tokenizer.json) for character offsets"
                )
            labels = LABELS["klue-ner"]
            self.model = AutoModelForTokenClassification.from_pretrained(
                str(folder),
                num_labels=len(labels),
                id2label=dict(enumerate(labels)),
                label2id={x: i for i, x in enumerate(labels)},
            )
        elif self.name in REGRESSION:
            self.model = AutoModelForSequenceClassification.from_pretrained(
                str(folder), num_labels=1, problem_type="regression"
            )
        else:
            labels = LABELS[self.name]
            self.model = AutoModelForSequenceClassification.from_pretrained(
                str(folder),
                num_labels=len(labels),
                id2label=dict(enumerate(labels)),
                label2id={x: i for i, x in enumerate(labels)},
                problem_type="single_label_classification",
            )

    def encode(self, examples: list[dict[str, Any]], training: bool) -> list[dict[str, Any]]:
        max_length = self.hp["max_length"]
        if self.name == "klue-ner":
            return encode_ner(self.tokenizer, examples, max_length)
        out = []
        for ex in examples:
            enc = self.tokenizer(ex["text_a"], ex["text_b"], truncation=True, max_length=max_length)
            label = float(ex["label"]) if self.name in REGRESSION else LABELS[self.name].index(ex["label"])
            out.append(
                {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"], "labels": label}
            )
        return out

    def collate(self, chunk: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        return self.batch(chunk, {"input_ids": self.pad_id, "attention_mask": 0, "labels": -100})

    def _logits(self, features: list[dict[str, Any]]) -> list[torch.Tensor]:
        outputs: list[Any] = [None] * len(features)
        for index in batches(len(features), self.eval_batch_size):
            batch = self.batch([features[i] for i in index], {"input_ids": self.pad_id, "attention_mask": 0})
            logits = self.model(**batch).logits
            for row, i in enumerate(index):
                outputs[i] = logits[row]
        return outputs

    def evaluate(self, examples: list[dict[str, Any]], features: list[dict[str, Any]]) -> dict[str, float]:
        outputs = self._logits(features)
        if self.name in REGRESSION:
            preds = [float(o.reshape(-1)[0]) for o in outputs]
            gold = [ex["label"] for ex in examples]
            return {"pearsonr": metrics.sts_pearsonr(preds, gold), "f1": metrics.sts_f1(preds, gold)}
        if self.name == "klue-ner":
            gold = [ex["tags"] for ex in examples]
            pred = [
                decode_ner(f["spans"], o.argmax(-1).tolist(), len(ex["chars"]))
                for ex, f, o in zip(examples, features, outputs, strict=True)
            ]
            return {
                "entity_macro_f1": metrics.ner_entity_macro_f1(gold, pred),
                "char_macro_f1": metrics.ner_char_macro_f1(gold, pred, NER_LABELS),
            }
        preds = [LABELS[self.name][int(o.argmax())] for o in outputs]
        gold = [ex["label"] for ex in examples]
        if self.name == "ynat":
            return {"macro_f1": metrics.ynat_macro_f1(preds, gold)}
        return {"accuracy": metrics.nli_accuracy(preds, gold)}
