"""KLUE-MRC: extractive question answering with a doc stride over long contexts.

Each question is paired with its context and cut into windows of ``max_length`` tokens that overlap by
``doc_stride`` tokens (the fast tokenizer's ``return_overflowing_tokens`` + ``offset_mapping``). A window's
training target is the token span of the first gold answer when the answer lies wholly inside it, else the
``[CLS]`` position (0) — as for unanswerable questions (``is_impossible``). ``AutoModelForQuestionAnswering``
scores start and end positions. Post-processing (:func:`best_answer`) searches, over all windows of a
question, the ``n_best`` start and end candidates inside the context with ``end >= start`` and at most
``max_answer_length`` tokens; the best span's text is cut from the context by character offsets, and the
question is answered with the empty string when the ``[CLS]`` score beats every span (no answer). Scores:
KLUE's exact match and ROUGE-W (character LCCS F1) from :mod:`.metrics`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from kplm.errors import KplmError
from kplm.finetune import metrics
from kplm.finetune.loop import TaskBase, batches

MAX_QUESTION_TOKENS = 64  # KLUE-baseline's max_query_length


def best_answer(
    windows: list[dict[str, Any]],
    start_logits: list[np.ndarray],
    end_logits: list[np.ndarray],
    context: str,
    n_best: int,
    max_answer_length: int,
) -> str:
    """The answer text of one question from its windows' logits (empty string: no answer).

    ``windows[k]["offsets"]`` holds each token's ``(start, end)`` character range in ``context`` or
    ``None`` for question and special tokens.
    """
    null_score = min(float(s[0] + e[0]) for s, e in zip(start_logits, end_logits, strict=True))
    best_score, best_text = -np.inf, ""
    for window, starts, ends in zip(windows, start_logits, end_logits, strict=True):
        offsets = window["offsets"]
        for i in np.argsort(starts)[::-1][:n_best]:
            if i >= len(offsets) or offsets[i] is None:
                continue
            for j in np.argsort(ends)[::-1][:n_best]:
                if j >= len(offsets) or offsets[j] is None or j < i or j - i + 1 > max_answer_length:
                    continue
                score = float(starts[i] + ends[j])
                if score > best_score:
                    best_score, best_text = score, context[offsets[i][0] : offsets[j][1]]
    return best_text if best_score > null_score else ""


class Task(TaskBase):
    """KLUE-MRC span extraction; features are windows, ``example`` links each to its question."""

    main_metric = "exact_match"

    def load(self, folder: Path, train: list[dict[str, Any]]) -> None:
        from transformers import AutoModelForQuestionAnswering, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        if not self.tokenizer.is_fast:
            raise KplmError(f"{folder}: KLUE-MRC needs a fast tokenizer (tokenizer.json) for offsets")
        self.model = AutoModelForQuestionAnswering.from_pretrained(str(folder))

    @property
    def _segments(self) -> bool:
        """Whether the model has segment embeddings for the context (BERT: yes; kplm's RoBERTa: one type)."""
        return self.model is not None and getattr(self.model.config, "type_vocab_size", 1) > 1

    def _question(self, question: str) -> str:
        """The question cut after its first ``MAX_QUESTION_TOKENS`` tokens (KLUE-baseline's limit)."""
        enc = self.tokenizer(question, add_special_tokens=False, return_offsets_mapping=True)
        if len(enc["input_ids"]) <= MAX_QUESTION_TOKENS:
            return question
        return question[: enc["offset_mapping"][MAX_QUESTION_TOKENS - 1][1]]

    def encode(self, examples: list[dict[str, Any]], training: bool) -> list[dict[str, Any]]:
        max_length = self.hp["max_length"]
        features = []
        for n, ex in enumerate(examples):
            question = self._question(ex["question"])
            room = max_length - len(self.tokenizer(question)["input_ids"]) - 1
            stride = max(0, min(self.config.doc_stride, room // 2))
            enc = self.tokenizer(
                question,
                ex["context"],
                truncation="only_second",
                max_length=max_length,
                stride=stride,
                return_overflowing_tokens=True,
                return_offsets_mapping=True,
            )
            for k, ids in enumerate(enc["input_ids"]):
                sequence = enc.sequence_ids(k)
                offsets = [
                    tuple(o) if s == 1 else None
                    for o, s in zip(enc["offset_mapping"][k], sequence, strict=True)
                ]
                feature = {"input_ids": ids, "attention_mask": enc["attention_mask"][k], "example": n}
                if "token_type_ids" in enc and self._segments:
                    feature["token_type_ids"] = enc["token_type_ids"][k]
                if training:
                    feature["start_positions"], feature["end_positions"] = self._target(ex, offsets)
                else:
                    feature["offsets"] = offsets
                features.append(feature)
        return features

    @staticmethod
    def _target(example: dict[str, Any], offsets: list) -> tuple[int, int]:
        """Token start/end of the first answer in this window, ``(0, 0)`` (``[CLS]``) when it is not
        wholly inside the window or the question has no answer."""
        if example["is_impossible"] or not example["answers"]:
            return 0, 0
        start = example["answer_starts"][0]
        end = start + len(example["answers"][0])
        inside = [i for i, o in enumerate(offsets) if o is not None]
        if not inside or offsets[inside[0]][0] > start or offsets[inside[-1]][1] < end:
            return 0, 0
        first = next(i for i in inside if offsets[i][1] > start)
        last = next(i for i in reversed(inside) if offsets[i][0] < end)
        return first, last

    def _pads(self, chunk: list[dict[str, Any]]) -> dict[str, float]:
        pads: dict[str, float] = {"input_ids": self.pad_id, "attention_mask": 0}
        if "token_type_ids" in chunk[0]:
            pads["token_type_ids"] = 0
        return pads

    def collate(self, chunk: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        pads = {**self._pads(chunk), "start_positions": 0, "end_positions": 0}
        return self.batch(chunk, pads)

    def predict(self, examples: list[dict[str, Any]], features: list[dict[str, Any]]) -> list[str]:
        """One answer string per example (empty: predicted unanswerable)."""
        starts: list[Any] = [None] * len(features)
        ends: list[Any] = [None] * len(features)
        with torch.no_grad():
            for index in batches(len(features), self.eval_batch_size):
                chunk = [features[i] for i in index]
                out = self.model(**self.batch(chunk, self._pads(chunk)))
                for row, i in enumerate(index):
                    width = len(features[i]["input_ids"])
                    starts[i] = out.start_logits[row, :width].float().cpu().numpy()
                    ends[i] = out.end_logits[row, :width].float().cpu().numpy()
        per_example: dict[int, list[int]] = {}
        for i, f in enumerate(features):
            per_example.setdefault(f["example"], []).append(i)
        answers = []
        for n, ex in enumerate(examples):
            ids = per_example.get(n, [])
            if not ids:
                answers.append("")
                continue
            answers.append(
                best_answer(
                    [features[i] for i in ids],
                    [starts[i] for i in ids],
                    [ends[i] for i in ids],
                    ex["context"],
                    self.config.n_best,
                    self.config.max_answer_length,
                )
            )
        return answers

    def evaluate(self, examples: list[dict[str, Any]], features: list[dict[str, Any]]) -> dict[str, float]:
        preds = self.predict(examples, features)
        return metrics.mrc_scores(preds, [ex["answers"] for ex in examples])
