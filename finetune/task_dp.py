"""KLUE-DP: dependency parsing of eojeol (words) with a biaffine arc scorer, KLUE-baseline style.

Each word is represented by the encoder's hidden states of its first and last subword, concatenated
(KLUE-baseline's word representation, without its POS embeddings and LSTM); the root is the ``[CLS]``
state. Two MLPs give each word a dependent and a head view; a biaffine product scores every (dependent,
head) pair (Dozat & Manning 2017) and a bilinear classifier over (dependent, head) views gives the
relation label — from the gold head in training, from the predicted head in evaluation. The head of a word
is the arg-max over the root and the other words (no tree constraint, as in KLUE-baseline's greedy
decoding). Scores: KLUE's UAS/LAS macro-F1 plus plain attachment accuracies (:func:`.metrics.dp_scores`).
Words are located by character offsets, so any fast tokenizer works.
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

LABELS = metrics.DP_LABELS


def _mlp(size_in: int, size_out: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(size_in, size_out), torch.nn.GELU(), torch.nn.Dropout(0.1))


class BiaffineParser(EncoderHead):
    """Encoder + biaffine arc scorer + bilinear relation classifier over first/last-subword word states."""

    kind = "klue-dp-biaffine"

    def __init__(self, encoder: Any, n_labels: int, arc_dim: int, label_dim: int) -> None:
        super().__init__(encoder, n_labels=n_labels, arc_dim=arc_dim, label_dim=label_dim)
        word = 2 * encoder.config.hidden_size
        self.arc_dep, self.arc_head = _mlp(word, arc_dim), _mlp(word, arc_dim)
        self.arc_weight = torch.nn.Parameter(torch.zeros(arc_dim, arc_dim))
        self.arc_bias = torch.nn.Linear(arc_dim, 1, bias=False)
        self.label_dep, self.label_head = _mlp(word, label_dim), _mlp(word, label_dim)
        self.label = torch.nn.Bilinear(label_dim, label_dim, n_labels)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        first: torch.Tensor,
        last: torch.Tensor,
        word_mask: torch.Tensor,
        heads: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> SimpleNamespace:
        """``first``/``last``: ``[batch, words]`` token index of each word's first/last subword;
        ``heads``: 0 = root, ``k`` = word ``k`` (1-based), -100 = ignore. Returns ``arc_logits``
        ``[batch, words, words + 1]``, ``label_logits`` ``[batch, words, labels]`` and ``loss``."""
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        size = hidden.size(-1)
        words = torch.cat(
            [
                hidden.gather(1, first.unsqueeze(-1).expand(-1, -1, size)),
                hidden.gather(1, last.unsqueeze(-1).expand(-1, -1, size)),
            ],
            dim=-1,
        )
        nodes = torch.cat([torch.cat([hidden[:, :1], hidden[:, :1]], dim=-1), words], dim=1)
        dep, head = self.arc_dep(words), self.arc_head(nodes)
        arc = torch.einsum("bia,ac,bjc->bij", dep, self.arc_weight, head) + self.arc_bias(head).transpose(
            1, 2
        )
        node_mask = torch.cat([torch.ones_like(word_mask[:, :1]), word_mask], dim=1).bool()
        n_words = words.size(1)
        self_loop = torch.zeros(n_words, n_words + 1, dtype=torch.bool, device=arc.device)
        self_loop[
            torch.arange(n_words, device=arc.device), torch.arange(1, n_words + 1, device=arc.device)
        ] = True
        arc = arc.masked_fill(~node_mask[:, None, :] | self_loop[None], -1e4)
        chosen = heads.clamp(min=0) if heads is not None else arc.argmax(-1)
        head_states = self.label_head(nodes).gather(
            1, chosen.unsqueeze(-1).expand(-1, -1, self.head_args["label_dim"])
        )
        label_logits = self.label(self.label_dep(words).contiguous(), head_states.contiguous())
        loss = None
        if heads is not None and labels is not None:
            cross = torch.nn.functional.cross_entropy
            loss = cross(arc.reshape(-1, n_words + 1), heads.reshape(-1), ignore_index=-100) + cross(
                label_logits.reshape(-1, label_logits.size(-1)), labels.reshape(-1), ignore_index=-100
            )
        return SimpleNamespace(loss=loss, arc_logits=arc, label_logits=label_logits)


def word_tokens(offsets: list, words: list[str]) -> tuple[list[int], list[int]]:
    """Token index of the first and last subword of each word of ``" ".join(words)`` (0 = none: the word
    was truncated away or produced no token)."""
    spans, position = [], 0
    for word in words:
        spans.append((position, position + len(word)))
        position += len(word) + 1
    first, last = [0] * len(words), [0] * len(words)
    w = 0
    for t, (start, end) in enumerate(offsets):
        if end <= start:
            continue
        while w < len(spans) and spans[w][1] <= start:
            w += 1
        if w == len(spans):
            break
        if start < spans[w][1] and end > spans[w][0]:
            if first[w] == 0:
                first[w] = t
            last[w] = t
    return first, last


class Task(TaskBase):
    """KLUE-DP with :class:`BiaffineParser`."""

    main_metric = "las_macro_f1"

    def load(self, folder: Path, train: list[dict[str, Any]]) -> None:
        from transformers import AutoModel, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        if not self.tokenizer.is_fast:
            raise KplmError(f"{folder}: KLUE-DP needs a fast tokenizer (tokenizer.json) for word offsets")
        encoder = AutoModel.from_pretrained(str(folder))
        hidden = encoder.config.hidden_size
        self.model = BiaffineParser(
            encoder, n_labels=len(LABELS), arc_dim=min(512, 2 * hidden), label_dim=min(256, hidden)
        )

    def encode(self, examples: list[dict[str, Any]], training: bool) -> list[dict[str, Any]]:
        out = []
        for ex in examples:
            unknown = [x for x in ex["labels"] if x not in LABELS]
            if unknown:
                raise KplmError(f"{ex['guid']}: unknown KLUE-DP relation {unknown[0]!r}")
            if any(h > len(ex["words"]) for h in ex["heads"]):
                raise KplmError(f"{ex['guid']}: a head points past the last word")
            enc = self.tokenizer(
                " ".join(ex["words"]),
                truncation=True,
                max_length=self.hp["max_length"],
                return_offsets_mapping=True,
            )
            first, last = word_tokens(enc["offset_mapping"], ex["words"])
            seen = [f > 0 for f in first]
            out.append(
                {
                    "input_ids": enc["input_ids"],
                    "attention_mask": enc["attention_mask"],
                    "first": first,
                    "last": last,
                    "word_mask": [1] * len(first),
                    "heads": [h if ok else -100 for h, ok in zip(ex["heads"], seen, strict=True)],
                    "labels": [
                        LABELS.index(x) if ok else -100 for x, ok in zip(ex["labels"], seen, strict=True)
                    ],
                }
            )
        return out

    _INPUTS = {"input_ids": None, "attention_mask": 0, "first": 0, "last": 0, "word_mask": 0}

    def collate(self, chunk: list[dict[str, Any]], with_gold: bool = True) -> dict[str, torch.Tensor]:
        pads = {**self._INPUTS, "input_ids": self.pad_id}
        if with_gold:
            pads.update({"heads": -100, "labels": -100})
        return self.batch(chunk, pads)

    def predict(self, features: list[dict[str, Any]]) -> tuple[list[list[int]], list[list[str]]]:
        """Predicted heads (0 = root, 1-based words) and relation labels of every sentence."""
        heads: list[Any] = [None] * len(features)
        labels: list[Any] = [None] * len(features)
        with torch.no_grad():
            for index in batches(len(features), self.eval_batch_size):
                out = self.model(**self.collate([features[i] for i in index], with_gold=False))
                arcs, types = out.arc_logits.argmax(-1), out.label_logits.argmax(-1)
                for row, i in enumerate(index):
                    n = len(features[i]["first"])
                    heads[i] = arcs[row, :n].tolist()
                    labels[i] = [LABELS[k] for k in types[row, :n].tolist()]
        return heads, labels

    def evaluate(self, examples: list[dict[str, Any]], features: list[dict[str, Any]]) -> dict[str, float]:
        heads, labels = self.predict(features)
        return metrics.dp_scores(
            [ex["heads"] for ex in examples], [ex["labels"] for ex in examples], heads, labels
        )
