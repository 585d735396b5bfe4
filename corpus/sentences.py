"""Korean sentence segmentation by a small measured rule set, and the per-source minimum sentence length rule.

:func:`split_sentences` cuts after sentence-final punctuation (``. ! ? …`` and their full-width forms, with
closing quotes/brackets kept on the sentence) when whitespace follows, and at line breaks; a period between
digits (``3.5``) or after a single Latin capital (``J. K.``) is not a boundary. Measured on the KLUE DP dev
sentences joined into paragraphs (``tests/test_corpus_rules.py``), it recovers the gold boundaries at the
rate asserted there. A maintained library such as kss splits unpunctuated chat text better; this rule set
needs no model and runs at regex speed.

``min_sentence_chars_v1`` (a normalisation-stage formatter): for documents of the configured sources, remove
sentences shorter than ``min_chars`` characters (KLUE kept only long sentences from web and news sources).
"""

from __future__ import annotations

import re

from datatrove.data import DocumentsPipeline
from datatrove.pipeline.base import PipelineStep

RULE = "min_sentence_chars_v1"
_BOUNDARY = re.compile(
    r"(?<![0-9])(?<!\b[A-Z])([.!?…。！？]+[\"'”’)\]」』]*)(?=\s)"  # punctuation, closers, then whitespace
)


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences (stripped, non-empty); see the module docstring for the rules."""
    sentences: list[str] = []
    for line in text.split("\n"):
        start = 0
        for match in _BOUNDARY.finditer(line):
            piece = line[start : match.end()].strip()
            if piece:
                sentences.append(piece)
            start = match.end()
        rest = line[start:].strip()
        if rest:
            sentences.append(rest)
    return sentences


class MinSentenceChars(PipelineStep):
    """``min_sentence_chars_v1``: drop sentences shorter than ``min_chars`` from documents whose source is in
    ``sources`` (all sources when empty); lines are kept as lines. Stats: documents changed, sentences
    removed."""

    type = "✂️ - FORMAT"
    name = "kplm min sentence chars"

    def __init__(self, min_chars: int, sources: list[str] | None = None):
        super().__init__()
        self.min_chars = min_chars
        self.sources = set(sources or [])

    def apply(self, text: str) -> tuple[str, int]:
        """The text without its short sentences, and how many were removed."""
        removed = 0
        lines = []
        for line in text.split("\n"):
            kept = [s for s in split_sentences(line) if len(s) >= self.min_chars]
            removed += len(split_sentences(line)) - len(kept)
            if kept or not line.strip():
                lines.append(" ".join(kept))
        return "\n".join(lines).strip(), removed

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        changed = removed_total = 0
        for doc in data:
            if not self.sources or doc.metadata.get("source") in self.sources:
                text, removed = self.apply(doc.text)
                if removed:
                    changed += 1
                    removed_total += removed
                    doc.text = text
            yield doc
        if changed:
            self.stat_update(f"changed_{RULE}", value=changed)
            self.stat_update("sentences_removed", value=removed_total)
