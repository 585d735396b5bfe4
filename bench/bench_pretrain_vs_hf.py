"""Training tokens/s of kplm's DeepSpeed trainer vs a Hugging Face ``Trainer`` baseline (the ``run_mlm.py``
recipe: ``DataCollatorForLanguageModeling(mlm_probability=0.15)``), in one invocation on this machine.

Both train the same transformers model (kplm's ``hf_config`` of ``--arch``/``--size``), from the same packed
sequences (built here from real NSMC reviews unless ``--data``/``--tokenizer`` are given), with the same
micro batch, sequence length, steps, AdamW settings, fp32 and thread count. kplm runs as one rank
(``python -m kplm.training.pretrain``, ZeRO 0) in a subprocess; the baseline runs in this process.
Throughput counts steps after ``--warmup`` steps only. Prints one JSON object.

    python bench/bench_pretrain_vs_hf.py --steps 30 --warmup 5 --size mini --seq-len 128 --batch 16
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
NSMC = REPO.parent / "shared" / "data" / "nsmc" / "reviews.jsonl.gz"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, help="a kplm pack folder (default: build one from NSMC)")
    p.add_argument("--tokenizer", type=Path, help="its tokenizer folder (with --data)")
    p.add_argument("--reviews", type=int, default=20000, help="NSMC reviews to build data from")
    p.add_argument("--vocab-size", type=int, default=8000, help="WordPiece vocabulary of the built tokenizer")
    p.add_argument("--arch", choices=("bert", "roberta"), default="roberta")
    p.add_argument("--size", default="mini", help="kplm size preset (tiny/mini/small/base/large)")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch", type=int, default=16, help="micro batch (sequences per step)")
    p.add_argument("--steps", type=int, default=30, help="optimizer steps of each trainer")
    p.add_argument("--warmup", type=int, default=5, help="first steps left out of the throughput")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads of each trainer")
    p.add_argument("--work", type=Path, help="scratch folder (default: a temporary one)")
    return p.parse_args(argv)


def build_data(work: Path, args: argparse.Namespace) -> tuple[Path, Path]:
    """WordPiece tokenizer trained on NSMC reviews and the kplm pack of those reviews."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizer

    from kplm.corpus.shards import ShardWriter
    from kplm.training.pack import PackConfig, pack

    texts = []
    with gzip.open(NSMC, "rt", encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"].strip()
            if text:
                texts.append(text)
            if len(texts) >= args.reviews:
                break
    wp = BertWordPieceTokenizer(lowercase=False, strip_accents=False, clean_text=True)
    wp.train_from_iterator(
        texts, vocab_size=args.vocab_size, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    )
    tok_dir, corpus, packed = work / "tokenizer", work / "corpus", work / "packed"
    BertTokenizer(vocab=wp.get_vocab(), do_lower_case=False, strip_accents=False).save_pretrained(tok_dir)
    with ShardWriter(corpus / "part-00000.parquet") as writer:
        for i, text in enumerate(texts):
            writer.write(id=f"nsmc-{i}", text=text, source="nsmc", metadata={})
    pack(PackConfig(corpus=corpus, tokenizer=tok_dir, output=packed, seq_len=args.seq_len))
    return packed, tok_dir


def run_kplm(work: Path, data: Path, tokenizer: Path, args: argparse.Namespace) -> dict:
    """kplm's trainer as one rank; tokens/s from its metrics after the warm-up steps."""
    out = work / "kplm_run"
    config = {
        "data": str(data),
        "tokenizer": str(tokenizer),
        "output": str(out),
        "model": {"arch": args.arch, "size": args.size},
        "seq_len": args.seq_len,
        "micro_batch_size": args.batch,
        "max_steps": args.steps,
        "warmup_steps": 2,
        "lr": 5e-4,
        "precision": "fp32",
        "zero_stage": 0,
        "log_every": 1,
        "eval_every": 10**6,
        "save_every": 10**6,
        "eval_batches": 1,
    }
    path = work / "kplm.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), WANDB_MODE="disabled", DS_ACCELERATOR="cpu")
    subprocess.run(
        [sys.executable, "-m", "kplm.training.pretrain", "--config", str(path)],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    train = [r for r in rows if r["kind"] == "train" and r["step"] > args.warmup]
    # each line's tokens/s covers exactly one step: the mean time per step is the harmonic mean
    seconds = sum(args.batch * args.seq_len / r["tokens_per_s"] for r in train)
    return {"tokens_per_s": len(train) * args.batch * args.seq_len / seconds, "final_loss": train[-1]["loss"]}


def run_hf(work: Path, data: Path, tokenizer_dir: Path, args: argparse.Namespace) -> dict:
    """The run_mlm.py recipe: HF Trainer, DataCollatorForLanguageModeling, the same model and rows."""
    import numpy as np
    import torch
    from transformers import DataCollatorForLanguageModeling, Trainer, TrainerCallback, TrainingArguments

    from kplm.training.config import ModelConfig
    from kplm.training.model import build_mlm, hf_config
    from kplm.training.pack import load_tokenizer, read_meta

    torch.set_num_threads(args.threads)
    tokenizer = load_tokenizer(tokenizer_dir)
    meta = read_meta(data)
    model_cfg = ModelConfig(arch=args.arch, size=args.size)
    config = hf_config(model_cfg, vocab_size=len(tokenizer), seq_len=args.seq_len, ids=meta["special_ids"])
    torch.manual_seed(0)
    model = build_mlm(config)
    rows = np.load(data / "train.npy", mmap_mode="r")
    n = min(len(rows), args.steps * args.batch)
    special = np.asarray(meta["special_ids"]["all"])
    pad = meta["special_ids"]["pad"]
    dataset = [
        {
            "input_ids": rows[i].astype(np.int64).tolist(),
            "attention_mask": (rows[i] != pad).astype(np.int64).tolist(),
            "special_tokens_mask": np.isin(rows[i], special).astype(np.int64).tolist(),
        }
        for i in range(n)
    ]
    times: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, *a, **k):  # noqa: ANN002, ANN003 - transformers' callback signature
            times.append(time.perf_counter())

    training_args = TrainingArguments(
        output_dir=str(work / "hf_run"),
        per_device_train_batch_size=args.batch,
        max_steps=args.steps,
        learning_rate=5e-4,
        warmup_steps=2,
        weight_decay=0.01,
        adam_beta2=0.98,
        adam_epsilon=1e-6,
        max_grad_norm=1.0,
        optim="adamw_torch",
        lr_scheduler_type="linear",
        logging_steps=args.steps,
        save_strategy="no",
        report_to=[],
        dataloader_num_workers=0,
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
    )
    collator = DataCollatorForLanguageModeling(tokenizer=tokenizer, mlm_probability=0.15)
    trainer = Trainer(
        model=model, args=training_args, train_dataset=dataset, data_collator=collator, callbacks=[Clock()]
    )
    result = trainer.train()
    seconds = times[-1] - times[args.warmup - 1]
    steps = len(times) - args.warmup
    return {"tokens_per_s": steps * args.batch * args.seq_len / seconds, "final_loss": result.training_loss}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.warmup < 1 or args.steps <= args.warmup:
        raise SystemExit("--steps must exceed --warmup, which must be at least 1")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        if args.data:
            data, tokenizer = args.data, args.tokenizer
        else:
            data, tokenizer = build_data(work, args)
        kplm = run_kplm(work, data, tokenizer, args)
        hf = run_hf(work, data, tokenizer, args)
    print(
        json.dumps(
            {
                "bench": "pretrain_vs_hf_trainer",
                "model": f"{args.arch}-{args.size}",
                "vocab_size": args.vocab_size if not args.data else None,
                "seq_len": args.seq_len,
                "micro_batch": args.batch,
                "steps": args.steps,
                "timed_steps": args.steps - args.warmup,
                "precision": "fp32",
                "threads": args.threads,
                "kplm_tokens_per_s": round(kplm["tokens_per_s"], 1),
                "hf_trainer_tokens_per_s": round(hf["tokens_per_s"], 1),
                "ratio": round(kplm["tokens_per_s"] / hf["tokens_per_s"], 3),
                "kplm_final_loss": round(kplm["final_loss"], 4),
                "hf_mean_loss": round(hf["final_loss"], 4),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
