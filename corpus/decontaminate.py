"""Benchmark decontamination (``decontam_v1``): drop documents that share a long character n-gram with
benchmark data (KLUE dev sets by default), in the spirit of GPT-3's 13-gram overlap rule.

Korean spacing is unreliable, so both sides are compared as character n-grams of the casefolded text with
whitespace, punctuation and symbols removed; the default ``n = 25`` is about 8 eojeol, long enough that a
shared n-gram is a copied sentence, not a common phrase. Benchmark texts come from JSON/JSONL (every string
value), TSV in KLUE's ``## <id>\\t<sentence>`` layout (NER ``<entity:TAG>`` markup removed) or plain text (one
per line); texts shorter than ``n`` cannot be matched and are counted as such in the report. A dropped document
goes to ``excluded/decontam_v1/`` with the benchmark file it overlapped in ``decontam_benchmark``.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterator
from typing import Any

import fsspec
from datatrove.data import DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.writers.disk_base import DiskWriter

from kplm.corpus.readers import resolve_input_files
from kplm.errors import KplmError

RULE = "decontam_v1"
_NOT_WORD = re.compile(r"[\W_]+")
_HANGUL = re.compile("[\uac00-\ud7a3]")
_NER_MARKUP = re.compile(r"<([^<>:]+):[A-Z]{2,3}>")
BENCHMARK_SUFFIXES = (".json", ".jsonl", ".tsv", ".txt")


def squeeze(text: str) -> str:
    """Casefold and remove whitespace, punctuation and symbols."""
    return _NOT_WORD.sub("", text.casefold())


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def benchmark_texts(path: str) -> Iterator[str]:
    """The texts of one benchmark file (see the module docstring for the formats)."""
    with fsspec.open(path, "r", encoding="utf-8") as f:
        if path.endswith(".json"):
            try:
                yield from _strings(json.load(f))
            except json.JSONDecodeError as e:
                raise KplmError(f"{path}: invalid JSON benchmark file ({e.msg}, line {e.lineno})") from None
            return
        for line_no, line in enumerate(f, 1):
            if path.endswith(".jsonl"):
                if line.strip():
                    try:
                        yield from _strings(json.loads(line))
                    except json.JSONDecodeError as e:
                        raise KplmError(f"{path}:{line_no}: invalid JSON ({e.msg})") from None
            elif path.endswith(".tsv"):
                if line.startswith("## ") and "\t" in line:
                    yield _NER_MARKUP.sub(r"\1", line.split("\t", 1)[1])
            else:
                yield line


def benchmark_files(paths: list[str]) -> list[str]:
    """Expand benchmark files and folders (the folder's .json/.jsonl/.tsv/.txt files)."""
    files = []
    for item in paths:
        fs, local = fsspec.core.url_to_fs(item)
        if not fs.exists(local):
            raise KplmError(f"decontamination benchmark not found: {item}")
        if fs.isdir(local):
            found = sorted(p for p in fs.find(local) if p.endswith(BENCHMARK_SUFFIXES))
            if not found:
                raise KplmError(
                    f"{item}: no benchmark files ({', '.join(BENCHMARK_SUFFIXES)}) in this folder"
                )
            files.extend(found)
        elif item.endswith(BENCHMARK_SUFFIXES):
            files.append(item)
        else:
            resolve_input_files([item])  # raises the usual unsupported-format error
    return files


def build_index(files: list[str], n: int) -> tuple[dict[int, int], dict[str, dict[str, int]]]:
    """Map the hash of every benchmark character n-gram to the index of its file; plus per-file counts of
    texts indexed and Korean texts too short to index."""
    index: dict[int, int] = {}
    stats: dict[str, dict[str, int]] = {}
    for file_no, path in enumerate(files):
        counts = {"texts": 0, "too_short": 0}
        for text in benchmark_texts(path):
            chars = squeeze(text)
            if len(chars) < n:
                counts["too_short"] += bool(_HANGUL.search(chars))  # labels and ids are not texts
                continue
            counts["texts"] += 1
            for i in range(len(chars) - n + 1):
                index.setdefault(hash(chars[i : i + n]), file_no)
        stats[posixpath.basename(path)] = counts
    return index, stats


class Decontaminate(PipelineStep):
    """Drop documents sharing a character ``n``-gram with the benchmark files (``decontam_v1``).

    The n-gram index is built inside each worker on first use (Python's string hash is per process)."""

    type = "🔻 - FILTER"
    name = "kplm decontamination"

    def __init__(self, files: list[str], n: int = 25, exclusion_writer: DiskWriter | None = None):
        super().__init__()
        self.files = files
        self.n = n
        self.exclusion_writer = exclusion_writer

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        index, _ = build_index(self.files, self.n)
        names = [posixpath.basename(p) for p in self.files]
        n = self.n
        with self.exclusion_writer or _NoWriter() as writer:
            for doc in data:
                chars = squeeze(doc.text)
                match = next(
                    (
                        index[h]
                        for h in (hash(chars[i : i + n]) for i in range(len(chars) - n + 1))
                        if h in index
                    ),
                    None,
                )
                if match is None:
                    yield doc
                    continue
                self.stat_update(f"dropped_{RULE}")
                doc.metadata["filter_reason"] = RULE
                doc.metadata["decontam_benchmark"] = names[match]
                writer.write(doc, rank)


class _NoWriter:
    def __enter__(self) -> _NoWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def write(self, doc: object, rank: int) -> None:
        return None
