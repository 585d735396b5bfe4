"""Benchmark of ``kplm tokenizer train`` and raw-text encoding; prints one JSON object.

For each model (wordpiece, bpe), mode (morpheme, plain) and process count it trains a vocabulary on the first
``--docs`` documents of ``--input`` (no held-out documents) and reports the pre-tokenization and training
times that ``train_tokenizer`` measures, as CPU seconds (``time.process_time`` of the main process plus that
of the pre-tokenization workers; the trainer's threads count in the main process) and wall seconds. CPU time
is what to compare on a shared machine. A small warm-up training runs first, so one-time imports do not count.
It also times MeCab-ko analysis alone (``Tagger.parse`` over the same documents, in 1 process and in N worker
processes) and checks the issue's target for each model and process count: morpheme training
(pre-tokenization + training) <= 1.5 x (MeCab analysis alone + plain training, i.e. plain pre-tokenization +
training), in CPU seconds (``*_ratio_cpu``, ``*_target_met``); ``*_pretokenize_vs_mecab_cpu`` is
pre-tokenization alone against MeCab alone. Encode throughput: the trained morpheme tokenizers encode the
documents in raw-text mode with the fast tokenizer's batch API (``tokenizer(list_of_texts)``, batches of
1,000) in a child process limited to one thread (``RAYON_NUM_THREADS=1``); chars per CPU second of that
process is chars/s/core even on a busy machine. Both the transformers call (``tokenizer(batch)``, Python
objects included), the ``tokenizers`` backend's ``encode_batch`` and its ``encode_batch_fast`` (the same ids
without character offsets, what ``kplm pack`` uses) are timed.

    python bench/bench_tokenizer.py --docs 50000 --vocab-size 32000
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_INPUT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "nsmc" / "reviews.jsonl.gz"


def read_docs(path: Path, n: int) -> list[str]:
    """The first ``n`` non-empty texts of a .jsonl.gz file."""
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            text = json.loads(line).get("text") or ""
            if text.strip():
                out.append(text)
            if len(out) >= n:
                break
    return out


TARGET_RATIO = 1.5
BATCH = 256


def parse_batch(texts: list[str]) -> float:
    """CPU seconds MeCab-ko needs to analyse ``texts`` (``Tagger.parse``) in this process."""
    from kplm.tokenizer.morphemes import tagger

    tag = tagger()
    started = time.process_time()
    for text in texts:
        tag.parse(text)
    return time.process_time() - started


def mecab_alone(texts: list[str], procs: int) -> dict[str, float]:
    """MeCab-ko analysis alone over ``texts`` in ``procs`` processes: CPU seconds (summed over the workers,
    tagger creation excluded as in pre-tokenization, where it happens once per worker) and wall seconds."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    batches = [texts[i : i + BATCH] for i in range(0, len(texts), BATCH)]
    started = time.perf_counter()
    if procs == 1:
        parse_batch(texts[:1])  # create the tagger
        started = time.perf_counter()
        cpu = sum(map(parse_batch, batches))
    else:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(procs, mp_context=ctx) as pool:
            list(pool.map(parse_batch, [texts[:1]] * procs))
            started = time.perf_counter()
            cpu = sum(pool.map(parse_batch, batches))
    return {"cpu_seconds": round(cpu, 2), "wall_seconds": round(time.perf_counter() - started, 2)}


def encode_child(folder: str, corpus: str) -> None:
    """Child process: chars/s of raw-text batch encoding with one thread; prints a JSON line."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    texts = Path(corpus).read_text(encoding="utf-8").splitlines()
    chars = sum(map(len, texts))
    tok(texts[:1000])  # warm-up
    out = {"chars": chars}
    for api, encode in (
        ("transformers", lambda batch: tok(batch, add_special_tokens=False)["input_ids"]),
        (
            "tokenizers",
            lambda batch: [
                e.ids for e in tok.backend_tokenizer.encode_batch(batch, add_special_tokens=False)
            ],
        ),
        (  # no character offsets: what packing for pretraining needs, and what kplm pack uses
            "tokenizers_fast",
            lambda batch: [
                e.ids for e in tok.backend_tokenizer.encode_batch_fast(batch, add_special_tokens=False)
            ],
        ),
    ):
        wall, cpu, tokens = time.perf_counter(), time.process_time(), 0
        for i in range(0, len(texts), 1000):
            tokens += sum(map(len, encode(texts[i : i + 1000])))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        out[api] = {
            "tokens": tokens,
            "wall_seconds": round(wall, 3),
            "cpu_seconds": round(cpu, 3),
            "chars_per_cpu_second": round(chars / max(cpu, 1e-9)),
            "chars_per_wall_second": round(chars / max(wall, 1e-9)),
        }
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--input", type=Path, default=DEFAULT_INPUT, help="a .jsonl.gz file with a 'text' field"
    )
    parser.add_argument("--docs", type=int, default=50000, help="documents to train and encode on")
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--models", default="wordpiece,bpe", help="comma-separated: wordpiece, bpe")
    parser.add_argument("--procs", default="1,2", help="comma-separated pre-tokenization process counts")
    parser.add_argument("--encode-child", nargs=2, metavar=("FOLDER", "CORPUS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.encode_child:
        encode_child(*args.encode_child)
        return

    from kplm.tokenizer import TokenizerConfig, train_tokenizer

    texts = read_docs(args.input, args.docs)
    work = Path(tempfile.mkdtemp(prefix="bench_tokenizer_"))
    try:
        corpus = work / "docs.txt"
        corpus.write_text("".join(t.replace("\n", " ") + "\n" for t in texts), encoding="utf-8")
        result: dict = {
            "input": str(args.input),
            "docs": len(texts),
            "chars": sum(map(len, texts)),
            "vocab_size": args.vocab_size,
            "cpu_count": os.cpu_count(),
            "load_average_start": [round(x, 2) for x in os.getloadavg()],
            "target_ratio": TARGET_RATIO,
            "mecab_alone": {},
            "train": [],
            "encode": [],
        }
        procs_list = list(map(int, args.procs.split(",")))
        warm = work / "warm.txt"  # one-time imports and set-up must not count against the first run
        warm.write_text("".join(t.replace("\n", " ") + "\n" for t in texts[:300]), encoding="utf-8")
        for model in args.models.split(","):
            train_tokenizer(
                TokenizerConfig(input=[warm], output=work / f"warm_{model}", vocab_size=1000, model=model,
                                report_docs=0, required_characters="none")
            )  # fmt: skip
        for procs in procs_list:
            result["mecab_alone"][str(procs)] = mecab_alone(texts, procs)
        for model in args.models.split(","):
            for mode in ("morpheme", "plain"):
                for procs in procs_list:
                    out = work / f"{model}_{mode}_{procs}"
                    config = TokenizerConfig(
                        input=[corpus], output=out, vocab_size=args.vocab_size, mode=mode, model=model,
                        num_proc=procs, report_docs=0,
                    )  # fmt: skip
                    started = time.perf_counter()
                    counts = train_tokenizer(config)
                    result["train"].append(
                        {
                            "model": model,
                            "mode": mode,
                            "procs": procs,
                            "pretokenize_cpu_seconds": counts["pretokenize_cpu_seconds"],
                            "train_cpu_seconds": counts["train_cpu_seconds"],
                            "pretokenize_seconds": counts["pretokenize_seconds"],
                            "train_seconds": counts["train_seconds"],
                            "total_seconds": round(time.perf_counter() - started, 2),
                            "vocab_size": counts["vocab_size"],
                        }
                    )
            runs = {(r["mode"], r["procs"]): r for r in result["train"] if r["model"] == model}
            for procs in procs_list:
                morph, plain = runs[("morpheme", procs)], runs[("plain", procs)]
                mecab = result["mecab_alone"][str(procs)]["cpu_seconds"]
                spent = morph["pretokenize_cpu_seconds"] + morph["train_cpu_seconds"]
                bound = mecab + plain["pretokenize_cpu_seconds"] + plain["train_cpu_seconds"]
                ratio = round(spent / bound, 3)
                result[f"{model}_{procs}proc_morpheme_vs_mecab_plus_plain_ratio_cpu"] = ratio
                result[f"{model}_{procs}proc_target_met"] = ratio <= TARGET_RATIO
                result[f"{model}_{procs}proc_pretokenize_vs_mecab_cpu"] = round(
                    morph["pretokenize_cpu_seconds"] / mecab, 3
                )
            env = {
                **os.environ,
                "RAYON_NUM_THREADS": "1",
                "RAYON_RS_NUM_CPUS": "1",
                "TOKENIZERS_PARALLELISM": "false",
            }
            child = subprocess.run(
                [sys.executable, __file__, "--encode-child", str(work / f"{model}_morpheme_1"), str(corpus)],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            enc = json.loads(child.stdout.strip().splitlines()[-1])
            enc.update(model=model, mode="raw text")
            result["encode"].append(enc)
        result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
        print(json.dumps(result, ensure_ascii=False))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
