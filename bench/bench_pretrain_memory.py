"""Memory of a long-ish pretraining run: does the trainer's resident memory grow with the step count?

Trains a tiny RoBERTa for ``--steps`` steps on packed NSMC reviews (one rank, CPU, fp32, ZeRO 1, with
evaluations and a checkpoint as a real run has them) and reads the trainer process's current resident set
(``VmRSS`` from ``/proc``, not the peak) when its metrics line for each of ``--at`` steps appears. A leak
(kept loss tensors, batches, growing caches) shows as RSS rising between the later samples. Prints one
JSON object: RSS in MiB per sampled step, the growth between the first and last sample, the trainer's CPU
seconds and the machine's load average.

    python bench/bench_pretrain_memory.py --steps 300 --at 50 150 300
"""

from __future__ import annotations

import argparse
import json
import os
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
    p.add_argument("--steps", type=int, default=300, help="optimizer steps of the run")
    p.add_argument("--at", type=int, nargs="+", default=[50, 150, 300], help="steps at which to read RSS")
    p.add_argument("--reviews", type=int, default=5000, help="NSMC reviews to build data from")
    p.add_argument("--vocab-size", type=int, default=3000)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--masking", default="token", choices=["token", "eojeol"], help="masking mode")
    p.add_argument("--work", type=Path, help="scratch folder (default: a temporary one)")
    return p.parse_args(argv)


def rss_mib(pid: int) -> float:
    """Current resident set size of process ``pid`` in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        packed, tok = work / "packed", work / "tokenizer"
        if not (packed / "kplm_record.json").is_file():
            packed, tok = build_data(work, args)
        out = work / f"run_{time.time_ns()}"
        config = {
            "data": str(packed),
            "tokenizer": str(tok),
            "output": str(out),
            "model": {"arch": "roberta", "size": "tiny"},
            "seq_len": args.seq_len,
            "micro_batch_size": args.batch,
            "max_steps": args.steps,
            "warmup_steps": 10,
            "precision": "fp32",
            "zero_stage": 1,
            "masking": args.masking,
            "log_every": 10,
            "eval_every": 100,
            "eval_batches": 4,
            "save_every": args.steps,
        }
        path = work / "memory.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        env = dict(os.environ, WANDB_MODE="disabled", DS_ACCELERATOR="cpu", PYTHONUNBUFFERED="1")
        proc = subprocess.Popen(
            [sys.executable, "-m", "kplm.training.pretrain", "--config", str(path)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        wanted = {f"[kplm] step {s}/{args.steps} | loss": s for s in args.at}
        samples: dict[int, float] = {}
        cpu = 0.0
        assert proc.stdout is not None
        for line in proc.stdout:
            for prefix, step in wanted.items():
                if line.startswith(prefix):
                    samples[step] = round(rss_mib(proc.pid), 1)
                    cpu = cpu_seconds(proc.pid)
        if proc.wait() != 0:
            raise SystemExit(f"training failed with status {proc.returncode}")
    steps = sorted(samples)
    result = {
        "steps": args.steps,
        "rss_mib": {str(s): samples[s] for s in steps},
        "growth_mib": round(samples[steps[-1]] - samples[steps[0]], 1) if steps else None,
        "trainer_cpu_s": round(cpu, 1),
        "config": {k: config[k] for k in ("seq_len", "micro_batch_size", "zero_stage", "masking")},
        "loadavg": os.getloadavg()[0],
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
