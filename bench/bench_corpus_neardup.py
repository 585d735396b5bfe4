"""Benchmark near-duplicate detection on NSMC: kplm's datatrove MinHash stages vs a datasketch baseline.

    python bench/bench_corpus_neardup.py [--docs 100000]

Both sides get the same documents (the first ``--docs`` NSMC reviews), the same shingles (character 5-grams
of the casefolded text without spaces/punctuation, ``kplm.corpus.near_dedup.char_shingles``) and the same LSH
shape (14 bands × 8 hashes = 112 permutations). kplm: datatrove's four MinHash stages (signatures, buckets,
clustering, filter) in one process over a Parquet shard written beforehand (not timed). Baseline:
datasketch ``MinHash.update_batch`` + ``MinHashLSH`` (query, then insert: a document with any candidate is a
duplicate), the usual single-process text-dedup recipe. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import tempfile
import time
from pathlib import Path

NSMC = Path(__file__).resolve().parents[2] / "shared" / "data" / "nsmc" / "reviews.jsonl.gz"
BANDS, ROWS, NGRAM = 14, 8, 5


def load_texts(n: int) -> list[str]:
    with gzip.open(NSMC, "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in itertools.islice(f, n)]


def run_kplm(texts: list[str], tmp: Path) -> dict:
    from datatrove.data import Document

    from kplm.corpus import near_dedup
    from kplm.corpus.clean import run_executor, shard_writer
    from kplm.corpus.readers import ShardFileReader

    with shard_writer(tmp / "in") as writer:
        for i, text in enumerate(texts):
            writer.write(Document(text=text, id=str(i), metadata={"source": "nsmc"}), 0)
    config = near_dedup.minhash_config(BANDS, ROWS, NGRAM)
    sigs, buckets, remove = (str(tmp / name) for name in ("sigs", "buckets", "remove"))
    started = time.perf_counter()
    cpu0 = time.process_time()
    logs = tmp / "logs"
    run_executor(
        [ShardFileReader(str(tmp / "in")), near_dedup.signature_step(sigs, config)],
        logs / "1",
        tasks=1,
        workers=1,
    )
    run_executor([near_dedup.bucket_step(sigs, buckets, config)], logs / "2", tasks=BANDS, workers=1)
    run_executor([near_dedup.cluster_step(buckets, remove, config)], logs / "3", tasks=1, workers=1)
    excluded = shard_writer(tmp / "excluded")
    last = [
        ShardFileReader(str(tmp / "in")),
        near_dedup.filter_step(remove, excluded),
        shard_writer(tmp / "out"),
    ]
    run_executor(last, logs / "4", tasks=1, workers=1)
    seconds = time.perf_counter() - started
    import pyarrow.parquet as pq

    dropped = sum(pq.read_table(p).num_rows for p in (tmp / "excluded").glob("*.parquet"))
    return {
        "seconds": round(seconds, 2),
        "cpu_seconds": round(time.process_time() - cpu0, 2),
        "docs_per_s": round(len(texts) / seconds),
        "duplicates": dropped,
    }


def run_datasketch(texts: list[str]) -> dict:
    import datasketch
    from datasketch import MinHash, MinHashLSH

    from kplm.corpus.near_dedup import char_shingles

    started = time.perf_counter()
    cpu0 = time.process_time()
    lsh = MinHashLSH(num_perm=BANDS * ROWS, params=(BANDS, ROWS))
    duplicates = 0
    for i, text in enumerate(texts):
        shingles = char_shingles(text, NGRAM)
        if not shingles:
            continue
        m = MinHash(num_perm=BANDS * ROWS, seed=1)
        m.update_batch([s.encode("utf-8") for s in shingles])
        if lsh.query(m):
            duplicates += 1
            continue
        lsh.insert(str(i), m)
    seconds = time.perf_counter() - started
    return {
        "version": datasketch.__version__,
        "seconds": round(seconds, 2),
        "cpu_seconds": round(time.process_time() - cpu0, 2),
        "docs_per_s": round(len(texts) / seconds),
        "duplicates": duplicates,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000, help="number of NSMC reviews (from the start)")
    args = parser.parse_args()
    texts = load_texts(args.docs)
    with tempfile.TemporaryDirectory() as tmp:
        kplm = run_kplm(texts, Path(tmp))
    baseline = run_datasketch(texts)
    result = {
        "benchmark": "corpus_neardup_nsmc",
        "documents": len(texts),
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg(),
        "lsh": {"bands": BANDS, "rows": ROWS, "char_ngram": NGRAM},
        "kplm_datatrove_minhash": kplm,
        "datasketch_minhashlsh": baseline,
        "speed_ratio_kplm_vs_datasketch": round(baseline["seconds"] / kplm["seconds"], 2),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
