"""The pipeline's PII stage: pseudonymise every shard of a cleaned corpus folder with datatrove.

Each ``part-<rank>.parquet`` shard of the input is one datatrove task: read it, run
:class:`kplm.pii.step.PiiScrubStep`, write ``part-<rank>.parquet`` to the output. Per-type counts (never the
values) are summed into ``pii_report.json`` and the stage record.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pyarrow.parquet as pq

from kplm.config import fingerprint
from kplm.corpus.clean import run_executor, shard_writer
from kplm.corpus.readers import ShardFileReader
from kplm.corpus.shards import shard_files
from kplm.pii.person_mecab import PersonMode
from kplm.records import (
    content_digests,
    content_identity,
    is_complete,
    previous_inputs,
    write_json_atomic,
    write_record,
)

STAGE = "pii.scrub_corpus"


@dataclass(kw_only=True)
class PiiStageConfig:
    """PII settings of a run (the ``pii:`` section): ``policy: off`` keeps text as is (the KLUE ablation)."""

    input: Path = field(metadata={"help": "cleaned corpus folder (part-*.parquet)"})
    output: Path = field(metadata={"help": "output corpus folder"})
    policy: Literal["off", "tag", "mask", "surrogate"] = field(
        default="tag",
        metadata={
            "help": "off: no change; tag: typed placeholders like [PHONE]; mask: same-length *; surrogate: realistic fakes (key: KPLM_PII_SECRET)"
        },
    )
    min_score: float = field(default=0.5, metadata={"help": "minimum detection confidence"})
    person: PersonMode = field(
        default="context",
        metadata={
            "help": "PERSON names: context (title words like 씨/기자; fast), mecab (MeCab-ko name tags; ~8x "
            "slower) or crf (the learned tagger of `kplm pii train-person`; ~50x slower, finds most names)"
        },
    )
    person_model: Path | None = field(
        default=None, metadata={"help": "model file of `kplm pii train-person` (with person: crf)"}
    )
    types: list[str] | None = field(default=None, metadata={"help": "PII types to act on (default: all)"})
    workers: int = field(default=1, metadata={"help": "processes scrubbing shards in parallel"})

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_score <= 1.0:
            raise ValueError(f"min_score: must be between 0 and 1, got {self.min_score}")
        if self.workers < 1:
            raise ValueError(f"workers: must be at least 1, got {self.workers}")
        from kplm.pii.detect import check_person, check_types

        if self.types is not None:
            check_types(self.types)
        check_person(self.person, self.person_model)

    def placeholders(self) -> list[str]:
        """The placeholder strings this config writes into text (the tokenizer keeps them whole)."""
        from kplm.pii.detect import DETECTABLE_TYPES
        from kplm.pii.scrub import PLACEHOLDERS

        if self.policy != "tag":
            return []
        return sorted(PLACEHOLDERS[t] for t in DETECTABLE_TYPES if self.types is None or t in self.types)


def scrub_corpus(config: PiiStageConfig) -> dict[str, Any]:
    """Pseudonymise the corpus folder ``config.input`` into ``config.output``; returns per-type counts."""
    from kplm.pii.step import PiiScrubStep

    started = time.time()
    shards = shard_files(config.input)
    out = Path(config.output)
    previous = previous_inputs(out)
    digests = content_digests(shards, previous)
    identity = content_identity(digests, names_only=True)
    model_digest: dict[str, list] = {}
    if config.person_model is not None and Path(config.person_model).is_file():
        model_digest = content_digests([config.person_model], previous)
        identity += content_identity(model_digest)
    fp = fingerprint(STAGE, config, identity)
    if is_complete(out, fp):
        return json.loads((out / "pii_report.json").read_text(encoding="utf-8"))
    for old in out.glob("part-*.parquet"):
        old.unlink()
    ranks = [int(m.group(1)) for p in shards if (m := re.fullmatch(r"part-(\d+)\.parquet", p.name))]
    if len(ranks) != len(shards):
        raise ValueError(f"{config.input}: expected only part-<rank>.parquet shards from the corpus stage")
    tasks = max(ranks) + 1
    step = PiiScrubStep(
        policy=config.policy,
        types=config.types,
        min_score=config.min_score,
        person=config.person,
        person_model=str(config.person_model) if config.person_model else None,
    )
    pipeline = [
        ShardFileReader(str(config.input), "part-{rank:05d}.parquet"),
        step,
        shard_writer(out, "part-${rank}.parquet"),
    ]
    run_executor(
        pipeline,
        out / "_work" / fp / "logs",
        tasks=tasks,
        workers=min(config.workers, tasks),
        what="PII scrubbing",
    )
    counts = count_pii(out)
    write_json_atomic(out / "pii_report.json", counts)
    write_record(
        out, stage=STAGE, config=config, fingerprint=fp, counts=counts, started=started,
        inputs={**digests, **model_digest},
    )  # fmt: skip
    return counts


def count_pii(folder: Path) -> dict[str, Any]:
    """Sum the per-document PII counts stored in the shards' metadata."""
    docs = with_pii = 0
    by_type: Counter = Counter()
    for path in shard_files(folder):
        for metadata in pq.read_table(path, columns=["metadata"]).column("metadata").to_pylist():
            docs += 1
            found = json.loads(metadata).get("pii") or {}
            if any(found.values()):
                with_pii += 1
            by_type.update({t: n for t, n in found.items() if n})
    return {"documents": docs, "documents_with_pii": with_pii, "pii_by_type": dict(sorted(by_type.items()))}
