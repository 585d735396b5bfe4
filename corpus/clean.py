"""The corpus cleaning stage: read → normalise → quality filters → [decontamination] → [exact dedup] →
[sentence dedup] → [near dedup] → Parquet shards.

It runs as a chain of datatrove pipelines (see :func:`plan_stages`), sharded into ``tasks`` ranks
(``files[rank::tasks]``), on the executor the config names (:mod:`kplm.corpus.executors`: local processes,
Slurm job arrays or Ray):

1. read, normalise, filter (all quality rules fused in one pass), optionally decontaminate; per rank;
2. each enabled dedup phase: per-rank signatures (documents handed on through ``<work>/in_<phase>/``), global
   duplicate finding (exact and sentence dedup: one task per hash bucket, in parallel; MinHash: LSH buckets,
   then clustering), then a per-rank filter that feeds the next phase;
3. write the final ``part-<rank>.parquet`` shards.

Every dropped document lands in ``excluded/<rule>/`` and every unreadable record in ``quarantine/``.
Datatrove's completion markers make each step resumable per rank; the work folder is keyed by the config
fingerprint, so a changed config never reuses stale partial work. When all is done the stage reconciles
``input = kept + dropped + quarantined`` exactly, writes ``clean_report.json``/``.md`` (with SVG charts) and
its record.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from datatrove.data import Document
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.dedup.exact_dedup import ExactDedupConfig, ExactFindDedups

from kplm.config import fingerprint, to_dict
from kplm.corpus import decontaminate, filters, near_dedup, sentence_dedup
from kplm.corpus.exact_dedup import FastExactDedupFilter, FastExactDedupSignature
from kplm.corpus.executors import ExecutorSettings, run_chain, run_executor, stderr_to
from kplm.corpus.normalize import DEFAULT_RULES, KNOWN_RULES, Normalizer
from kplm.corpus.readers import ShardFileReader, SourceReader, resolve_input_files
from kplm.corpus.report import KeptStats, reconcile, write_report
from kplm.corpus.sentences import MinSentenceChars
from kplm.corpus.shard_writer import shard_writer
from kplm.records import (
    content_digests,
    content_identity,
    is_complete,
    previous_inputs,
    write_json_atomic,
    write_record,
)

STAGE = "corpus.clean"
# run_executor and shard_writer are imported from here by the pipeline's PII stage and the benchmarks
__all__ = ["CleanConfig", "clean", "plan_stages", "run_executor", "shard_writer", "stderr_to"]


@dataclass(kw_only=True)
class CleanConfig(ExecutorSettings):
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
    sentence_dedup: bool = field(
        default=False,
        metadata={"help": "sentence_dedup_v1: remove sentences seen earlier in the corpus (first one kept)"},
    )
    sentence_dedup_min_chars: int = field(
        default=20,
        metadata={
            "help": "sentence_dedup_v1: only sentences of at least this many non-space characters are removed"
        },
    )
    dedup_buckets: int = field(
        default=0,
        metadata={
            "help": "exact and sentence dedup: hash buckets searched for duplicates in parallel "
            "(0 = one per task, at most 64)"
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
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
            "sentence_dedup_min_chars",
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
        if self.dedup_buckets < 0:
            raise ValueError(f"dedup_buckets: must be 0 (one per task) or positive, got {self.dedup_buckets}")
        if self.min_chars > self.max_chars:
            raise ValueError(f"min_chars: {self.min_chars} is above max_chars {self.max_chars}")


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


EXECUTION_ONLY = frozenset(f.name for f in fields(ExecutorSettings)) - {"tasks"}


def input_fingerprint(
    config: CleanConfig, files: list[str], previous: dict[str, Any] | None = None
) -> tuple[str, dict[str, list]]:
    """Config plus the identity (path, size, content digest) of every input (and benchmark) file; returns the
    fingerprint and the files' :func:`~kplm.records.content_digests` (``previous``: an earlier record's).

    How the pipelines are executed (local/slurm/ray, workers, cluster settings) does not change the output, so
    it is left out: a run started on one executor resumes on another. Modification times are left out too: a
    remounted or re-copied input is the same input."""
    digests = content_digests(files, previous)
    settings = {k: v for k, v in to_dict(config).items() if k not in EXECUTION_ONLY}
    return fingerprint(STAGE, settings, content_identity(digests)), digests


def clean(config: CleanConfig) -> dict[str, Any]:
    """Run the cleaning stage; returns the counts (also written to ``clean_report.json``).

    With ``executor: slurm`` the stage is submitted as a chain of job arrays and this returns
    ``{"status": "submitted", "jobs": ...}``; the last job writes the report and the record, and calling
    ``clean`` again once it finished returns the counts."""
    started = time.time()
    files = resolve_input_files(config.input)
    bench_files = decontaminate.benchmark_files(config.decontaminate) if config.decontaminate else []
    out = Path(config.output)
    fp, digests = input_fingerprint(config, files + bench_files, previous_inputs(out))
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
    stages = plan_stages(config, first, work, out, files)
    if config.executor == "slurm":  # the report is written by a last job, after all the others
        stages.append(("9_report", [FinishClean(config, str(out), str(work), fp, started, digests)], 1))
    submitted = run_chain(stages, work / "logs", config)
    if submitted is not None:
        return submitted
    return finish(config, out, work, fp, started, digests)


def finish(
    config: CleanConfig,
    out: Path,
    work: Path,
    fp: str,
    started: float,
    digests: dict[str, list] | None = None,
) -> dict[str, Any]:
    """Reconcile the counts, write the report and the record, remove the scratch files; returns the counts."""
    counts = reconcile(out, work / "counts")
    write_json_atomic(out / "clean_report.json", counts)
    write_report(out, counts)
    for scratch in work.iterdir():
        if scratch.is_dir() and scratch.name not in ("logs", "counts"):
            shutil.rmtree(scratch, ignore_errors=True)
    write_record(
        out, stage=STAGE, config=config, fingerprint=fp, counts=counts, started=started, inputs=digests
    )
    return counts


class FinishClean(PipelineStep):
    """The last Slurm job of the stage: :func:`finish` (reconcile, report, record)."""

    name = "kplm clean report"

    def __init__(
        self, config: CleanConfig, out: str, work: str, fp: str, started: float, digests: dict[str, list]
    ):
        super().__init__()
        self.config, self.out, self.work, self.fp, self.started = config, out, work, fp, started
        self.digests = digests

    def run(self, data: Any = None, rank: int = 0, world_size: int = 1) -> Iterator[Document]:
        finish(self.config, Path(self.out), Path(self.work), self.fp, self.started, self.digests)
        yield from ()


def plan_stages(
    config: CleanConfig, first: list, work: Path, out: Path, files: list[str] | None = None
) -> list[tuple[str, list, int]]:
    """The datatrove pipelines to run in order, as ``(log name, steps, tasks)``.

    ``first`` (read, normalise, filter) runs per rank. Each enabled dedup phase (exact documents, sentences,
    MinHash near-duplicates, in that order) ends the per-rank pipeline before it with a hand-off writer
    (``<work>/in_<phase>/<rank>.parquet``) and its signature step, runs its global steps (exact and sentence
    dedup: one task per hash bucket, in parallel), then starts the next per-rank pipeline by reading the
    hand-off back (so every rank reads exactly what it wrote) through the phase's filter.
    """
    ranks = config.tasks
    buckets = config.dedup_buckets or min(ranks, 64)
    phases: list[tuple[str, Any, list[tuple[str, list, int]], Any]] = []
    if config.dedup:
        exact = ExactDedupConfig(content_getter=filters.dedup_key)
        sigs, dups = str(work / "exact_sigs"), str(work / "exact_dups")
        phases.append(
            (
                "exact",
                FastExactDedupSignature(sigs, config=exact, finder_workers=buckets),
                [("find", [ExactFindDedups(sigs, dups, config=exact)], buckets)],
                FastExactDedupFilter(
                    dups, config=exact, exclusion_writer=shard_writer(out / "excluded" / "exact_dedup_v1")
                ),
            )
        )
    if config.sentence_dedup:
        sigs, dups = str(work / "sent_sigs"), str(work / "sent_dups")
        phases.append(
            (
                "sentences",
                sentence_dedup.SentenceSignature(sigs, files or [], config.sentence_dedup_min_chars, buckets),
                [("find", [sentence_dedup.SentenceFindDuplicates(sigs, dups, ranks)], buckets)],
                sentence_dedup.SentenceDedupFilter(
                    dups, buckets, str(work / "counts"), shard_writer(out / "excluded" / sentence_dedup.RULE)
                ),
            )
        )
    if config.near_dedup:
        mh = near_dedup.minhash_config(
            config.near_dedup_buckets, config.near_dedup_hashes_per_bucket, config.near_dedup_ngram
        )
        sigs, lsh, remove = (str(work / name) for name in ("mh_sigs", "mh_buckets", "mh_remove"))
        phases.append(
            (
                "minhash",
                near_dedup.signature_step(sigs, mh),
                [
                    ("buckets", [near_dedup.bucket_step(sigs, lsh, mh)], mh.num_buckets),
                    ("cluster", [near_dedup.cluster_step(lsh, remove, mh)], 1),
                ],
                near_dedup.filter_step(remove, shard_writer(out / "excluded" / near_dedup.RULE)),
            )
        )
    stages: list[tuple[str, list, int]] = []
    current = list(first)
    for phase, signature, global_steps, filter_step in phases:
        handoff = work / f"in_{phase}"
        stages.append(
            (f"{len(stages) + 1}_{phase}_signatures", [*current, shard_writer(handoff), signature], ranks)
        )
        stages += [
            (f"{len(stages) + i + 1}_{phase}_{name}", steps, n)
            for i, (name, steps, n) in enumerate(global_steps)
        ]
        current = [ShardFileReader(str(handoff)), filter_step]
    final = [*current, KeptStats(str(work / "counts")), shard_writer(out, "part-${rank}.parquet")]
    stages.append((f"{len(stages) + 1}_write", final, ranks))
    return stages


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
