"""The cleaning stage's accounting and report: exact reconciliation of every input record's fate
(``input = kept + dropped + quarantined``), ``clean_report.json`` and ``clean_report.md``."""

from __future__ import annotations

import bisect
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pyarrow.parquet as pq
from datatrove.data import Document
from datatrove.pipeline.base import PipelineStep

LENGTH_BINS = (0, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 100_000)
LENGTH_LABELS = [f"{a}-{b - 1}" for a, b in zip(LENGTH_BINS, LENGTH_BINS[1:], strict=False)] + [
    f"{LENGTH_BINS[-1]}+"
]


def _num_rows(folder: Path, pattern: str = "*.parquet") -> int:
    """Rows of the matching Parquet files, from their footers (no data pages read)."""
    return sum(pq.ParquetFile(path).metadata.num_rows for path in sorted(folder.glob(pattern)))


class KeptStats(PipelineStep):
    """Counts the documents of the last pipeline (the kept ones) by source and character-length bin, and
    writes them to ``<counts>/kept_<rank>.json`` when the rank ends, so the report sums small files instead of
    re-reading every kept text after the pipelines (serial work that held back multi-process scaling)."""

    name = "kplm kept stats"

    def __init__(self, counts_folder: str):
        super().__init__()
        self.counts_folder = counts_folder

    def run(self, data: Iterator[Document], rank: int = 0, world_size: int = 1) -> Iterator[Document]:
        by_source: Counter = Counter()
        lengths = [0] * len(LENGTH_BINS)
        for doc in data:
            by_source[str(doc.metadata.get("source", ""))] += 1  # as the shard writer stores it
            lengths[bisect.bisect_right(LENGTH_BINS, len(doc.text)) - 1] += 1
            yield doc
        stats = {"by_source": dict(by_source), "lengths": lengths}
        with fsspec.open(f"{self.counts_folder}/kept_{rank:05d}.json", "w") as f:
            json.dump(stats, f)


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
        n = _num_rows(rule_dir)
        if n:
            dropped[rule_dir.name] = n
    kept = _num_rows(out, "part-*.parquet")
    by_source: Counter = Counter()
    lengths = [0] * len(LENGTH_BINS)
    for path in sorted(counts_folder.glob("kept_*.json")):
        rank_stats = json.loads(path.read_text())
        by_source.update(rank_stats["by_source"])
        lengths = [a + b for a, b in zip(lengths, rank_stats["lengths"], strict=True)]
    if sum(lengths) != kept:
        raise RuntimeError(f"{out}: the part files hold {kept} documents, the ranks counted {sum(lengths)}")
    decontaminated: Counter = Counter()
    for path in sorted((out / "excluded" / "decontam_v1").glob("*.parquet")):
        for metadata in pq.read_table(path, columns=["metadata"]).column("metadata").to_pylist():
            decontaminated[json.loads(metadata).get("decontam_benchmark", "?")] += 1
    counts = {
        "input": read + quarantined,
        "kept": kept,
        "dropped": sum(dropped.values()),
        "quarantined": quarantined,
        "dropped_by_rule": dropped,
        "quarantined_by_reason": dict(quarantine_reasons),
        "kept_by_source": dict(sorted(by_source.items())),
    }
    sentence_counts: Counter = Counter()
    for path in sorted(counts_folder.glob("sentence_dedup_*.json")):
        sentence_counts.update(json.loads(path.read_text()))
    if sentence_counts:
        counts["sentence_dedup"] = dict(sorted(sentence_counts.items()))
    if decontaminated:
        counts["decontaminated_by_benchmark"] = dict(sorted(decontaminated.items()))
    counts["kept_length_histogram"] = dict(zip(LENGTH_LABELS, lengths, strict=True))
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
    if counts.get("sentence_dedup"):
        sd = counts["sentence_dedup"]
        lines += [
            "",
            f"sentence_dedup_v1: {sd['sentences_removed']:,} repeated sentences removed from "
            f"{sd['documents_changed']:,} documents ({sd['documents_emptied']:,} left empty and dropped)",
        ]
    if counts.get("decontaminated_by_benchmark"):
        lines += ["", "| benchmark overlapped (decontam_v1) | documents |", "|---|---:|"]
        lines += [f"| {name} | {n:,} |" for name, n in counts["decontaminated_by_benchmark"].items()]
    lines += ["", "| source | kept |", "|---|---:|"]
    lines += [f"| {source} | {n:,} |" for source, n in counts["kept_by_source"].items()]
    lines += ["", "| kept length (characters) | documents |", "|---|---:|"]
    lines += [f"| {bin_} | {n:,} |" for bin_, n in counts.get("kept_length_histogram", {}).items()]
    lines += ["", "![drop reasons](clean_report_drops.svg)", "", "![kept lengths](clean_report_lengths.svg)"]
    return "\n".join(lines) + "\n"


def bar_chart_svg(title: str, items: dict[str, int]) -> str:
    """A small self-contained horizontal bar chart (no plotting library needed)."""
    width, label_w, bar_w, row_h = 640, 190, 360, 22
    height = 40 + row_h * max(len(items), 1)
    top = max(items.values(), default=0) or 1
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        'font-size="12">',
        f'<text x="10" y="20" font-size="14" font-weight="bold">{_escape(title)}</text>',
    ]
    for i, (label, n) in enumerate(items.items()):
        y = 32 + i * row_h
        w = max(1, round(bar_w * n / top)) if n else 0
        parts += [
            f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{_escape(label)}</text>',
            f'<rect x="{label_w}" y="{y + 2}" width="{w}" height="{row_h - 6}" fill="#4c78a8"/>',
            f'<text x="{label_w + w + 6}" y="{y + 14}">{n:,}</text>',
        ]
    return "\n".join([*parts, "</svg>"]) + "\n"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_report(out: Path, counts: dict[str, Any]) -> None:
    """``clean_report.md`` plus its two charts (kept-length histogram, drop reasons) as SVG files."""
    (out / "clean_report_lengths.svg").write_text(
        bar_chart_svg("kept documents by length (characters)", counts["kept_length_histogram"]),
        encoding="utf-8",
    )
    fates = {
        **counts["dropped_by_rule"],
        **{f"quarantine: {k}": v for k, v in counts["quarantined_by_reason"].items()},
    }
    (out / "clean_report_drops.svg").write_text(
        bar_chart_svg("dropped / quarantined documents by reason", fates), encoding="utf-8"
    )
    (out / "clean_report.md").write_text(report_markdown(counts), encoding="utf-8")
