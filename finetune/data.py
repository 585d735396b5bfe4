"""Readers for the KLUE task files in their official formats, plus KorSTS/KorNLI, and a seeded split.

Every reader returns plain dicts and raises :class:`~kplm.errors.KplmError` naming the file (and line or
record) for malformed input:

* sentence (pair) tasks -> ``{"text_a", "text_b", "label"}`` (label: class name, or float score);
* KLUE-NER -> ``{"guid", "chars", "tags"}`` (one tag per character, spaces included);
* KLUE-DP -> ``{"guid", "words", "heads", "labels"}`` (eojeol, 1-based heads, relation names);
* KLUE-RE -> ``{"guid", "sentence", "subject", "object", "label"}``; KLUE-MRC -> one dict per question;
  WoS -> one dict per user turn with its dialogue history and gold state.

:func:`split_examples` cuts one file into a train and an evaluation part deterministically and names both
parts, e.g. ``klue-nli-v1.1_dev[:80%]`` and ``klue-nli-v1.1_dev[80%:]`` (shuffled with the given seed).
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path
from typing import Any

from kplm.errors import KplmError

YNAT_LABELS = ("IT과학", "경제", "사회", "생활문화", "세계", "스포츠", "정치")
NLI_LABELS = ("entailment", "neutral", "contradiction")
NSMC_LABELS = ("negative", "positive")
NER_LABELS = tuple(f"{p}-{t}" for t in ("DT", "LC", "OG", "PS", "QT", "TI") for p in "BI") + ("O",)

Example = dict[str, Any]


def _read_json(path: Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise KplmError(f"data file not found: {path}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise KplmError(f"{path}: not valid UTF-8 (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise KplmError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None


def _json_records(path: Path, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    data = _read_json(path)
    if not isinstance(data, list):
        raise KplmError(f"{path}: expected a JSON list of examples, got {type(data).__name__}")
    for i, record in enumerate(data):
        missing = [f for f in fields if not isinstance(record, dict) or f not in record]
        if missing:
            raise KplmError(f"{path}: example {i}: missing field '{missing[0]}'")
    return data


def _check_label(path: Path, where: str, label: Any, allowed: tuple[str, ...]) -> str:
    if label not in allowed:
        raise KplmError(f"{path}: {where}: unknown label {label!r} (expected one of {', '.join(allowed)})")
    return label


def load_klue_nli(path: Path) -> list[Example]:
    """KLUE-NLI JSON list: ``premise``, ``hypothesis``, ``gold_label``."""
    return [
        {
            "text_a": r["premise"],
            "text_b": r["hypothesis"],
            "label": _check_label(path, f"example {i}", r["gold_label"], NLI_LABELS),
        }
        for i, r in enumerate(_json_records(path, ("premise", "hypothesis", "gold_label")))
    ]


def load_klue_sts(path: Path) -> list[Example]:
    """KLUE-STS JSON list: ``sentence1``, ``sentence2``, ``labels.real-label`` (0–5)."""
    out = []
    for i, r in enumerate(_json_records(path, ("sentence1", "sentence2", "labels"))):
        try:
            score = float(r["labels"]["real-label"])
        except (TypeError, KeyError, ValueError):
            raise KplmError(f"{path}: example {i}: labels.real-label missing or not a number") from None
        out.append({"text_a": r["sentence1"], "text_b": r["sentence2"], "label": score})
    return out


def load_ynat(path: Path) -> list[Example]:
    """YNAT JSON list: ``title``, ``label`` (one of the 7 topics)."""
    return [
        {
            "text_a": r["title"],
            "text_b": None,
            "label": _check_label(path, f"example {i}", r["label"], YNAT_LABELS),
        }
        for i, r in enumerate(_json_records(path, ("title", "label")))
    ]


def load_nsmc(path: Path) -> list[Example]:
    """NSMC sentiment JSONL (what ``kplm study`` writes): one ``{"text", "label"}`` per line, label 0 or 1
    (0: ratings 1–4, 1: ratings 9–10)."""
    path = Path(path)
    if not path.is_file():
        raise KplmError(f"data file not found: {path}")
    out = []
    with open(path, encoding="utf-8", errors="strict") as f:
        try:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    raise KplmError(f"{path}:{n}: invalid JSON: {e.msg}") from None
                if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                    raise KplmError(f"{path}:{n}: missing field 'text'")
                if record.get("label") not in (0, 1):
                    raise KplmError(f"{path}:{n}: label must be 0 or 1, got {record.get('label')!r}")
                out.append({"text_a": record["text"], "text_b": None, "label": NSMC_LABELS[record["label"]]})
        except UnicodeDecodeError as e:
            raise KplmError(f"{path}: not valid UTF-8 (byte {e.start})") from None
    return out


def _tsv_rows(path: Path, columns: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    path = Path(path)
    if not path.is_file():
        raise KplmError(f"data file not found: {path}")
    try:
        with path.open(encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            missing = [c for c in columns if c not in (reader.fieldnames or [])]
            if missing:
                raise KplmError(f"{path}: header lacks column '{missing[0]}'")
            return [(n, row) for n, row in enumerate(reader, start=2)]
    except UnicodeDecodeError as e:
        raise KplmError(f"{path}: not valid UTF-8 (byte {e.start})") from None


def load_korsts(path: Path) -> list[Example]:
    """KorSTS TSV (header ``genre filename year id score sentence1 sentence2``)."""
    out = []
    for line, row in _tsv_rows(path, ("score", "sentence1", "sentence2")):
        try:
            score = float(row["score"])
        except (TypeError, ValueError):
            raise KplmError(f"{path}:{line}: score {row['score']!r} is not a number") from None
        if row["sentence1"] is None or row["sentence2"] is None:
            raise KplmError(f"{path}:{line}: missing sentence column")
        out.append({"text_a": row["sentence1"], "text_b": row["sentence2"], "label": score})
    return out


def load_kornli(path: Path) -> list[Example]:
    """KorNLI TSV (header ``sentence1 sentence2 gold_label``)."""
    return [
        {
            "text_a": row["sentence1"],
            "text_b": row["sentence2"],
            "label": _check_label(path, f"line {line}", row["gold_label"], NLI_LABELS),
        }
        for line, row in _tsv_rows(path, ("sentence1", "sentence2", "gold_label"))
    ]


def _blocks(path: Path) -> list[tuple[int, str, list[tuple[int, list[str]]]]]:
    """Sentence blocks of a KLUE TSV: ``(first line, guid, [(line, columns)])``; ``##`` lines are headers."""
    path = Path(path)
    if not path.is_file():
        raise KplmError(f"data file not found: {path}")
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except UnicodeDecodeError as e:
        raise KplmError(f"{path}: not valid UTF-8 (byte {e.start})") from None
    blocks, guid, rows, start = [], None, [], 0
    for n, line in enumerate(lines, start=1):
        if line.startswith("##"):
            head = line[2:].strip().split("\t")[0]
            if head.startswith("klue-"):
                guid, start = head, n
            continue
        if line.strip("\r") == "":
            if rows:
                blocks.append((start, guid or f"{path.stem}-{len(blocks)}", rows))
            guid, rows = None, []
            continue
        rows.append((n, line.rstrip("\r").split("\t")))
    if rows:
        blocks.append((start, guid or f"{path.stem}-{len(blocks)}", rows))
    return blocks


def load_klue_ner(path: Path) -> list[Example]:
    """KLUE-NER TSV: one ``CHAR<TAB>TAG`` row per character, blank line between sentences."""
    out = []
    for _, guid, rows in _blocks(path):
        chars, tags = [], []
        for n, cols in rows:
            if len(cols) != 2:
                raise KplmError(f"{path}:{n}: expected 'CHAR<TAB>TAG', got {len(cols)} column(s)")
            chars.append(cols[0])
            tags.append(_check_label(path, f"line {n}", cols[1], NER_LABELS))
        out.append({"guid": guid, "chars": chars, "tags": tags})
    return out


def load_klue_dp(path: Path) -> list[Example]:
    """KLUE-DP TSV: ``INDEX WORD_FORM LEMMA POS HEAD DEPREL`` per eojeol, blank line between sentences."""
    out = []
    for _, guid, rows in _blocks(path):
        words, heads, labels = [], [], []
        for n, cols in rows:
            if len(cols) != 6 or not cols[0].isdigit() or not cols[4].isdigit():
                raise KplmError(
                    f"{path}:{n}: expected 'INDEX WORD LEMMA POS HEAD DEPREL' with numeric index/head"
                )
            words.append(cols[1])
            heads.append(int(cols[4]))
            labels.append(cols[5])
        out.append({"guid": guid, "words": words, "heads": heads, "labels": labels})
    return out


def _entity(path: Path, i: int, sentence: str, entity: Any, which: str) -> dict[str, Any]:
    try:
        start, end, word, kind = (
            int(entity["start_idx"]),
            int(entity["end_idx"]),
            entity["word"],
            entity["type"],
        )
    except (TypeError, KeyError, ValueError):
        raise KplmError(f"{path}: example {i}: {which} needs word, start_idx, end_idx, type") from None
    if sentence[start : end + 1] != word:
        raise KplmError(f"{path}: example {i}: {which} word does not match sentence[{start}:{end + 1}]")
    return {"word": word, "start": start, "end": end, "type": kind}


def load_klue_re(path: Path) -> list[Example]:
    """KLUE-RE JSON list: ``sentence``, ``subject_entity``/``object_entity`` (inclusive ``end_idx``), ``label``."""
    fields = ("guid", "sentence", "subject_entity", "object_entity", "label")
    return [
        {
            "guid": r["guid"],
            "sentence": r["sentence"],
            "subject": _entity(path, i, r["sentence"], r["subject_entity"], "subject_entity"),
            "object": _entity(path, i, r["sentence"], r["object_entity"], "object_entity"),
            "label": r["label"],
        }
        for i, r in enumerate(_json_records(path, fields))
    ]


def load_klue_mrc(path: Path) -> list[Example]:
    """KLUE-MRC JSON (SQuAD layout ``data[].paragraphs[].qas[]``): one example per question.

    ``answers`` lists the gold answer texts (empty for an unanswerable question); every answer must sit
    at its ``answer_start`` in the context.
    """
    data = _read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise KplmError(f"{path}: expected an object with a 'data' list (KLUE-MRC/SQuAD layout)")
    out = []
    for d, document in enumerate(data["data"]):
        for paragraph in document.get("paragraphs", []):
            context = paragraph.get("context")
            if not isinstance(context, str):
                raise KplmError(f"{path}: data[{d}]: paragraph without a context")
            for qa in paragraph.get("qas", []):
                guid = qa.get("guid", f"data[{d}]")
                if "question" not in qa:
                    raise KplmError(f"{path}: {guid}: question missing")
                impossible = bool(qa.get("is_impossible", False))
                answers = [] if impossible else qa.get("answers", [])
                for a in answers:
                    start = a.get("answer_start")
                    if not isinstance(start, int) or context[start : start + len(a.get("text", ""))] != a.get(
                        "text"
                    ):
                        raise KplmError(
                            f"{path}: {guid}: answer {a.get('text')!r} not at answer_start {start}"
                        )
                out.append(
                    {
                        "guid": guid,
                        "context": context,
                        "question": qa["question"],
                        "answers": [a["text"] for a in answers],
                        "answer_starts": [a["answer_start"] for a in answers],
                        "question_type": qa.get("question_type"),
                        "is_impossible": impossible,
                    }
                )
    return out


def load_wos(path: Path) -> list[Example]:
    """WoS JSON list of dialogues: ``guid``, ``dialogue`` of ``{role, text, state}`` turns.

    Returns one example per *user* turn: the dialogue so far and its gold state (``domain-slot-value``
    strings), the unit of WoS joint goal accuracy and slot F1.
    """
    out = []
    for i, r in enumerate(_json_records(path, ("guid", "dialogue"))):
        history: list[str] = []
        for t, turn in enumerate(r["dialogue"]):
            if not isinstance(turn, dict) or turn.get("role") not in ("user", "sys") or "text" not in turn:
                raise KplmError(f"{path}: dialogue {i} turn {t}: needs role user/sys and text")
            history.append(turn["text"])
            if turn["role"] == "user":
                state = turn.get("state")
                if not isinstance(state, list) or any(s.count("-") < 2 for s in state):
                    raise KplmError(
                        f"{path}: dialogue {i} turn {t}: state must list 'domain-slot-value' strings"
                    )
                out.append({"guid": f"{r['guid']}-{t}", "history": list(history), "state": state})
    return out


LOADERS = {
    "ynat": load_ynat,
    "klue-sts": load_klue_sts,
    "klue-nli": load_klue_nli,
    "klue-ner": load_klue_ner,
    "klue-dp": load_klue_dp,
    "klue-re": load_klue_re,
    "klue-mrc": load_klue_mrc,
    "wos": load_wos,
    "korsts": load_korsts,
    "kornli": load_kornli,
    "nsmc": load_nsmc,
}


def load_task_file(task: str, path: Path) -> list[Example]:
    """Read ``path`` with the reader of ``task``; an empty file is an error."""
    if task not in LOADERS:
        raise KplmError(f"no reader for task '{task}' (known: {', '.join(LOADERS)})")
    examples = LOADERS[task](Path(path))
    if not examples:
        raise KplmError(f"{path}: no examples")
    return examples


#: tasks whose examples share a premise (one hypothesis per label): a split keeps a premise's examples together
GROUPED_SPLITS = {"klue-nli": "text_a", "kornli": "text_a"}


def split_examples(
    examples: list[Example], name: str, ratio: float, seed: int, group_by: str | None = None
) -> tuple[list[Example], list[Example], str, str]:
    """Shuffle with ``seed`` and cut at ``ratio``: ``(train, eval, train_name, eval_name)``.

    With ``group_by`` (a field, e.g. the NLI premise ``text_a``) whole groups are shuffled and cut, so no group
    has examples on both sides. KLUE-NLI gives each premise one hypothesis per label: split by example, a
    scored example's premise is almost always in training with the *other* labels, and a model that leans on
    the premise scores below chance.
    """
    if not 0 < ratio < 1:
        raise KplmError(f"split_ratio: must be between 0 and 1, got {ratio}")
    groups: dict[Any, list[int]] = {}
    for i, example in enumerate(examples):
        groups.setdefault(example[group_by] if group_by else i, []).append(i)
    keys = list(groups)
    random.Random(seed).shuffle(keys)
    order = [i for key in keys for i in groups[key]]
    target, cut = round(len(order) * ratio), 0
    for key in keys:  # whole groups until the train part holds at least ``ratio`` of the examples
        if cut >= target:
            break
        cut += len(groups[key])
    if cut == 0 or cut == len(order):
        raise KplmError(f"{name}: {len(order)} examples are too few to split at {ratio:.0%}")
    pct = f"{ratio * 100:g}%"
    tag = f"shuffled seed {seed}" + (f", grouped by {group_by}" if group_by else "")
    return (
        [examples[i] for i in order[:cut]],
        [examples[i] for i in order[cut:]],
        f"{name}[:{pct}] ({tag})",
        f"{name}[{pct}:] ({tag})",
    )
