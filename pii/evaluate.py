"""``kplm pii eval``: precision, recall, F2 and leak recall of the detector on labelled sentences.

Inputs: the shipped labelled set (:mod:`kplm.pii.evalset`: positives with spans of every type, negatives
of look-alikes) and, when available, KLUE-NER dev, whose ``PS`` spans measure PERSON recall on real text.

Matching rule (span level): a gold span is *found* when a detection **of the same type overlaps** it by at
least one character; a detection is *correct* when it overlaps a gold span of its type. Overlap rather
than exact match, because what matters for privacy is that the value is rewritten, and boundaries differ
harmlessly (``서울 강서구 …`` with or without the city). Exact-boundary hits are reported too.

Leak recall (character level): of all characters inside gold spans, the share covered by *any*
detection, whatever its type (a phone number detected as an account is still not leaked).

False positives: the share of negative sentences with at least one detection, and per type the number
of detections on negatives. KLUE sentences are only used for PERSON (other types are not labelled
there). Reports name example ids, never values.

With ``person: crf`` the tagger was trained on part of KLUE-NER dev itself, so the KLUE figures are also
given for its held-out sentences alone (``klue_ner_person.held_out``; the whole-file ones are optimistic).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from kplm.errors import KplmError
from kplm.pii.detect import PII_TYPES, check_person, detect
from kplm.pii.evalset import NEGATIVES, POSITIVES
from kplm.pii.person_mecab import PersonMode

KLUE_NER = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "klue" / "klue-ner-v1.1_dev.tsv"


@dataclass(kw_only=True)
class PiiEvalConfig:
    """Settings of ``kplm pii eval``."""

    output: Path = field(metadata={"help": "folder for pii_eval.json and pii_eval.md"})
    positives: Path = field(
        default=POSITIVES, metadata={"help": "labelled JSONL: id, text, spans[start,end,type]"}
    )
    negatives: Path = field(default=NEGATIVES, metadata={"help": "JSONL of look-alike sentences without PII"})
    klue_ner: Path | None = field(
        default=KLUE_NER if KLUE_NER.exists() else None,
        metadata={"help": "KLUE-NER dev TSV for PERSON recall on real names (the ../shared/data copy)"},
    )
    min_score: float = field(
        default=0.5, metadata={"help": "detections scoring below this are ignored (0-1)"}
    )
    person: PersonMode = field(
        default="context",
        metadata={
            "help": "PERSON detector: context (names before 씨/기자/교수 …), mecab (+ MeCab-ko NNP 인명) "
            "or crf (+ the learned tagger of --person-model)"
        },
    )
    person_model: Path | None = field(
        default=None, metadata={"help": "model file of --person crf (from `kplm pii train-person`)"}
    )

    def __post_init__(self) -> None:
        self.output = Path(self.output)
        self.positives = Path(self.positives)
        self.negatives = Path(self.negatives)
        if self.klue_ner is not None:
            self.klue_ner = Path(self.klue_ner)
        if not 0.0 <= self.min_score <= 1.0:
            raise ValueError(f"min_score: must be between 0 and 1, got {self.min_score}")
        check_person(self.person, self.person_model)


Span = tuple[int, int, str]


def load_labelled(path: Path) -> list[tuple[str, str, list[Span]]]:
    """(id, text, gold spans) of every line of a labelled JSONL file; KplmError names a bad line."""
    if not path.is_file():
        raise KplmError(f"labelled file not found: {path}")
    out = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                spans = [(int(s["start"]), int(s["end"]), str(s["type"])) for s in rec["spans"]]
                out.append((str(rec["id"]), str(rec["text"]), spans))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
                raise KplmError(f"{path}:{lineno}: bad labelled record ({type(e).__name__}: {e})") from None
            for s, e, kind in spans:
                if not 0 <= s < e <= len(out[-1][1]) or kind not in PII_TYPES:
                    raise KplmError(f"{path}:{lineno}: span [{s}, {e}) {kind} is outside the text or unknown")
    return out


def load_klue_ps(path: Path) -> Iterator[tuple[str, str, list[Span]]]:
    """(id, text, PS spans as PERSON) of each KLUE-NER sentence, rebuilt from the per-character BIO rows."""
    if not path.is_file():
        raise KplmError(f"KLUE-NER file not found: {path}")
    sid, chars, tags = "", [], []

    def flush() -> Iterator[tuple[str, str, list[Span]]]:
        if chars:
            spans, start = [], None
            for i, tag in enumerate([*tags, "O"]):
                if start is not None and tag != "I-PS":
                    spans.append((start, i, "PERSON"))
                    start = None
                if tag == "B-PS":
                    start = i
            yield sid, "".join(chars), spans

    with path.open(encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if line.startswith("## "):
                if "\t" in line and line[3:].startswith("klue"):
                    yield from flush()
                    sid, chars, tags = line[3:].split("\t", 1)[0], [], []
                continue
            if not line:
                continue
            char, _, tag = line.rpartition("\t")
            chars.append(char or " ")
            tags.append(tag)
    yield from flush()


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _f2(p: float, r: float) -> float:
    return 5 * p * r / (4 * p + r) if p + r else 0.0


def _score_set(
    examples: list[tuple[str, str, list[Span]]],
    min_score: float,
    person: str,
    desc: str,
    person_model: Path | None = None,
) -> dict[str, Any]:
    """Per-type span counts (gold, found, exact, predicted, correct), leak characters and missed ids."""
    c: dict[str, Counter] = {t: Counter() for t in PII_TYPES}
    missed: dict[str, list[str]] = {t: [] for t in PII_TYPES}
    fp_docs, fp_ids = 0, []
    for ex_id, text, gold in tqdm(examples, desc=desc, unit=" sentences", disable=None, mininterval=1):
        pred = [
            (s.start, s.end, s.type)
            for s in detect(text, min_score=min_score, person=person, person_model=person_model)
        ]
        if not gold and pred:
            fp_docs += 1
            fp_ids.append(ex_id)
        covered = [False] * len(text)
        for s, e, _ in pred:
            covered[s:e] = [True] * (e - s)
        for s, e, kind in gold:
            c[kind]["gold"] += 1
            c[kind]["gold_chars"] += e - s
            c[kind]["leaked_chars"] += covered[s:e].count(False)
            hits = [p for p in pred if p[2] == kind and _overlaps(p[:2], (s, e))]
            if hits:
                c[kind]["found"] += 1
                c[kind]["exact"] += any(p[:2] == (s, e) for p in hits)
            else:
                missed[kind].append(ex_id)
        for s, e, kind in pred:
            c[kind]["predicted"] += 1
            if any(g[2] == kind and _overlaps((s, e), g[:2]) for g in gold):
                c[kind]["correct"] += 1
            elif not gold:
                c[kind]["on_negatives"] += 1
    return {"counts": c, "missed": missed, "fp_docs": fp_docs, "fp_ids": fp_ids}


def _metrics(cnt: Counter) -> dict[str, Any]:
    p = cnt["correct"] / cnt["predicted"] if cnt["predicted"] else None
    r = cnt["found"] / cnt["gold"] if cnt["gold"] else None
    leak = 1 - cnt["leaked_chars"] / cnt["gold_chars"] if cnt["gold_chars"] else None
    out = {
        "gold": cnt["gold"],
        "predicted": cnt["predicted"],
        "precision": p,
        "recall": r,
        "f2": _f2(p, r) if p is not None and r is not None else None,
        "exact_match_recall": cnt["exact"] / cnt["gold"] if cnt["gold"] else None,
        "leak_recall": leak,
        "detections_on_negatives": cnt["on_negatives"],
    }
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}


def evaluate(config: PiiEvalConfig) -> dict[str, Any]:
    """Score the detector; writes ``pii_eval.json`` and ``pii_eval.md`` into ``config.output``."""
    started = time.time()
    pos = load_labelled(config.positives)
    neg = load_labelled(config.negatives)
    if any(g for _, _, g in neg):
        raise KplmError(f"{config.negatives}: negative sentences must have no spans")
    labelled = _score_set(pos + neg, config.min_score, config.person, "pii eval", config.person_model)
    types = {t: _metrics(labelled["counts"][t]) for t in PII_TYPES}
    result: dict[str, Any] = {
        "matching": "span found = same-type detection overlapping it; leak recall = gold chars covered by any "
        "detection",
        "min_score": config.min_score,
        "person": config.person,
        "person_model": str(config.person_model) if config.person_model else None,
        "labelled": {"positives": len(pos), "negatives": len(neg)},
        "types": types,
        "negatives_with_detections": labelled["fp_docs"],
        "negative_fp_rate": round(labelled["fp_docs"] / len(neg), 4) if neg else None,
        "negative_fp_ids": labelled["fp_ids"],
        "missed_ids": {t: ids for t, ids in labelled["missed"].items() if ids},
    }
    if config.klue_ner is not None:
        klue = list(load_klue_ps(config.klue_ner))
        result["klue_ner_person"] = _klue_person(klue, config, "klue-ner PS")
        if config.person == "crf":
            # The tagger learned from part of this very file: its figures on the rest are the fair ones.
            from kplm.pii.person_crf import holdout_every

            every = holdout_every(config.person_model)  # type: ignore[arg-type]
            held = [ex for i, ex in enumerate(klue) if i % every == 0]
            result["klue_ner_person"]["caveat"] = (
                f"the crf model was trained on KLUE-NER dev sentences with index % {every} != 0: all_ps and "
                "non_pseudonymised_ps include them (optimistic); held_out is the model's unseen part"
            )
            result["klue_ner_person"]["held_out"] = _klue_person(held, config, "klue-ner PS held out")
    result["seconds"] = round(time.time() - started, 2)
    _write(config.output, result)
    return result


def _klue_person(klue: list[tuple[str, str, list[Span]]], config: PiiEvalConfig, desc: str) -> dict[str, Any]:
    """PERSON metrics on KLUE sentences: all PS spans, and the Hangul ones apart (spans of one ASCII
    letter, ``<A:PS>``, are KLUE's own pseudonyms)."""
    scored = _score_set(klue, config.min_score, config.person, desc, config.person_model)
    real = [(i, t, [g for g in gold if not t[g[0] : g[1]].isascii()]) for i, t, gold in klue]
    real_scored = _score_set(
        [r for r in real if r[2]], config.min_score, config.person, desc + " (Hangul)", config.person_model
    )
    return {
        "sentences": len(klue),
        "all_ps": _metrics(scored["counts"]["PERSON"]),
        "non_pseudonymised_ps": _metrics(real_scored["counts"]["PERSON"]),
    }


def _markdown(result: dict[str, Any]) -> str:
    def f(v: Any) -> str:
        return "–" if v is None else (f"{v:.4f}" if isinstance(v, float) else str(v))

    lines = [
        "# kplm PII evaluation",
        "",
        f"Matching: {result['matching']}. min_score {result['min_score']}, PERSON detector {result['person']}.",
        f"Labelled set: {result['labelled']['positives']} positive, {result['labelled']['negatives']} negative "
        f"sentences; negatives with any detection: {result['negatives_with_detections']} "
        f"({f(result['negative_fp_rate'])}).",
        "",
        "| type | gold | predicted | precision | recall | F2 | exact recall | leak recall | on negatives |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for t, m in result["types"].items():
        lines.append(
            f"| {t} | {m['gold']} | {m['predicted']} | {f(m['precision'])} | {f(m['recall'])} | {f(m['f2'])} | "
            f"{f(m['exact_match_recall'])} | {f(m['leak_recall'])} | {m['detections_on_negatives']} |"
        )
    if "klue_ner_person" in result:
        k = result["klue_ner_person"]
        parts = [("", k)] + ([("held_out ", k["held_out"])] if "held_out" in k else [])
        for prefix, part in parts:
            lines += [
                "",
                f"KLUE-NER dev PERSON, {prefix or 'whole file '}({part['sentences']} sentences):",
                "",
            ]
            for name in ("all_ps", "non_pseudonymised_ps"):
                m = part[name]
                lines.append(
                    f"- {prefix}{name}: {m['gold']} spans, recall {f(m['recall'])}, precision "
                    f"{f(m['precision'])}, F2 {f(m['f2'])}, leak recall {f(m['leak_recall'])}"
                )
        if "caveat" in k:
            lines += ["", f"Caveat: {k['caveat']}."]
    return "\n".join(lines) + "\n"


def _write(folder: Path, result: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in (
        ("pii_eval.json", json.dumps(result, ensure_ascii=False, indent=2)),
        ("pii_eval.md", _markdown(result)),
    ):
        tmp = folder / f".{name}.tmp{os.getpid()}"
        tmp.write_text(body, encoding="utf-8")
        os.replace(tmp, folder / name)
