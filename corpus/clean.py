"""The corpus cleaning stage: read → normalise → quality filters → exact dedup → Parquet shards.

It runs as three datatrove pipelines under datatrove's local executor, sharded into ``tasks`` ranks
(``files[rank::tasks]``) run by ``workers`` processes:

1. read, normalise, filter, write the surviving documents per rank, and hash them (``exact_dedup_v1``);
2. find duplicate hashes across all ranks;
3. drop the duplicates and write the final ``part-<rank>.parquet`` shards.

Datatrove's completion markers make each step resumable per rank; the work folder is keyed by the config
fingerprint, so a changed config never reuses stale partial work. When all is done the stage reconciles
``input = kept + dropped + quarantined`` exactly, writes ``clean_report.json``/``.md`` and its record.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
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
from kplm.corpus import filters
from kplm.corpus.normalize import DEFAULT_RULES, KNOWN_RULES, Normalizer
from kplm.corpus.readers import ShardFileReader, SourceReader, resolve_input_files
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
    dedup: bool = field(
        default=True, metadata={"help": "exact_dedup_v1: drop exact duplicates (whitespace/case-insensitive)"}
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
        for name in ("max_repeats", "min_chars", "max_chars", "tasks", "workers"):
            if getattr(self, name) < (0 if name == "min_chars" else 1):
                raise ValueError(f"{name}: must be positive, got {getattr(self, name)}")
        for name in ("min_hangul_ratio", "max_symbol_ratio", "max_repeated_lines"):
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


def shard_writer(folder: Path, filename: str = "${rank}.parquet") -> ParquetWriter:
    return ParquetWriter(
        str(folder),
        output_filename=filename,
        adapter=_row,
        schema=SCHEMA,
        compression="zstd",
        max_file_size=-1,
    )


def _filters(config: CleanConfig, excluded: Path) -> list[filters.KoreanFilter]:
    specs = [
        (filters.MinCharsFilter, config.min_chars),
        (filters.MaxCharsFilter, config.max_chars),
        (filters.HangulRatioFilter, config.min_hangul_ratio),
        (filters.SymbolRatioFilter, config.max_symbol_ratio),
        (filters.RepeatedLinesFilter, config.max_repeated_lines),
    ]
    return [cls(value, exclusion_writer=shard_writer(excluded / cls.rule)) for cls, value in specs]


def input_fingerprint(config: CleanConfig, files: list[str]) -> str:
    """Config plus the identity (path, size, mtime) of every input file."""
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
    fp = input_fingerprint(config, files)
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
    )
    dedup = ExactDedupConfig(content_getter=filters.dedup_key)
    first = [reader, Normalizer(config.normalize, config.max_repeats), *_filters(config, out / "excluded")]
    executor_args = {"tasks": config.tasks, "workers": min(config.workers, config.tasks)}
    if config.dedup:
        first += [shard_writer(work / "filtered"), ExactDedupSignature(str(work / "sigs"), config=dedup)]
        run_executor(first, work / "logs" / "1_filter", **executor_args)
        run_executor(
            [ExactFindDedups(str(work / "sigs"), str(work / "dups"), config=dedup)],
            work / "logs" / "2_find",
            tasks=1,
            workers=1,
        )
        last = [
            ShardFileReader(str(work / "filtered")),
            ExactDedupFilter(
                str(work / "dups"),
                config=dedup,
                exclusion_writer=shard_writer(out / "excluded" / "exact_dedup_v1"),
            ),
            shard_writer(out, "part-${rank}.parquet"),
        ]
        run_executor(last, work / "logs" / "3_dedup", **executor_args)
    else:
        run_executor(
            [*first, shard_writer(out, "part-${rank}.parquet")], work / "logs" / "1_filter", **executor_args
        )
    counts = reconcile(out, work / "counts")
    write_json_atomic(out / "clean_report.json", counts)
    (out / "clean_report.md").write_text(report_markdown(counts), encoding="utf-8")
    for scratch in ("filtered", "sigs", "dups"):
        shutil.rmtree(work / scratch, ignore_errors=True)
    write_record(out, stage=STAGE, config=config, fingerprint=fp, counts=counts, started=started)
    return counts


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
    for name in ("clean_report.json", "clean_report.md", "kplm_record.json"):
        (out / name).unlink(missing_ok=True)


def _rows(folder: Path, pattern: str = "*.parquet") -> tuple[int, Counter]:
    total, by_source = 0, Counter()
    for path in sorted(folder.glob(pattern)):
        table = pq.read_table(path, columns=["source"])
        total += table.num_rows
        by_source.update(table.column("source").to_pylist())
    return total, by_source


def reconcile(out: Path, counts_folder: Path) -> dict[str, Any]:
    """Count every input record's fate and check ``input = kept + dropped + quarantined``."""
    read = quarantined = 0
    for path in sorted(counts_folder.glob("read_*.json")):
        rank_counts = json.loads(path.read_text())
        read += rank_counts["read"]
        quarantined += rank_counts["quarantined"]
    quarantine_reasons: Counter = Counter()
    for path in sorted((out / "quarantine").glob("*.jsonl")):
        with path.open(encoding="utf-8") as f:
            quarantine_reasons.update(json.loads(line)["reason_code"] for line in f)
    dropped = {}
    for rule_dir in sorted((out / "excluded").glob("*")):
        n, _ = _rows(rule_dir)
        if n:
            dropped[rule_dir.name] = n
    kept, by_source = _rows(out, "part-*.parquet")
    counts = {
        "input": read + quarantined,
        "kept": kept,
        "dropped": sum(dropped.values()),
        "quarantined": quarantined,
        "dropped_by_rule": dropped,
        "quarantined_by_reason": dict(quarantine_reasons),
        "kept_by_source": dict(sorted(by_source.items())),
    }
    if counts["input"] != kept + counts["dropped"] + quarantined:
        raise RuntimeError(f"corpus accounting does not reconcile: {counts}")
    return counts


def report_markdown(counts: dict[str, Any]) -> str:
    """A human-readable summary of the cleaning counts."""
    lines = [
        "# Corpus cleaning report",
        "",
        f"input {counts['input']:,} = kept {counts['kept']:,} + dropped {counts['dropped']:,} + quarantined {counts['quarantined']:,}",
        "",
        "| drop reason | documents |",
        "|---|---:|",
    ]
    lines += [f"| {rule} | {n:,} |" for rule, n in counts["dropped_by_rule"].items()]
    lines += [f"| quarantine: {reason} | {n:,} |" for reason, n in counts["quarantined_by_reason"].items()]
    lines += ["", "| source | kept |", "|---|---:|"]
    lines += [f"| {source} | {n:,} |" for source, n in counts["kept_by_source"].items()]
    return "\n".join(lines) + "\n"
