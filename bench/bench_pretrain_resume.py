"""Resume cost of kplm pretraining at an early vs a late step (target: equal within 10%).

Trains a tiny RoBERTa to ``--late`` steps on packed NSMC reviews (one rank, CPU, fp32), checkpointing every
``--early`` steps; then resumes, in fresh run folders, from the ``--early`` and the ``--late`` checkpoint
and trains one more step. Reported per resume: the checkpoint load time (the trainer's "resumed … in X s"
line), the first resumed step's time (it includes fetching that step's batch: data position is a pure
function of the step, nothing is replayed) and the process wall time. Prints one JSON object.

    python bench/bench_pretrain_resume.py --early 20 --late 400
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pretrain_vs_hf import build_data  # noqa: E402 - the shared NSMC data builder


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--early", type=int, default=20, help="early checkpoint step (also the save interval)")
    p.add_argument("--late", type=int, default=400, help="late checkpoint step (a multiple of --early)")
    p.add_argument("--reviews", type=int, default=5000, help="NSMC reviews to build data from")
    p.add_argument("--vocab-size", type=int, default=3000)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--repeats", type=int, default=2, help="resumes per checkpoint (the minimum is reported)")
    p.add_argument("--work", type=Path, help="scratch folder (default: a temporary one)")
    return p.parse_args(argv)


def write_config(path: Path, data: Path, tok: Path, out: Path, args: argparse.Namespace, **over) -> Path:
    config = {
        "data": str(data),
        "tokenizer": str(tok),
        "output": str(out),
        "model": {"arch": "roberta", "size": "tiny"},
        "seq_len": args.seq_len,
        "micro_batch_size": args.batch,
        "max_steps": args.late,
        "warmup_steps": 2,
        "precision": "fp32",
        "zero_stage": 1,
        "log_every": 1,
        "eval_every": 10**6,
        "eval_batches": 1,
        "save_every": args.early,
        "keep_last": args.late // args.early + 1,
        **over,
    }
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def run(config: Path) -> tuple[str, float]:
    env = dict(os.environ, WANDB_MODE="disabled", DS_ACCELERATOR="cpu", PYTHONUNBUFFERED="1")
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "kplm.training.pretrain", "--config", str(config)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout, time.perf_counter() - started


def batch_fetch_s(data: Path, tok: Path, args: argparse.Namespace, step: int) -> float:
    """Seconds to build a fresh rank's first micro-batch of ``step`` (data position by arithmetic only)."""
    from kplm.training.data import Masker, PackedData
    from kplm.training.pack import load_tokenizer, read_meta

    ids = read_meta(data)["special_ids"]
    masker = Masker(mask_id=ids["mask"], special_ids=ids["all"], vocab_size=len(load_tokenizer(tok)))
    best = float("inf")
    for _ in range(5):
        packed = PackedData(data, seq_len=args.seq_len, micro_batch_size=args.batch, grad_accum=1,
                            world_size=1, rank=0, seed=42, masker=masker, pad_id=ids["pad"])  # fmt: skip
        started = time.perf_counter()
        packed.train_batch(step, 0)
        best = min(best, time.perf_counter() - started)
    return best


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.early < 1 or args.late <= args.early or args.late % args.early:
        raise SystemExit("--late must be a larger multiple of --early")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        data, tok = build_data(work, args)
        _, train_s = run(write_config(work / "train.yaml", data, tok, work / "train", args))
        results = {}
        for step in (args.early, args.late):
            best: dict[str, float] = {}
            for i in range(args.repeats):
                out = work / f"resume_{step}_{i}"
                tag = f"step_{step:08d}"
                shutil.copytree(work / "train" / "checkpoints" / tag, out / "checkpoints" / tag)
                stdout, wall = run(write_config(work / "r.yaml", data, tok, out, args, max_steps=step + 1))
                load = float(re.search(rf"resumed from \S+ at step {step} in ([\d.]+) s", stdout).group(1))
                first = json.loads((out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()[0])
                assert first["step"] == step + 1
                step_s = args.batch * args.seq_len / first["tokens_per_s"]
                sample = {"load_s": load, "first_step_s": step_s, "process_s": wall}
                best = {k: min(v, best.get(k, v)) for k, v in sample.items()}
            results[step] = {**best, "batch_fetch_s": batch_fetch_s(data, tok, args, step)}
        extreme = batch_fetch_s(data, tok, args, 10**7)
    early, late = results[args.early], results[args.late]
    print(
        json.dumps(
            {
                "bench": "pretrain_resume_cost",
                "early_step": args.early,
                "late_step": args.late,
                "train_s": round(train_s, 1),
                "early": {k: round(v, 5) for k, v in early.items()},
                "late": {k: round(v, 5) for k, v in late.items()},
                "late_over_early_load_plus_first_step": round(
                    (late["load_s"] + late["first_step_s"]) / (early["load_s"] + early["first_step_s"]), 3
                ),
                "late_over_early_process": round(late["process_s"] / early["process_s"], 3),
                "batch_fetch_s_at_step_1e7": round(extreme, 5),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
