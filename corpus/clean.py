"""The corpus cleaning stage: read → normalise → quality filters → [decontamination] → exact dedup →
[near dedup] → Parquet shards.

It runs as a few datatrove pipelines (see :func:`plan_stages`) under datatrove's local executor, sharded into
``tasks`` ranks (``files[rank::tasks]``) run by ``workers`` processes:

1. read, normalise, filter (all quality rules fused in one pass), optionally decontaminate, write the surviving
   documents per rank and hash them (``exact_dedup_v1``);
2. find duplicate hashes across all ranks;
3. drop the duplicates and write the final ``part-<rank>.parquet`` shards, or, with ``near_dedup``, compute
   MinHash signatures, then find LSH buckets, cluster, and drop near-duplicates (``minhash_dedup_v1``).

Every dropped document lands in ``excluded/<rule>/`` and every unreadable record in ``quarantine/``.
Datatrove's completion markers make each step resumable per rank; the work folder is keyed by the config
fingerprint, so a changed config never reuses stale partial work. When all is done the stage reconciles
``input = kept + dropped + quarantined`` exactly, writes ``clean_report.json``/``.md`` (with SVG charts) and
its record.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datatrove.data import Document
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup.exact_dedup import (
    ExactDedupConfig,
    ExactDedupFilter,
    ExactDedupSignature,
    ExactFindDedups,
)
from datatrove.pipeline.writers import ParquetWriter

from kplm.config import fingerprint
from kplm.corpus import decontaminate, filters, near_dedup
from kplm.corpus.normalize import DEFAULT_RULES, KNOWN_RULES, Normalizer
from kplm.corpus.readers import ShardFileReader, SourceReader, resolve_input_files
from kplm.corpus.report import reconcile, write_report
from kplm.corpus.sentences import MinSentenceChars
from kplm.corpus.shards import SCHEMA
from kplm.errors import KplmError
from kplm.records import is_complete, write_json_atomic, write_record

STAGE = "corpus.clean"


@dataclass(kw_only=True)
class CleanConfig:
    """Settings of the cleaning stage (the ``corpus:`` section of a run config)."""

    input: list[str] = field(
        metadata={"help": "source files or folders (.jsonl, .jsonl.gz, .txt, .parquet; local or fsspec URL)"}
    )
    output: Path = field(metadata={"help": "output folder for the cleaned Parquet shards and the report"})
    text_field: str = field(default="text", metadata={"help": "JSON/Parquet field holding the document text"})
    id_field: str = field(default="id", metadata={"help": "field holding the document id (else file:line)"})
    source: str | None = field(
        default=None,
        metadata={
            "help": "source name for all documents (else the record's 'source' field, else the file name)"
        },
    )
    txt_paragraphs: bool = field(
        default=False,
        metadata={"help": ".txt inputs: one document per blank-line separated paragraph (else per line)"},
    )
    normalize: list[str] = field(
        default_factory=lambda: list(DEFAULT_RULES),
        metadata={"help": f"normalisation rules in order ({', '.join(KNOWN_RULES)})"},
    )
    max_repeats: int = field(
        default=3, metadata={"help": "repeat_chars_v1: longest run of one repeated character kept"}
    )
    min_chars: int = field(default=10, metadata={"help": "min_chars_v1: minimum non-space characters"})
    max_chars: int = field(default=100_000, metadata={"help": "max_chars_v1: maximum characters"})
    min_hangul_ratio: float = field(
        default=0.4, metadata={"help": "hangul_ratio_v1: minimum share of Hangul in non-space characters"}
    )
    max_symbol_ratio: float = field(
        default=0.3, metadata={"help": "symbol_ratio_v1: maximum share of punctuation/symbols"}
    )
    max_repeated_lines: float = field(
        default=0.3, metadata={"help": "repeated_lines_v1: maximum share of repeated lines"}
    )
    max_digit_ratio: float = field(
        default=0.5, metadata={"help": "digit_ratio_v1: maximum share of decimal digits (1 = off)"}
    )
    max_url_email_ratio: float = field(
        default=0.5,
        metadata={
            "help": "url_email_ratio_v1: maximum share of URLs/e-mail addresses in the text (each counted "
            "as 20 characters)"
        },
    )
    max_repeated_ngrams: float = field(
        default=0.3,
        metadata={
            "help": "repeated_ngrams_v1: maximum share of characters in repeated character 10-grams "
            "(documents of 200+ characters; 1 = off)"
        },
    )
    min_sentence_chars: int = field(
        default=0,
        metadata={"help": "min_sentence_chars_v1: remove sentences shorter than this (0 = off)"},
    )
    min_sentence_sources: list[str] = field(
        default_factory=list,
        metadata={"help": "min_sentence_chars_v1: only for documents of these sources (empty = all)"},
    )
    dedup: bool = field(
        default=True, metadata={"help": "exact_dedup_v1: drop exact duplicates (whitespace/case-insensitive)"}
    )
    near_dedup: bool = field(
        default=False,
        metadata={"help": "minhash_dedup_v1: drop near-duplicates (MinHash/LSH over character n-grams)"},
    )
    near_dedup_ngram: int = field(default=5, metadata={"help": "minhash_dedup_v1: character n-gram size"})
    near_dedup_buckets: int = field(default=14, metadata={"help": "minhash_dedup_v1: LSH bands"})
    near_dedup_hashes_per_bucket: int = field(
        default=8, metadata={"help": "minhash_dedup_v1: hashes per LSH band"}
    )
    decontaminate: list[str] = field(
        default_factory=list,
        metadata={
            "help": "decontam_v1: benchmark files/folders whose texts must not appear in the corpus "
            "(e.g. ../shared/data/klue for the KLUE dev sets; empty = off)"
        },
    )
    decontam_ngram: int = field(
        default=25, metadata={"help": "decontam_v1: character n-gram size (spaces/punctuation removed)"}
    )
    tasks: int = field(
        default=1, metadata={"help": "number of shards (ranks) the input files are split into"}
    )
    workers: int = field(default=1, metadata={"help": "processes running the shards in parallel"})

    def __post_init__(self) -> None:
        if not self.input:
            raise ValueError("input: give at least one file or folder")
        for rule in self.normalize:
            if rule not in KNOWN_RULES:
                raise ValueError(f"normalize: unknown rule '{rule}' (known: {', '.join(KNOWN_RULES)})")
        for name in (
            "max_repeats",
            "min_chars",
            "min_sentence_chars",
            "max_chars",
            "tasks",
            "workers",
            "near_dedup_ngram",
            "near_dedup_buckets",
            "near_dedup_hashes_per_bucket",
            "decontam_ngram",
        ):
            if getattr(self, name) < (0 if name.startswith("min_") else 1):
                raise ValueError(f"{name}: must be positive, got {getattr(self, name)}")
        for name in (
            "min_hangul_ratio",
            "max_symbol_ratio",
            "max_repeated_lines",
            "max_digit_ratio",
            "max_url_email_ratio",
            "max_repeated_ngrams",
        ):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}: must be between 0 and 1, got {getattr(self, name)}")
        if self.min_chars > self.max_chars:
            raise ValueError(f"min_chars: {self.min_chars} is above max_chars {self.max_chars}")


def _row(writer: Any, doc: Document) -> dict[str, Any]:
    """Document → one row of the corpus shard schema."""
    metadata = dict(doc.metadata)
    source = str(metadata.pop("source", ""))
    metadata.pop("file_path", None)
    return {
        "id": str(doc.id),
        "text": doc.text,
        "source": source,
        "metadata": json.dumps(metadata, ensure_ascii=False, sort_keys=True),
    }


class ShardParquetWriter(ParquetWriter):
    """Datatrove's ParquetWriter for the corpus shard schema, without its per-document overhead.

    With a file name that depends only on the rank (the stage's case) the name is computed once per rank and
    the ``total`` stat is counted in bulk; datatrove's writer re-substitutes the name template twice and
    updates three stats per document, which cost more than the cleaning rules themselves.
    """

    name = "kplm shard writer"

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._rank_only = set(self.output_filename.get_identifiers()) <= {"rank"}
        self._names: dict[int, str] = {}
        self._written = 0

    def write(self, document: Document, rank: int = 0, **kwargs: Any) -> None:
        if not self._rank_only or kwargs:
            super().write(document, rank, **kwargs)
            return
        name = self._names.get(rank)
        if name is None:
            name = self._names[rank] = self._get_output_filename(document, rank)
        self._write(self.adapter(document), self._get_output_file_with_retry(name), name)
        self._written += 1

    def close(self) -> None:
        if self._written:
            self.stat_update("total", value=self._written)
            self._written = 0
        super().close()

    def run(self, data: Any, rank: int = 0, world_size: int = 1) -> Iterator[Document]:
        with self:
            for document in data:
                self.write(document, rank)
                yield document


def shard_writer(folder: Path, filename: str = "${rank}.parquet") -> ParquetWriter:
    """A writer of corpus shards (columns id, text, source, metadata) into ``folder``."""
    return ShardParquetWriter(
        str(folder),
        output_filename=filename,
        adapter=_row,
        schema=SCHEMA,
        compression="zstd",
        max_file_size=-1,
    )


def quality_filters(config: CleanConfig, excluded: Path) -> filters.QualityFilters:
    """The configured rules, in order, fused into one step; each drops into ``excluded/<rule>/``."""
    specs = [
        (filters.MinCharsFilter, config.min_chars),
        (filters.MaxCharsFilter, config.max_chars),
        (filters.HangulRatioFilter, config.min_hangul_ratio),
        (filters.SymbolRatioFilter, config.max_symbol_ratio),
        (filters.RepeatedLinesFilter, config.max_repeated_lines),
        (filters.DigitRatioFilter, config.max_digit_ratio),
        (filters.UrlEmailRatioFilter, config.max_url_email_ratio),
        (filters.RepeatedNgramsFilter, config.max_repeated_ngrams),
    ]
    return filters.QualityFilters(
        [cls(value, exclusion_writer=shard_writer(excluded / cls.rule)) for cls, value in specs]
    )


def input_fingerprint(config: CleanConfig, files: list[str]) -> str:
    """Config plus the identity (path, size, mtime) of every input (and benchmark) file."""
    import fsspec

    identity = []
    for path in files:
        fs, local = fsspec.core.url_to_fs(path)
        info = fs.info(local)
        identity.append([path, info.get("size"), str(info.get("mtime") or info.get("LastModified") or "")])
    return fingerprint(STAGE, config, identity)


def clean(config: CleanConfig) -> dict[str, Any]:
    """Run the cleaning stage; returns the counts (also written to ``clean_report.json``)."""
    started = time.time()
    files = resolve_input_files(config.input)
    bench_files = decontaminate.benchmark_files(config.decontaminate) if config.decontaminate else []
    fp = input_fingerprint(config, files + bench_files)
    out = Path(config.output)
    if is_complete(out, fp):
        return json.loads((out / "clean_report.json").read_text(encoding="utf-8"))
    work = out / "_work" / fp
    if not work.exists():  # a fresh start: clear what another config left; else resume this config's work
        _remove_outputs(out)
    (work / "counts").mkdir(parents=True, exist_ok=True)
    reader = SourceReader(
        files,
        output_folder=str(out),
        counts_folder=str(work / "counts"),
        text_field=config.text_field,
        id_field=config.id_field,
        source_name=config.source,
        txt_paragraphs=config.txt_paragraphs,
    )
    first = [
        reader,
        Normalizer(config.normalize, config.max_repeats),
    ]
    if config.min_sentence_chars:
        first.append(MinSentenceChars(config.min_sentence_chars, config.min_sentence_sources))
    first.append(quality_filters(config, out / "excluded"))
    if bench_files:
        exclusion = shard_writer(out / "excluded" / decontaminate.RULE)
        first.append(decontaminate.Decontaminate(bench_files, config.decontam_ngram, exclusion))
    for name, pipeline, tasks in plan_stages(config, first, work, out):
        run_executor(pipeline, work / "logs" / name, tasks=tasks, workers=min(config.workers, tasks))
    counts = reconcile(out, work / "counts")
    write_json_atomic(out / "clean_report.json", counts)
    write_report(out, counts)
    for scratch in ("filtered", "sigs", "dups", "exact", "mh_sigs", "mh_buckets", "mh_remove"):
        shutil.rmtree(work / scratch, ignore_errors=True)
    write_record(out, stage=STAGE, config=config, fingerprint=fp, counts=counts, started=started)
    return counts


def plan_stages(config: CleanConfig, first: list, work: Path, out: Path) -> list[tuple[str, list, int]]:
    """The datatrove pipelines to run in order, as ``(log name, steps, tasks)``.

    ``first`` (read, normalise, filter) runs per rank; exact dedup adds a global find-duplicates step and a
    per-rank filter step, near-dedup (MinHash) adds bucket, cluster and per-rank filter steps. Per-rank steps
    hand documents on through ``<work>/<step>/<rank>.parquet`` so every rank reads back exactly what it wrote.
    """
    ranks = config.tasks
    final = shard_writer(out, "part-${rank}.parquet")
    if not config.dedup and not config.near_dedup:
        return [("1_filter", [*first, final], ranks)]
    stages: list[tuple[str, list, int]] = []
    current = [*first, shard_writer(work / "filtered")]
    source = work / "filtered"
    if config.dedup:
        exact = ExactDedupConfig(content_getter=filters.dedup_key)
        stages.append(("1_filter", [*current, ExactDedupSignature(str(work / "sigs"), config=exact)], ranks))
        find = ExactFindDedups(str(work / "sigs"), str(work / "dups"), config=exact)
        stages.append(("2_find", [find], 1))
        exclusion = shard_writer(out / "excluded" / "exact_dedup_v1")
        current = [
            ShardFileReader(str(source)),
            ExactDedupFilter(str(work / "dups"), config=exact, exclusion_writer=exclusion),
        ]
        if not config.near_dedup:
            return [*stages, ("3_dedup", [*current, final], ranks)]
        current.append(shard_writer(work / "exact"))
        source = work / "exact"
    mh = near_dedup.minhash_config(
        config.near_dedup_buckets, config.near_dedup_hashes_per_bucket, config.near_dedup_ngram
    )
    sigs, buckets, remove = (str(work / name) for name in ("mh_sigs", "mh_buckets", "mh_remove"))
    stages.append(
        ("3_dedup" if config.dedup else "1_filter", [*current, near_dedup.signature_step(sigs, mh)], ranks)
    )
    stages.append(("4_mh_buckets", [near_dedup.bucket_step(sigs, buckets, mh)], mh.num_buckets))
    stages.append(("5_mh_cluster", [near_dedup.cluster_step(buckets, remove, mh)], 1))
    exclusion = shard_writer(out / "excluded" / near_dedup.RULE)
    last = [ShardFileReader(str(source)), near_dedup.filter_step(remove, exclusion), final]
    return [*stages, ("6_mh_filter", last, ranks)]


def run_executor(
    pipeline: list, logging_dir: Path, *, tasks: int, workers: int, what: str = "corpus cleaning"
) -> None:
    """Run a datatrove pipeline on the local executor, its logs kept in ``logging_dir``."""
    executor = LocalPipelineExecutor(
        pipeline=pipeline, tasks=tasks, workers=workers, logging_dir=str(logging_dir)
    )
    logging_dir.mkdir(parents=True, exist_ok=True)
    try:
        # datatrove logs each task and a stats table to stderr: keep them in the work folder instead.
        with stderr_to(logging_dir / "executor.log"):
            executor.run()
    except KplmError:
        raise
    except Exception as e:  # a worker failure surfaces here: name the log that has the traceback
        raise KplmError(f"{what} failed ({type(e).__name__}: {e}); see {logging_dir}/executor.log") from e


@contextlib.contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """Send file descriptor 2 (this process and the worker processes it starts) to ``path``."""
    sys.stderr.flush()
    saved = os.dup(2)
    with path.open("a") as log:
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def _remove_outputs(out: Path) -> None:
    """Delete what an earlier (different or unfinished) clean run wrote in ``out``; keeps other files."""
    for path in out.glob("part-*.parquet"):
        path.unlink()
    for name in ("excluded", "quarantine", "_work"):
        shutil.rmtree(out / name, ignore_errors=True)
    for name in (
        "clean_report.json",
        "clean_report.md",
        "clean_report_lengths.svg",
        "clean_report_drops.svg",
        "kplm_record.json",
    ):
        (out / name).unlink(missing_ok=True)
