"""Sentence-level exact deduplication (``sentence_dedup_v1``): remove every sentence already seen earlier in
the corpus, keeping its first occurrence.

Sentences come from :func:`kplm.corpus.sentences.split_sentences`; a sentence's key is its text casefolded with
all whitespace removed (the same normalisation as document-level ``exact_dedup_v1``), hashed with 64-bit
BLAKE2b. Sentences whose key is shorter than ``min_chars`` characters are never removed, so short common
sentences (``감사합니다.``, ``네.``) survive.

"Earlier" is a global order that does not depend on the sharding: a document's position is (index of its input
file in the sorted input list, its line or row in that file, from the reader's ``origin``), a sentence's is its
document's position and its index in the document. So a 2-shard run removes exactly the sentences a 1-shard run
removes. Three datatrove steps, like datatrove's own exact dedup:

1. :class:`SentenceSignature` (per rank): write ``(hash, file, line, sentence, document)`` rows, split into hash
   buckets (``<bucket>/<rank>.npy``);
2. :class:`SentenceFindDuplicates` (one task per bucket, in parallel): sort a bucket's rows by hash and position;
   every row after the first of its hash is a duplicate, written per rank (``<bucket>/<rank>.npy``);
3. :class:`SentenceDedupFilter` (per rank): remove those sentences; a document left without text goes to
   ``excluded/sentence_dedup_v1/``. Per-rank counts (sentences removed, documents changed, documents emptied)
   are written for the report.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict

import numpy as np
from datatrove.data import DocumentsPipeline
from datatrove.io import get_datafolder
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.writers.disk_base import DiskWriter

from kplm.corpus.sentences import split_sentences

RULE = "sentence_dedup_v1"
SIG_DTYPE = np.dtype([("hash", "<u8"), ("file", "<u4"), ("line", "<u8"), ("sentence", "<u4"), ("doc", "<u4")])
REMOVE_DTYPE = np.dtype([("doc", "<u4"), ("sentence", "<u4")])
UNKNOWN_FILE = np.iinfo(np.uint32).max


def sentence_key(sentence: str) -> str:
    """The sentence casefolded with all whitespace removed."""
    return "".join(sentence.casefold().split())


def sentence_hash(key: str) -> int:
    """A stable 64-bit hash of a sentence key (the same in every process and on every machine)."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "little")


def remove_sentences(text: str, indices: set[int]) -> tuple[str, int]:
    """``text`` without the sentences at ``indices`` (numbered as :func:`split_sentences` numbers them); the
    remaining sentences of a line are joined by one space, lines stay lines. Returns the text and how many
    sentences were removed."""
    lines, index, removed = [], 0, 0
    for line in text.split("\n"):
        kept = []
        for sentence in split_sentences(line):
            if index in indices:
                removed += 1
            else:
                kept.append(sentence)
            index += 1
        if kept or not line.strip():
            lines.append(" ".join(kept))
    return "\n".join(lines).strip(), removed


def _position(origin: str, files: dict[str, int], doc_idx: int) -> tuple[int, int]:
    """(input file index, line or row) of a document from the reader's ``origin`` (``path:line`` or
    ``path:row N``); documents of unknown origin sort after all others, in stream order."""
    path, _, where = origin.rpartition(":")
    number = where.split()[-1] if where.strip() else ""
    if path in files and number.isdigit():
        return files[path], int(number)
    return UNKNOWN_FILE, doc_idx


class SentenceSignature(PipelineStep):
    """Stage 1: hash every long-enough sentence of every document, rows bucketed by hash."""

    type = "🫂 - DEDUP"
    name = "kplm sentence dedup signatures"

    def __init__(self, output_folder: str, files: list[str], min_chars: int, buckets: int):
        super().__init__()
        self.output_folder = get_datafolder(output_folder)
        self.files = files
        self.min_chars = min_chars
        self.buckets = buckets

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        files = {path: i for i, path in reversed(list(enumerate(self.files)))}  # first index of a path wins
        rows = []
        for doc_idx, doc in enumerate(data):
            file_idx, line = _position(str(doc.metadata.get("origin", "")), files, doc_idx)
            for sent_idx, sentence in enumerate(split_sentences(doc.text)):
                key = sentence_key(sentence)
                if len(key) >= self.min_chars:
                    rows.append((sentence_hash(key), file_idx, line, sent_idx, doc_idx))
            yield doc
        sigs = np.array(rows, dtype=SIG_DTYPE)
        self.stat_update("sentences_hashed", value=len(sigs))
        bucket_of = sigs["hash"] % np.uint64(self.buckets)
        for bucket in range(self.buckets):
            with self.output_folder.open(f"{bucket:04d}/{rank:05d}.npy", "wb") as f:
                np.save(f, sigs[bucket_of == bucket])


class SentenceFindDuplicates(PipelineStep):
    """Stage 2 (rank = bucket): every sentence after the first of its hash, in global position order."""

    type = "🫂 - DEDUP"
    name = "kplm sentence dedup find"

    def __init__(self, signature_folder: str, output_folder: str, ranks: int):
        super().__init__()
        self.signature_folder = get_datafolder(signature_folder)
        self.output_folder = get_datafolder(output_folder)
        self.ranks = ranks

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        parts, owners = [], []
        for source in range(self.ranks):
            path = f"{rank:04d}/{source:05d}.npy"
            if self.signature_folder.exists(path):
                with self.signature_folder.open(path, "rb") as f:
                    part = np.load(f)
                parts.append(part)
                owners.append(np.full(len(part), source, dtype=np.uint32))
        sigs = np.concatenate(parts) if parts else np.zeros(0, dtype=SIG_DTYPE)
        owner = np.concatenate(owners) if owners else np.zeros(0, dtype=np.uint32)
        order = np.lexsort((sigs["sentence"], sigs["line"], sigs["file"], sigs["hash"]))
        sigs, owner = sigs[order], owner[order]
        duplicate = np.zeros(len(sigs), dtype=bool)
        duplicate[1:] = sigs["hash"][1:] == sigs["hash"][:-1]
        self.stat_update("duplicate_sentences", value=int(duplicate.sum()))
        for target in range(self.ranks):
            chosen = sigs[duplicate & (owner == target)]
            out = np.empty(len(chosen), dtype=REMOVE_DTYPE)
            out["doc"], out["sentence"] = chosen["doc"], chosen["sentence"]
            with self.output_folder.open(f"{rank:04d}/{target:05d}.npy", "wb") as f:
                np.save(f, out)
        yield from ()


class SentenceDedupFilter(PipelineStep):
    """Stage 3: remove this rank's duplicate sentences; drop documents left empty (``sentence_dedup_v1``)."""

    type = "🫂 - DEDUP"
    name = "kplm sentence dedup filter"

    def __init__(
        self,
        remove_folder: str,
        buckets: int,
        counts_folder: str,
        exclusion_writer: DiskWriter | None = None,
    ):
        super().__init__()
        self.remove_folder = get_datafolder(remove_folder)
        self.counts_folder = get_datafolder(counts_folder)
        self.buckets = buckets
        self.exclusion_writer = exclusion_writer

    def _removals(self, rank: int) -> dict[int, set[int]]:
        removals: dict[int, set[int]] = defaultdict(set)
        for bucket in range(self.buckets):
            path = f"{bucket:04d}/{rank:05d}.npy"
            if self.remove_folder.exists(path):
                with self.remove_folder.open(path, "rb") as f:
                    rows = np.load(f)
                for doc, sentence in zip(rows["doc"].tolist(), rows["sentence"].tolist(), strict=True):
                    removals[doc].add(sentence)
        return removals

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        removals = self._removals(rank)
        counts = {"sentences_removed": 0, "documents_changed": 0, "documents_emptied": 0}
        writer = self.exclusion_writer
        with writer if writer is not None else _nothing():
            for doc_idx, doc in enumerate(data):
                indices = removals.get(doc_idx)
                if not indices:
                    yield doc
                    continue
                text, removed = remove_sentences(doc.text, indices)
                counts["sentences_removed"] += removed
                counts["documents_changed"] += 1
                if text:
                    doc.text = text
                    yield doc
                    continue
                counts["documents_emptied"] += 1
                self.stat_update(f"dropped_{RULE}")
                if writer is not None:
                    doc.metadata["filter_reason"] = RULE
                    writer.write(doc, rank)
        self.stat_update("sentences_removed", value=counts["sentences_removed"])
        with self.counts_folder.open(f"sentence_dedup_{rank:05d}.json", "w") as f:
            json.dump(counts, f)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
