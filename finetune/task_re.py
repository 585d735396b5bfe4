"""KLUE-RE: relation classification with entity markers, as in KLUE-baseline.

The subject and object spans are wrapped in the marker tokens ``<subj>``…``</subj>`` and ``<obj>``…``</obj>``
inside the sentence (:func:`mark_entities`); the markers are added to the tokenizer as special tokens (never
split) and the encoder's embedding matrix is resized for them. The relation is classified from the
concatenated hidden states of the ``<subj>`` and ``<obj>`` start markers ("entity start" pooling of
Baldini Soares et al. 2019) into KLUE-RE's 30 relations; a marker cut off by truncation falls back to
``[CLS]``. (KLUE-baseline classifies from ``[CLS]``; on small data the marker states learn much faster —
with ``[CLS]`` a tiny random encoder stayed at the class prior in this project's tests.) Scores: KLUE's
micro-F1 over all relations except ``no_relation`` and AUPRC over all 30 classes (:mod:`.metrics`). The
saved model is an :class:`~.heads.EncoderHead` folder: the encoder (with the marker embeddings) reloads
with ``AutoModel``, the whole classifier with :func:`~.heads.load_head_model`.
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

#: KLUE-RE relation classes in KLUE-baseline's order (``klue_baseline/data/klue_re.py``).
RE_LABELS = (
    "no_relation",
    "org:dissolved",
    "org:founded",
    "org:place_of_headquarters",
    "org:alternate_names",
    "org:member_of",
    "org:members",
    "org:political/religious_affiliation",
    "org:product",
    "org:founded_by",
    "org:top_members/employees",
    "org:number_of_employees/members",
    "per:date_of_birth",
    "per:date_of_death",
    "per:place_of_birth",
    "per:place_of_death",
    "per:place_of_residence",
    "per:origin",
    "per:employee_of",
    "per:schools_attended",
    "per:alternate_names",
    "per:parents",
    "per:children",
    "per:siblings",
    "per:spouse",
    "per:other_family",
    "per:colleagues",
    "per:product",
    "per:religion",
    "per:title",
)
MARKERS = ("<subj>", "</subj>", "<obj>", "</obj>")


def mark_entities(example: dict[str, Any]) -> str:
    """The sentence with ``<subj>``/``</subj>`` and ``<obj>``/``</obj>`` around the two entity spans
    (``end`` is inclusive, as in KLUE-RE). Inserted right to left so earlier offsets stay valid."""
    sentence = example["sentence"]
    subject, obj = example["subject"], example["object"]
    inserts = [
        (subject["start"], 1, " <subj> "),
        (subject["end"] + 1, 0, " </subj> "),
        (obj["start"], 1, " <obj> "),
        (obj["end"] + 1, 0, " </obj> "),
    ]
    # right to left; at one position the opening marker is inserted first so a closing one lands before it
    for position, _, marker in sorted(inserts, key=lambda x: (x[0], x[1]), reverse=True):
        sentence = sentence[:position] + marker + sentence[position:]
    return " ".join(sentence.split())


class RelationClassifier(EncoderHead):
    """Encoder + linear classifier over the ``<subj>`` and ``<obj>`` marker states, concatenated."""

    kind = "klue-re-entity-start"

    def __init__(self, encoder: Any, labels: list[str]) -> None:
        super().__init__(encoder, labels=labels)
        self.dropout = torch.nn.Dropout(0.1)
        self.classifier = torch.nn.Linear(2 * encoder.config.hidden_size, len(labels))

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        markers: torch.Tensor,
        labels: torch.Tensor | None = None,
    ) -> SimpleNamespace:
        """``markers``: ``[batch, 2]`` token positions of ``<subj>`` and ``<obj>``."""
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        states = hidden.gather(1, markers.unsqueeze(-1).expand(-1, -1, hidden.size(-1))).flatten(1)
        logits = self.classifier(self.dropout(states))
        loss = torch.nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return SimpleNamespace(loss=loss, logits=logits)


class Task(TaskBase):
    """KLUE-RE with entity markers and :class:`RelationClassifier`."""

    main_metric = "micro_f1"

    def load(self, folder: Path, train: list[dict[str, Any]]) -> None:
        from transformers import AutoModel, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self.tokenizer.add_tokens(list(MARKERS), special_tokens=True)
        encoder = AutoModel.from_pretrained(str(folder))
        encoder.resize_token_embeddings(len(self.tokenizer))
        self.model = RelationClassifier(encoder, list(RE_LABELS))

    @property
    def subj_id(self) -> int:
        return self.tokenizer.convert_tokens_to_ids("<subj>")

    @property
    def obj_id(self) -> int:
        return self.tokenizer.convert_tokens_to_ids("<obj>")

    def encode(self, examples: list[dict[str, Any]], training: bool) -> list[dict[str, Any]]:
        out = []
        for ex in examples:
            if ex["label"] not in RE_LABELS:
                raise KplmError(f"{ex['guid']}: unknown KLUE-RE label {ex['label']!r}")
            enc = self.tokenizer(mark_entities(ex), truncation=True, max_length=self.hp["max_length"])
            ids = enc["input_ids"]
            markers = [ids.index(m) if m in ids else 0 for m in (self.subj_id, self.obj_id)]
            out.append(
                {
                    "input_ids": ids,
                    "attention_mask": enc["attention_mask"],
                    "markers": markers,
                    "labels": RE_LABELS.index(ex["label"]),
                }
            )
        return out

    def collate(self, chunk: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        pads = {"input_ids": self.pad_id, "attention_mask": 0, "markers": 0, "labels": -100}
        return self.batch(chunk, pads)

    def probabilities(self, features: list[dict[str, Any]]) -> torch.Tensor:
        """Softmax over the 30 relations, ``[examples, 30]``."""
        rows: list[torch.Tensor] = [torch.empty(0)] * len(features)
        with torch.no_grad():
            for index in batches(len(features), self.eval_batch_size):
                chunk = [features[i] for i in index]
                batch = self.batch(chunk, {"input_ids": self.pad_id, "attention_mask": 0, "markers": 0})
                probs = self.model(**batch).logits.float().softmax(-1)
                for row, i in enumerate(index):
                    rows[i] = probs[row]
        return torch.stack(rows)

    def evaluate(self, examples: list[dict[str, Any]], features: list[dict[str, Any]]) -> dict[str, float]:
        probs = self.probabilities(features)
        preds = [RE_LABELS[i] for i in probs.argmax(-1).tolist()]
        gold = [ex["label"] for ex in examples]
        return {
            "micro_f1": metrics.re_micro_f1(preds, gold),
            "auprc": metrics.re_auprc(probs.tolist(), [RE_LABELS.index(g) for g in gold]),
        }
