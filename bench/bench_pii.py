"""Benchmark PII detection throughput on NSMC (real Korean reviews) against baselines, in one run.

    python bench/bench_pii.py [--docs 200000] [--mecab-docs 20000] [--person-model PATH]

Prints one JSON object with docs/s/core for:

- ``kplm_detect``: :func:`kplm.pii.detect.detect`, every type, default (title-anchored) PERSON detector;
- ``kplm_scrub_tag``: detect + ``tag`` rewrite, as the pipeline step does it;
- ``kplm_detect_mecab``: the same with ``person="mecab"`` (MeCab-ko person nouns), on ``--mecab-docs``;
- ``kplm_detect_crf``: the same with ``person="crf"`` (the learned tagger), on ``--mecab-docs``; the model is
  ``--person-model``, or, without it, one trained here first from ../shared/data KLUE-NER (its CPU time is
  reported as ``person_model_train_cpu_s``);
- ``datatrove_piiformatter``: datatrove's ``PIIFormatter`` (e-mails and public IPv4 only) — the baseline;
- ``bare_regexes``: one ``search`` of each of kplm's compiled patterns, no validation: the design's ceiling.

Rates are documents per CPU-second of this process (``time.process_time``), i.e. per core, so they stay
comparable when other processes share the machine; wall-clock seconds are reported beside them.
Presidio is not the baseline: its analyzer needs spaCy and a model download, which kplm does not allow.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

NSMC = Path(__file__).resolve().parents[2] / "shared" / "data" / "nsmc" / "reviews.jsonl.gz"


def load(n: int) -> list[str]:
    """The first ``n`` NSMC review texts."""
    texts = []
    with gzip.open(NSMC, "rt", encoding="utf-8") as fh:
        for line in fh:
            texts.append(json.loads(line)["text"])
            if len(texts) == n:
                break
    return texts


def rate(texts: list[str], fn: Callable[[str], object]) -> dict[str, float]:
    """docs per CPU-second and wall seconds of ``fn`` over ``texts`` (one warm-up pass over 1,000 first)."""
    for text in texts[:1000]:
        fn(text)
    cpu, wall = time.process_time(), time.perf_counter()
    for text in texts:
        fn(text)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"docs": len(texts), "docs_per_s_per_core": round(len(texts) / cpu), "wall_s": round(wall, 2)}


def crf_rates(texts: list[str], model: Path | None) -> dict[str, object]:
    """``kplm_detect_crf`` (and the training CPU time when no model was given)."""
    from kplm.pii.detect import detect
    from kplm.pii.person_crf_train import PersonTrainConfig, train_person

    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if model is None:
            model = Path(tmp) / "person.crf"
            cpu = time.process_time()
            train_person(PersonTrainConfig(output=model, evaluate=False))
            out["person_model_train_cpu_s"] = round(time.process_time() - cpu, 1)
        out["kplm_detect_crf"] = rate(texts, lambda t: detect(t, person="crf", person_model=model))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=200_000, help="NSMC reviews to time (default 200,000)")
    parser.add_argument(
        "--mecab-docs", type=int, default=20_000, help="reviews for the MeCab/CRF PERSON runs"
    )
    parser.add_argument(
        "--person-model", type=Path, default=None, help="kplm pii train-person model (default: train one)"
    )
    args = parser.parse_args()

    from datatrove.pipeline.formatters import PIIFormatter

    from kplm.pii.detect import detect
    from kplm.pii.recognizers_ext import ALL_RECOGNIZERS
    from kplm.pii.scrub import scrub

    texts = load(args.docs)
    patterns = [r.pattern for r in ALL_RECOGNIZERS]
    formatter = PIIFormatter()

    def bare(text: str) -> None:
        for p in patterns:
            p.search(text)

    def scrub_tag(text: str) -> str:
        spans = detect(text)
        return scrub(text, spans, "tag") if spans else text

    found = sum(len(detect(t)) for t in texts)
    result = {
        "data": "NSMC reviews.jsonl.gz (first N)",
        "cpu_count": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "spans_found": found,
        "kplm_detect": rate(texts, detect),
        "kplm_scrub_tag": rate(texts, scrub_tag),
        "kplm_detect_mecab": rate(texts[: args.mecab_docs], lambda t: detect(t, person="mecab")),
        **crf_rates(texts[: args.mecab_docs], args.person_model),
        "datatrove_piiformatter": rate(texts, formatter.format),
        "bare_regexes": {"patterns": len(patterns), **rate(texts, bare)},
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
