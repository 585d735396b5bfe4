"""Benchmark the corpus cleaning stage on NSMC (712,404 real reviews): throughput, scaling, peak memory.

    python bench/bench_corpus_clean.py [--fraction 1.0] [--files 8]

Prints one JSON object. Each measured run is a fresh subprocess (``kplm corpus clean``) that prints its own peak RSS
(``ru_maxrss`` of itself and its workers), so peak RSS is per run. CPU seconds are the run's user+system time
including its reaped worker processes; on a shared machine ``docs_per_cpu_s`` is the figure to compare, the
wall-clock ones need a quiet machine (``load_average_*`` says how quiet it was). The input is first split into ``--files``
JSONL files so the stage can shard it; that split is not timed.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NSMC = Path(__file__).resolve().parents[2] / "shared" / "data" / "nsmc" / "reviews.jsonl.gz"


def split_input(folder: Path, files: int, fraction: float) -> int:
    """Write every 1/fraction-th NSMC line round-robin into ``files`` JSONL files; returns the line count."""
    folder.mkdir(parents=True, exist_ok=True)
    step = max(1, round(1 / fraction))
    n = 0
    with contextlib.ExitStack() as stack:
        outs = [
            stack.enter_context(open(folder / f"nsmc-{i:02d}.jsonl", "w", encoding="utf-8"))
            for i in range(files)
        ]
        f = stack.enter_context(gzip.open(NSMC, "rt", encoding="utf-8"))
        for i, line in enumerate(f):
            if i % step == 0:
                outs[n % files].write(line)
                n += 1
    return n


# Runs the CLI, then prints the peak RSS of this process (which runs the shards itself when workers=1).
_CHILD = """
import json, resource, sys
from kplm.cli import main
code = main(json.loads(sys.argv[1]))
print(max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code)
"""


def timed_clean(inputs: Path, output: Path, *extra: str) -> dict:
    """Run ``kplm corpus clean`` in a child process; wall time, the report's counts and peak RSS."""
    args = ["corpus", "clean", "--input", str(inputs), "--output", str(output), *extra]
    command = [sys.executable, "-c", _CHILD, json.dumps(args)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    child = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak_kb = int(child.stdout.strip().splitlines()[-1])  # this run's own peak, printed by _CHILD
    counts = json.loads((output / "clean_report.json").read_text())
    return {
        "seconds": round(seconds, 2),
        "cpu_seconds": round((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), 2),
        "peak_rss_mb": round(peak_kb / 1024, 1),
        "input": counts["input"],
        "kept": counts["kept"],
        "docs_per_s": round(counts["input"] / seconds),
        "docs_per_cpu_s": round(
            counts["input"] / max(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1e-9)
        ),
        "dropped_by_rule": counts["dropped_by_rule"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fraction", type=float, default=1.0, help="share of NSMC to use (1.0 = all)")
    parser.add_argument("--files", type=int, default=8, help="input files = shards")
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="interleaved 1- and 2-process runs; scaling uses the best of each",
    )
    parser.add_argument("--scaling-only", action="store_true", help="only the 1- vs 2-process comparison")
    args = parser.parse_args()
    load_at_start = os.getloadavg()
    if args.scaling_only:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            n = split_input(tmp / "in", args.files, args.fraction)
            shards = ["--tasks", str(args.files)]
            pairs = []
            for i in range(args.repeats):
                one = timed_clean(tmp / "in", tmp / f"b{i}", *shards, "--workers", "1")["seconds"]
                two = timed_clean(tmp / "in", tmp / f"c{i}", *shards, "--workers", "2")["seconds"]
                pairs.append({"one_proc_s": one, "two_proc_s": two, "ratio": round(one / two, 2)})
        best = min(p["one_proc_s"] for p in pairs) / min(p["two_proc_s"] for p in pairs)
        result = {
            "benchmark": "corpus_clean_scaling",
            "documents": n,
            "load_average_at_start": load_at_start,
            "load_average_at_end": os.getloadavg(),
            "runs": pairs,
            "scaling_2proc_vs_1proc_best_of": round(best, 2),
        }
        print(json.dumps(result, indent=2))
        return
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        n = split_input(tmp / "in", args.files, args.fraction)
        shards = ["--tasks", str(args.files)]
        no_dedup = timed_clean(tmp / "in", tmp / "a", *shards, "--workers", "1", "--no-dedup")
        one = timed_clean(tmp / "in", tmp / "b", *shards, "--workers", "1")
        near = timed_clean(tmp / "in", tmp / "e", *shards, "--workers", "1", "--near-dedup")
        sentences = timed_clean(tmp / "in", tmp / "f", *shards, "--workers", "1", "--sentence-dedup")
        two = timed_clean(tmp / "in", tmp / "c", *shards, "--workers", "2")
        sample_dir = tmp / "sample"
        split_input(sample_dir, args.files, args.fraction / 10)
        sample = timed_clean(sample_dir, tmp / "d", *shards, "--workers", "1")
    result = {
        "benchmark": "corpus_clean_nsmc",
        "documents": n,
        "cpu_count": os.cpu_count(),
        "load_average_at_start": load_at_start,
        "load_average_at_end": os.getloadavg(),
        "clean_without_dedup_1proc": no_dedup,
        "clean_with_dedup_1proc": one,
        "clean_with_dedup_2proc": two,
        "clean_with_dedup_and_near_dedup_1proc": near,
        "near_dedup_seconds": round(near["seconds"] - one["seconds"], 2),
        "clean_with_dedup_and_sentence_dedup_1proc": sentences,
        "clean_docs_per_s_per_core": no_dedup["docs_per_s"],
        "end_to_end_docs_per_s_per_core": one["docs_per_s"],
        "dedup_seconds": round(one["seconds"] - no_dedup["seconds"], 2),
        "scaling_2proc_vs_1proc": round(one["seconds"] / two["seconds"], 2),
        "sample_10pct_1proc": sample,
        "peak_rss_full_vs_10pct": round(one["peak_rss_mb"] / sample["peak_rss_mb"], 2),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
