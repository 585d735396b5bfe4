"""WoS dialogue state tracking as classification over an ontology built from the training data.

A compact, simpler baseline than KLUE-baseline's generative TRADE / span-and-candidate SUMBT models: the
ontology is every ``domain-slot`` seen in the training states, and for each the values seen there plus
``none`` (slot not mentioned) and ``dontcare``. For every user turn the dialogue so far (turns joined by
``[SEP]``, oldest tokens dropped beyond ``max_length``) is encoded once; one linear classifier per slot
reads the ``[CLS]`` state and picks that slot's value (cross-entropy averaged over slots). The predicted
state is every slot whose value is not ``none``. A value never seen in training cannot be predicted: the
``ontology_coverage`` score says which share of the evaluation's gold slot-values the ontology holds (an
upper bound on slot recall). Scores: joint goal accuracy and slot micro-F1 from :mod:`.metrics`.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from kplm.errors import KplmError
from kplm.finetune import metrics
from kplm.finetune.heads import EncoderHead
from kplm.finetune.loop import TaskBase, batches

NONE, DONTCARE = "none", "dontcare"


def split_state(item: str) -> tuple[str, str]:
    """``"관광-종류-공원"`` -> ``("관광-종류", "공원")`` (a value may itself contain ``-``)."""
    domain, slot, value = item.split("-", 2)
    return f"{domain}-{slot}", value


def build_ontology(examples: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Slot -> candidate values (``none``, ``dontcare``, then the training values in sorted order)."""
    seen: dict[str, set[str]] = {}
    for ex in examples:
        for item in ex["state"]:
            slot, value = split_state(item)
            seen.setdefault(slot, set()).add(value)
    return {slot: [NONE, DONTCARE, *sorted(v - {NONE, DONTCARE})] for slot, v in sorted(seen.items())}


class SlotClassifier(EncoderHead):
    """Encoder + one linear value classifier per slot over the ``[CLS]`` state."""

    kind = "wos-ontology-classifier"

    def __init__(self, encoder: Any, ontology: dict[str, list[str]]) -> None:
        super().__init__(encoder, ontology=ontology)
        self.sizes = [len(values) for values in ontology.values()]
        self.dropout = torch.nn.Dropout(0.1)
        self.classifier = torch.nn.Linear(encoder.config.hidden_size, sum(self.sizes))

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor | None = None
    ) -> SimpleNamespace:
        """``labels``: ``[batch, slots]`` value indices. Returns per-slot ``logits`` (a list) and ``loss``."""
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        logits = list(self.classifier(self.dropout(hidden[:, 0])).split(self.sizes, dim=-1))
        loss = None
        if labels is not None:
            loss = torch.stack(
                [torch.nn.functional.cross_entropy(x, labels[:, s]) for s, x in enumerate(logits)]
            ).mean()
        return SimpleNamespace(loss=loss, logits=logits)


class Task(TaskBase):
    """WoS with :class:`SlotClassifier` over the training ontology."""

    main_metric = "joint_goal_accuracy"

    def load(self, folder: Path, train: list[dict[str, Any]]) -> None:
        from transformers import AutoModel, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        if self.tokenizer.cls_token_id is None or self.tokenizer.sep_token_id is None:
            raise KplmError(f"{folder}: WoS needs a tokenizer with CLS and SEP tokens")
        self.ontology = build_ontology(train)
        if not self.ontology:
            raise KplmError("wos: the training dialogues hold no slot values to build an ontology from")
        self.model = SlotClassifier(AutoModel.from_pretrained(str(folder)), self.ontology)

    def _ids(self, history: list[str]) -> list[int]:
        """``[CLS] turn1 [SEP] turn2 [SEP] … [SEP]`` keeping the newest ``max_length - 2`` body tokens."""
        body: list[int] = []
        for turn in history:
            if body:
                body.append(self.tokenizer.sep_token_id)
            body.extend(self.tokenizer(turn, add_special_tokens=False)["input_ids"])
        body = body[-(self.hp["max_length"] - 2) :]
        return [self.tokenizer.cls_token_id, *body, self.tokenizer.sep_token_id]

    def encode(self, examples: list[dict[str, Any]], training: bool) -> list[dict[str, Any]]:
        out = []
        for ex in examples:
            ids = self._ids(ex["history"])
            feature: dict[str, Any] = {"input_ids": ids, "attention_mask": [1] * len(ids)}
            if training:
                state = dict(split_state(item) for item in ex["state"])
                feature["labels"] = [
                    values.index(state.get(slot, NONE)) for slot, values in self.ontology.items()
                ]
            out.append(feature)
        return out

    def collate(self, chunk: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        pads = {"input_ids": self.pad_id, "attention_mask": 0}
        if "labels" in chunk[0]:
            pads["labels"] = 0
        return self.batch(chunk, pads)

    def predict(self, features: list[dict[str, Any]]) -> list[list[str]]:
        """The predicted state (``domain-slot-value`` strings, ``none`` slots left out) of every turn."""
        slots = list(self.ontology.items())
        states: list[Any] = [None] * len(features)
        with torch.no_grad():
            for index in batches(len(features), self.eval_batch_size):
                out = self.model(**self.collate([features[i] for i in index]))
                choice = torch.stack([x.argmax(-1) for x in out.logits], dim=-1).tolist()
                for row, i in enumerate(index):
                    states[i] = [
                        f"{slot}-{values[k]}"
                        for (slot, values), k in zip(slots, choice[row], strict=True)
                        if values[k] != NONE
                    ]
        return states

    def evaluate(self, examples: list[dict[str, Any]], features: list[dict[str, Any]]) -> dict[str, float]:
        preds = self.predict(features)
        gold = [ex["state"] for ex in examples]
        scores = metrics.wos_scores(preds, gold)
        items = [split_state(item) for state in gold for item in state]
        known = sum(1 for slot, value in items if value in self.ontology.get(slot, ()))
        scores["ontology_coverage"] = known / len(items) * 100.0 if items else 100.0
        return scores
