"""GPU pretraining throughput and MFU of kplm: BERT-base, bf16, sequence length 512 (target ≥ 50% MFU).

Builds a WordPiece tokenizer and packed sequences from NSMC reviews (``--vocab-size``, default 32000 as
KLUE), runs ``deepspeed --num_gpus N launch/pretrain.py`` for ``--steps`` steps and reports the mean
tokens/s and MFU of the step lines after ``--warmup`` steps (MFU uses the trainer's FLOPs per token and
the GPU's bf16 peak from ``kplm.training.engine.GPU_PEAK_TFLOPS``, or ``--peak-tflops``). Prints one JSON
object. On a CPU machine it runs too (``--size tiny --precision fp32 --peak-tflops 1``) as a smoke test.

    python bench/bench_pretrain_gpu.py                         # 1 GPU, BERT-base bf16 seq 512, micro 32
    python bench/bench_pretrain_gpu.py --gpus 8 --micro-batch 64
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pretrain_vs_hf import REPO, build_data  # noqa: E402 - the shared NSMC data builder


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpus", type=int, default=1, help="ranks on this machine (deepspeed --num_gpus)")
    p.add_argument("--arch", choices=("bert", "roberta"), default="bert")
    p.add_argument("--size", default="base", help="kplm size preset")
    p.add_argument("--precision", choices=("bf16", "fp16", "fp32"), default="bf16")
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--micro-batch", type=int, default=32, help="sequences per rank per step")
    p.add_argument("--zero-stage", type=int, default=1)
    p.add_argument("--gradient-checkpointing", action="store_true")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=10, help="first steps left out of the figures")
    p.add_argument("--peak-tflops", type=float, help="per-device peak (default: known GPU table)")
    p.add_argument("--reviews", type=int, default=100000, help="NSMC reviews to build data from")
    p.add_argument("--vocab-size", type=int, default=32000)
    p.add_argument("--work", type=Path, help="scratch folder (default: a temporary one)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.steps <= args.warmup:
        raise SystemExit("--steps must exceed --warmup")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        data, tok = build_data(work, args)
        out = work / "run"
        config = {
            "data": str(data),
            "tokenizer": str(tok),
            "output": str(out),
            "model": {"arch": args.arch, "size": args.size},
            "seq_len": args.seq_len,
            "micro_batch_size": args.micro_batch,
            "max_steps": args.steps,
            "warmup_steps": 5,
            "lr": 1e-4,
            "precision": args.precision,
            "zero_stage": args.zero_stage,
            "gradient_checkpointing": args.gradient_checkpointing,
            "log_every": 1,
            "eval_every": 10**6,
            "eval_batches": 1,
            "save_every": 10**6,
            "peak_tflops": args.peak_tflops,
        }
        path = work / "gpu.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        deepspeed = str(Path(sys.executable).with_name("deepspeed"))
        command = [deepspeed, "--num_gpus", str(args.gpus), "launch/pretrain.py", "--config", str(path)]
        env = dict(os.environ, WANDB_MODE="disabled", PYTHONUNBUFFERED="1")
        subprocess.run(command, cwd=REPO, env=env, check=True)
        rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
        resolved = json.loads((out / "checkpoints" / "resolved_config.json").read_text(encoding="utf-8"))
    train = [r for r in rows if r["kind"] == "train" and r["step"] > args.warmup]
    tokens = args.micro_batch * args.gpus * args.seq_len
    seconds = sum(tokens / r["tokens_per_s"] for r in train)
    tokens_per_s = len(train) * tokens / seconds
    # every line's MFU is (FLOPs per token / peak) × its tokens/s: scale that factor by the overall rate
    mfu = train[0]["mfu"] / train[0]["tokens_per_s"] * tokens_per_s if train[0].get("mfu") else None
    device = "cpu"
    try:
        import torch

        if torch.cuda.is_available():
            device = torch.cuda.get_device_name()
    except ImportError:
        pass
    print(
        json.dumps(
            {
                "bench": "pretrain_gpu",
                "device": device,
                "gpus": args.gpus,
                "model": f"{args.arch}-{args.size}",
                "params": resolved["params"],
                "precision": args.precision,
                "seq_len": args.seq_len,
                "micro_batch": args.micro_batch,
                "zero_stage": args.zero_stage,
                "timed_steps": len(train),
                "tokens_per_s": round(tokens_per_s, 1),
                "mfu": None if mfu is None else round(mfu, 4),
                "peak_mem_gib": max((r.get("mem") or r.get("rss") or 0.0) for r in train),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
