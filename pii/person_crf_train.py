"""``kplm pii train-person``: train the PERSON CRF of :mod:`kplm.pii.person_crf` on KLUE-NER dev.

KLUE-NER dev is the only source of real ``PS`` labels here (CC BY-SA: read from ``../shared/data``, never
copied, and no model is shipped). The split is FIXED: sentence ``i`` of the file (0-based, file order) is
held out when ``i % holdout_every == 0`` (every 5th: 1,000 of 5,000 sentences); the others form the
training part. The held-out part is used for nothing but the final report.

The decoding threshold (P(not O) per character) is chosen without the held-out part: the training part is
split again, its sentences at position ``j % validate_every == 0`` (file order; with the defaults these are
the sentences with index % 5 == 1) forming an inner validation fold. A model trained on the rest tags that
fold once, and every threshold of a fixed grid is scored on it: the chosen one has the best F2 (recall
weighted 4×) among those whose tagger marks at most ``max_negative_fp_rate`` of the shipped look-alike
negatives (``pii/eval_data/negatives.jsonl``, never used for anything but this constraint). The final model
is then trained on the whole training part and stores that threshold in its ``.json`` — raised along the
grid if the final model, at it, marks more of the negatives than the bound allows.

Every training set gets ``augment`` copies of each sentence with a name, its names swapped for other names
of the same set (seeded), which teaches the tagger the contexts of names rather than the names. Training is
deterministic (same inputs, same model bytes).
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kplm.errors import KplmError
from kplm.pii.evalset import NEGATIVES
from kplm.pii.evaluate import KLUE_NER, load_klue_ps, load_labelled
from kplm.pii.person_crf import (
    FEATURE_VERSION,
    MODEL_FORMAT,
    _plausible,
    _taggers,
    features,
    spans_from_marginals,
)

# Thresholds tried by the validation sweep: 0.02, 0.03, … 0.60.
GRID = tuple(round(0.01 * k, 2) for k in range(2, 61))


@dataclass(kw_only=True)
class PersonTrainConfig:
    """Settings of ``kplm pii train-person``."""

    output: Path = field(metadata={"help": "model file to write (a CRFsuite file; <output>.json beside it)"})
    klue_ner: Path = field(
        default=KLUE_NER, metadata={"help": "KLUE-NER TSV with PS labels (the ../shared/data copy)"}
    )
    holdout_every: int = field(
        default=5,
        metadata={"help": "every N-th sentence (file order, from the first) is held out for evaluation"},
    )
    validate_every: int = field(
        default=4,
        metadata={
            "help": "every N-th training sentence (from the first) forms the inner validation fold that "
            "chooses the threshold"
        },
    )
    use_holdout: bool = field(
        default=False,
        metadata={
            "help": "also train the final model on the held-out sentences (the threshold still comes from "
            "the inner validation fold; reported held-out metrics then optimistic)"
        },
    )
    max_sentences: int | None = field(
        default=None, metadata={"help": "train on at most this many training sentences (quick tests)"}
    )
    max_iterations: int = field(default=150, metadata={"help": "L-BFGS iterations"})
    c1: float = field(default=0.05, metadata={"help": "L1 regularisation weight"})
    c2: float = field(default=0.01, metadata={"help": "L2 regularisation weight"})
    augment: int = field(
        default=1,
        metadata={
            "help": "extra copies of each training sentence with a name, its names swapped for other "
            "training names (seeded): teaches context over memorised names"
        },
    )
    evaluate: bool = field(
        default=True, metadata={"help": "score the held-out sentences after training (adds ~10-20 s)"}
    )
    threshold: float | None = field(
        default=None,
        metadata={
            "help": "fixed P(not O) threshold (0-1) instead of the validation sweep (skips the inner model)"
        },
    )
    negatives: Path = field(
        default=NEGATIVES,
        metadata={"help": "look-alike negatives (labelled JSONL) bounding the sweep's false positives"},
    )
    max_negative_fp_rate: float = field(
        default=0.01,
        metadata={"help": "the sweep keeps thresholds marking at most this share of the negatives"},
    )

    def __post_init__(self) -> None:
        self.output = Path(self.output)
        self.klue_ner = Path(self.klue_ner)
        self.negatives = Path(self.negatives)
        if self.holdout_every < 2:
            raise ValueError(f"holdout_every: must be at least 2, got {self.holdout_every}")
        if self.validate_every < 2:
            raise ValueError(f"validate_every: must be at least 2, got {self.validate_every}")
        if self.max_sentences is not None and self.max_sentences < 1:
            raise ValueError(f"max_sentences: must be at least 1, got {self.max_sentences}")
        if self.augment < 0:
            raise ValueError(f"augment: must not be negative, got {self.augment}")
        if self.max_iterations < 1:
            raise ValueError(f"max_iterations: must be at least 1, got {self.max_iterations}")
        if self.c1 < 0 or self.c2 < 0:
            raise ValueError("c1/c2: regularisation weights must not be negative")
        if self.threshold is not None and not 0.0 < self.threshold < 1.0:
            raise ValueError(f"threshold: must be between 0 and 1 (exclusive), got {self.threshold}")
        if not 0.0 <= self.max_negative_fp_rate <= 1.0:
            raise ValueError(
                f"max_negative_fp_rate: must be between 0 and 1, got {self.max_negative_fp_rate}"
            )


def _labels(text: str, spans: list[tuple[int, int, str]]) -> list[str]:
    labels = ["O"] * len(text)
    for s, e, _ in spans:
        labels[s] = "B"
        for i in range(s + 1, e):
            labels[i] = "I"
    return labels


def _augmented(train: list, copies: int) -> list:
    """``copies`` variants of every training sentence with Hangul names, each name replaced by another
    Hangul training name drawn with a fixed seed (so training stays deterministic)."""
    pool = sorted({t[s:e] for _, t, spans in train for s, e, _ in spans if not t[s:e].isascii()})
    if not copies or not pool:
        return []
    rng = random.Random(20261129)
    out = []
    for sid, text, spans in train:
        if not spans or any(text[s:e].isascii() for s, e, _ in spans):
            continue
        for k in range(copies):
            pieces, new_spans, pos = [], [], 0
            for s, e, kind in spans:
                name = rng.choice(pool)
                pieces.append(text[pos:s])
                start = sum(map(len, pieces))
                pieces.append(name)
                new_spans.append((start, start + len(name), kind))
                pos = e
            pieces.append(text[pos:])
            out.append((f"{sid}#aug{k}", "".join(pieces), new_spans))
    return out


def split_klue(path: Path, holdout_every: int) -> tuple[list, list]:
    """(train, held-out) KLUE-NER sentences ``(id, text, PS spans)``: held out when index % N == 0."""
    train, held = [], []
    for i, ex in enumerate(load_klue_ps(path)):
        (held if i % holdout_every == 0 else train).append(ex)
    return train, held


def split_validation(train: list, validate_every: int) -> tuple[list, list]:
    """(inner training, validation) parts of the training sentences: position ``j % N == 0`` validates."""
    inner = [ex for j, ex in enumerate(train) if j % validate_every]
    return inner, [ex for j, ex in enumerate(train) if j % validate_every == 0]


def _fit(examples: list, config: PersonTrainConfig, path: Path) -> None:
    """Train a CRF on ``examples`` (plus their name-swapped copies) into ``path``, written atomically."""
    import pycrfsuite

    trainer = pycrfsuite.Trainer(verbose=False)
    for _, text, spans in examples + _augmented(examples, config.augment):
        trainer.append(features(text), _labels(text, spans))
    trainer.set_params(
        {
            "c1": config.c1,
            "c2": config.c2,
            "max_iterations": config.max_iterations,
            "feature.possible_transitions": True,
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        trainer.train(str(tmp))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _taggers.pop(str(path), None)


def _marginals(tagger: Any, text: str) -> tuple[list[float], list[float]]:
    """Per character P(not O) and P(B): tagged once, then decoded at any threshold."""
    if not text.strip():
        return [], []
    tagger.set(features(text))
    marginal = tagger.marginal
    return [1.0 - marginal("O", i) for i in range(len(text))], [marginal("B", i) for i in range(len(text))]


def _decode(text: str, probs: list[float], bprobs: list[float], threshold: float) -> list[tuple[int, int]]:
    """The spans ``crf_person_candidates`` returns at ``threshold`` (same decoding as ``person_crf._tag``)."""
    starts = [p >= threshold and 2 * b > p for p, b in zip(probs, bprobs, strict=True)]
    return [(s, e) for s, e, _ in spans_from_marginals(probs, starts, threshold) if _plausible(text, s, e)]


def _counts(tagged: list, threshold: float, keep: Any = None) -> dict[str, int]:
    """Overlap-matched gold/found/predicted/correct counts of pre-tagged examples at ``threshold``."""
    gold = found = pred = correct = 0
    for text, spans, probs, bprobs in tagged:
        g = [(s, e) for s, e, _ in spans if keep is None or keep(text[s:e])]
        p = _decode(text, probs, bprobs, threshold)
        gold += len(g)
        found += sum(any(a < d and c < b for c, d in p) for a, b in g)
        pred += len(p)
        correct += sum(any(a < d and c < b for c, d in g) for a, b in p)
    return {"gold": gold, "found": found, "predicted": pred, "correct": correct}


def _prf(c: dict[str, int]) -> dict[str, Any]:
    r = c["found"] / c["gold"] if c["gold"] else 0.0
    prec = c["correct"] / c["predicted"] if c["predicted"] else 0.0
    f2 = 5 * prec * r / (4 * prec + r) if prec + r else 0.0
    return {"gold": c["gold"], "predicted": c["predicted"], "recall": r, "precision": prec, "f2": f2}


def _tag_all(tagger: Any, examples: list) -> list:
    return [(text, spans, *_marginals(tagger, text)) for _, text, spans in examples]


def score_spans(tagger: Any, threshold: float, examples: list) -> dict[str, Any]:
    """Overlap-matched PERSON recall/precision/F2 of ``tagger`` on ``(id, text, spans)`` examples, with the
    Hangul-only figures apart (single ASCII letters are KLUE's own pseudonyms, ``<A:PS>``)."""
    tagged = _tag_all(tagger, examples)
    m = {k: round(v, 4) if isinstance(v, float) else v for k, v in _prf(_counts(tagged, threshold)).items()}
    hangul = _prf(_counts(tagged, threshold, keep=lambda t: not t.isascii()))
    return {
        "all_ps": m,
        "non_pseudonymised_ps": {"gold": hangul["gold"], "recall": round(hangul["recall"], 4)},
    }


def sweep_threshold(
    tagger: Any, validation: list, negatives: list[str], max_fp_rate: float
) -> dict[str, Any]:
    """Score every threshold of :data:`GRID` on the validation sentences and the negatives; the chosen one
    has the best validation F2 (ties: better precision, then higher threshold) among those marking at most
    ``max_fp_rate`` of the negatives (the highest threshold when none does)."""
    tagged = _tag_all(tagger, validation)
    neg = [(text, *_marginals(tagger, text)) for text in negatives]
    curve = []
    for t in GRID:
        m = _prf(_counts(tagged, t))
        hits = sum(bool(_decode(text, p, b, t)) for text, p, b in neg)
        curve.append((t, m, hits))
    allowed = int(max_fp_rate * len(negatives) + 1e-9)
    feasible = [c for c in curve if c[2] <= allowed]
    if feasible:
        t, m, hits = max(feasible, key=lambda c: (round(c[1]["f2"], 6), round(c[1]["precision"], 6), c[0]))
    else:
        t, m, hits = curve[-1]
    return {
        "threshold": t,
        "constraint_met": bool(feasible),
        "validation": {k: round(v, 4) if isinstance(v, float) else v for k, v in m.items()},
        "negatives": len(negatives),
        "negative_hits": hits,
        "curve": [[c[0], round(c[1]["recall"], 4), round(c[1]["precision"], 4), c[2]] for c in curve],
    }


def train_person(config: PersonTrainConfig) -> dict[str, Any]:
    """Choose the threshold on the inner validation fold, train the PERSON CRF on the whole training part
    of KLUE-NER into ``config.output``; returns counts, the sweep and the held-out PERSON
    precision/recall/F2 (overlap matching, as ``kplm pii eval``). The ``.json`` also holds the sweep's
    curve: ``[threshold, validation recall, validation precision, negatives marked]`` per grid point."""
    import pycrfsuite

    started = time.time()
    if not config.klue_ner.is_file():
        raise KplmError(f"KLUE-NER file not found: {config.klue_ner}")
    train, held = split_klue(config.klue_ner, config.holdout_every)
    if config.max_sentences is not None:
        train = train[: config.max_sentences]
    params = {
        "max_iterations": config.max_iterations,
        "c1": config.c1,
        "c2": config.c2,
        "augment": config.augment,
    }
    if config.threshold is not None:
        threshold = float(config.threshold)
        selection: dict[str, Any] = {"method": "fixed by the user (--threshold): no validation sweep"}
    else:
        negatives = [text for _, text, _ in load_labelled(config.negatives)]
        inner, validation = split_validation(train, config.validate_every)
        if not inner or not validation:
            raise KplmError(f"{config.klue_ner}: too few training sentences for a validation fold")
        with tempfile.TemporaryDirectory(prefix="kplm-person-") as tmp:
            inner_model = Path(tmp) / "inner.crf"
            _fit(inner, config, inner_model)
            tagger = pycrfsuite.Tagger()
            tagger.open(str(inner_model))
            sweep = sweep_threshold(tagger, validation, negatives, config.max_negative_fp_rate)
            tagger.close()
        threshold = sweep.pop("threshold")
        selection = {
            "method": "validation sweep",
            "validation_fold": f"training-part sentences at position % {config.validate_every} == 0 "
            "(file order, from 0); the model tagging it was trained on the other training sentences",
            "criterion": f"best validation F2 among thresholds marking at most {config.max_negative_fp_rate} "
            f"of the negatives ({config.negatives.name}, used only as this constraint)",
            "grid": [GRID[0], GRID[-1], 0.01],
            "inner_train_sentences": len(inner),
            "validation_sentences": len(validation),
            **sweep,
        }
    final = train + held if config.use_holdout else train
    out = config.output
    _fit(final, config, out)
    if config.threshold is None:
        # the bound on the negatives holds for the final model too: raise the threshold along the grid
        # while it marks too many of them (uses the negatives only, never the held-out part)
        tagger = pycrfsuite.Tagger()
        tagger.open(str(out))
        neg = [(text, *_marginals(tagger, text)) for text in negatives]
        allowed = int(config.max_negative_fp_rate * len(negatives) + 1e-9)
        for t in [g for g in GRID if g >= threshold]:
            hits = sum(bool(_decode(text, p, b, t)) for text, p, b in neg)
            if hits <= allowed:
                break
        selection["final_model_negative_hits"] = hits
        selection["constraint_met"] = selection["constraint_met"] and hits <= allowed
        if t != threshold:
            selection["raised_for_negatives"] = [threshold, t]
            threshold = t
    train_seconds = round(time.time() - started, 2)
    result: dict[str, Any] = {
        "format": MODEL_FORMAT,
        "feature_version": FEATURE_VERSION,
        "source": config.klue_ner.name,
        "split": f"held out: sentence index % {config.holdout_every} == 0 (file order, from 0)",
        "holdout_every": config.holdout_every,
        "trained_on_holdout": config.use_holdout,
        "train_sentences": len(final),
        "held_out_sentences": len(held),
        "params": params,
        "threshold": threshold,
        "threshold_selection": selection,
        "train_seconds": train_seconds,
    }
    if config.evaluate:
        tagger = pycrfsuite.Tagger()
        tagger.open(str(out))
        result["held_out"] = score_spans(tagger, threshold, held)
    if config.use_holdout:
        result["held_out_caveat"] = "the model was trained on the held-out sentences too: optimistic figures"
    meta = Path(str(out) + ".json")
    tmp_meta = meta.with_name(f".{meta.name}.tmp{os.getpid()}")
    tmp_meta.write_text(json.dumps(result, ensure_ascii=False, indent=2), encoding="utf-8")
    os.replace(tmp_meta, meta)
    result["seconds"] = round(time.time() - started, 2)
    if "curve" in selection:  # the full sweep stays in the .json; the printed counts keep the choice
        result["threshold_selection"] = {k: v for k, v in selection.items() if k != "curve"}
    return result
