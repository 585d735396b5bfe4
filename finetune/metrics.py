"""The KLUE metrics, computed exactly as KLUE-baseline's ``klue_baseline/metrics`` computes them.

Pure Python/NumPy re-implementations (no scikit-learn, scipy or seqeval needed) of the functions the KLUE
paper's leaderboard numbers come from. Every score is a percentage (0–100), as KLUE reports it. Where
KLUE-baseline's code differs from its own docstrings or from the textbook definition, the code is followed
and the difference is noted here:

* NER character-level macro-F1 averages over *all* tags of the label list, ``O`` included (the docstring
  says "except O"; the code passes every label index), with ``zero_division=1`` for tags absent from both.
* DP "UAS"/"LAS" on the leaderboard are *macro-F1* scores (``uas_macro_f1``/``las_macro_f1``): UAS macro-F1
  treats each head index as a class; LAS macro-F1 folds the relation labels from index 15 of the KLUE-DP
  label list on into one "others" class and replaces the predicted label of every wrongly attached word by
  a PAD class. No punctuation is excluded; only padded positions are. Plain attachment accuracies
  (``uas``/``las``, identical to KLUE's micro-F1 variants) are reported too.
* MRC "ROUGE-W" is KLUE's character-level F1 of the longest common *consecutive* substring (LCCS) of the
  normalised prediction and answer (``difflib.SequenceMatcher.find_longest_match``), not Lin's weighted-LCS
  ROUGE-W; :func:`weighted_lcs_rouge_w` gives the latter for reference only.
* RE AUPRC is the mean over all classes (``no_relation`` included) of the trapezoidal area under each
  one-vs-rest precision–recall curve (scikit-learn's ``precision_recall_curve`` + ``auc``).
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Sequence
from difflib import SequenceMatcher

import numpy as np

#: KLUE-DP relation labels in KLUE-baseline's order (``klue_baseline/data/klue_dp.py``).
DP_LABELS = [
    "NP",
    "NP_AJT",
    "VP",
    "NP_SBJ",
    "VP_MOD",
    "NP_OBJ",
    "AP",
    "NP_CNJ",
    "NP_MOD",
    "VNP",
    "DP",
    "VP_AJT",
    "VNP_MOD",
    "NP_CMP",
    "VP_SBJ",
    "VP_CMP",
    "VP_OBJ",
    "VNP_CMP",
    "AP_MOD",
    "X_AJT",
    "VP_CNJ",
    "VNP_AJT",
    "IP",
    "X",
    "X_SBJ",
    "VNP_OBJ",
    "VNP_SBJ",
    "X_OBJ",
    "AP_AJT",
    "L",
    "X_MOD",
    "X_CNJ",
    "VNP_CNJ",
    "X_CMP",
    "AP_CMP",
    "AP_SBJ",
    "R",
    "NP_SVJ",
]
DP_OTHERS_FROM = 15  # KLUE-baseline's ``others_idx``: labels from this index on count as one class
_DP_OTHERS, _DP_PAD = -3, -2


def _f1_from_counts(tp: int, fp: int, fn: int, zero_division: float = 0.0) -> float:
    """F1 = 2tp / (2tp + fp + fn); ``zero_division`` when the label never occurs (scikit-learn's rule)."""
    denominator = 2 * tp + fp + fn
    return 2 * tp / denominator if denominator else zero_division


def macro_f1(
    y_true: Sequence, y_pred: Sequence, labels: Sequence | None = None, zero_division: float = 0.0
) -> float:
    """Unweighted mean of per-label F1 (scikit-learn ``f1_score(average="macro")``), as a fraction.

    ``labels`` defaults to the sorted union of the labels in ``y_true`` and ``y_pred``.
    """
    if len(y_true) != len(y_pred):
        raise ValueError(f"macro_f1: {len(y_true)} gold labels but {len(y_pred)} predictions")
    if labels is None:
        labels = sorted(set(y_true) | set(y_pred))
    scores = []
    for label in labels:
        tp = sum(1 for t, p in zip(y_true, y_pred, strict=True) if t == label and p == label)
        fp = sum(1 for t, p in zip(y_true, y_pred, strict=True) if t != label and p == label)
        fn = sum(1 for t, p in zip(y_true, y_pred, strict=True) if t == label and p != label)
        scores.append(_f1_from_counts(tp, fp, fn, zero_division))
    return float(np.mean(scores)) if scores else 0.0


# --- YNAT, NLI, STS -------------------------------------------------------------------------------


def ynat_macro_f1(preds: Sequence, labels: Sequence) -> float:
    """YNAT: macro-F1 over the topic classes present in gold or predictions (×100)."""
    return macro_f1(list(labels), list(preds)) * 100.0


def nli_accuracy(preds: Sequence, labels: Sequence) -> float:
    """KLUE-NLI (and KorNLI): accuracy (×100)."""
    if len(preds) != len(labels) or not labels:
        raise ValueError("nli_accuracy: need equally many (>0) predictions and labels")
    return sum(1 for p, t in zip(preds, labels, strict=True) if p == t) / len(labels) * 100.0


def sts_pearsonr(preds: Sequence[float], labels: Sequence[float]) -> float:
    """KLUE-STS: Pearson correlation of predicted and real-valued gold similarity (×100)."""
    x, y = np.asarray(preds, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    if x.shape != y.shape or x.size < 2:
        raise ValueError("sts_pearsonr: need equally many (>=2) predictions and labels")
    x, y = x - x.mean(), y - y.mean()
    denominator = math.sqrt(float((x * x).sum()) * float((y * y).sum()))
    return float((x * y).sum()) / denominator * 100.0 if denominator else float("nan")


def sts_f1(preds: Sequence[float], labels: Sequence[float], threshold: float = 3.0) -> float:
    """KLUE-STS: binary F1 after thresholding both scores at ``>= 3.0`` (positive class 1, ×100)."""
    p = [1 if v >= threshold else 0 for v in preds]
    t = [1 if v >= threshold else 0 for v in labels]
    tp = sum(1 for a, b in zip(t, p, strict=True) if a == b == 1)
    fp = sum(1 for a, b in zip(t, p, strict=True) if a == 0 and b == 1)
    fn = sum(1 for a, b in zip(t, p, strict=True) if a == 1 and b == 0)
    return _f1_from_counts(tp, fp, fn) * 100.0


# --- NER ------------------------------------------------------------------------------------------


def iob2_entities(tags: Sequence[str]) -> set[tuple[str, int, int]]:
    """Entities ``(type, start, end_exclusive)`` of a strict IOB2 sequence (seqeval ``mode="strict"``).

    An entity starts at ``B-X`` and extends over the following ``I-X``; an ``I-X`` that does not continue
    a ``B-X``/``I-X`` of the same type starts no entity (it is invalid in strict IOB2).
    """
    entities, start, kind = set(), None, None
    for i, tag in enumerate([*tags, "O"]):
        prefix, _, label = tag.partition("-")
        if kind is not None and not (prefix == "I" and label == kind):
            entities.add((kind, start, i))
            start, kind = None, None
        if prefix == "B":
            start, kind = i, label
    return entities


def ner_entity_macro_f1(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> float:
    """KLUE-NER entity-level macro-F1, strict IOB2 (seqeval ``f1_score(average="macro")``, ×100).

    ``gold``/``pred`` are tag sequences per sentence. Per entity type F1 over exact (type, span) matches,
    averaged over the types occurring in gold or predictions.
    """
    if len(gold) != len(pred):
        raise ValueError(f"ner_entity_macro_f1: {len(gold)} gold sentences but {len(pred)} predicted")
    true_entities, pred_entities = set(), set()
    for n, (g, p) in enumerate(zip(gold, pred, strict=True)):
        if len(g) != len(p):
            raise ValueError(f"ner_entity_macro_f1: sentence {n}: {len(g)} gold tags but {len(p)} predicted")
        true_entities |= {(n, *e) for e in iob2_entities(g)}
        pred_entities |= {(n, *e) for e in iob2_entities(p)}
    types = sorted({e[1] for e in true_entities | pred_entities})
    scores = []
    for kind in types:
        t = {e for e in true_entities if e[1] == kind}
        p = {e for e in pred_entities if e[1] == kind}
        tp = len(t & p)
        scores.append(_f1_from_counts(tp, len(p) - tp, len(t) - tp))
    return float(np.mean(scores)) * 100.0 if scores else 0.0


def ner_char_macro_f1(
    gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]], label_list: Sequence[str]
) -> float:
    """KLUE-NER character-level macro-F1 over every tag in ``label_list`` (``O`` included), ×100.

    Tags are compared character by character; a tag absent from gold and predictions scores 1
    (``zero_division=True`` in KLUE-baseline).
    """
    flat_gold = [t for sentence in gold for t in sentence]
    flat_pred = [t for sentence in pred for t in sentence]
    return macro_f1(flat_gold, flat_pred, labels=list(label_list), zero_division=1.0) * 100.0


# --- RE -------------------------------------------------------------------------------------------


def re_micro_f1(preds: Sequence[str], labels: Sequence[str], no_relation: str = "no_relation") -> float:
    """KLUE-RE micro-F1 over all relation classes except ``no_relation`` (×100)."""
    tp = sum(1 for p, t in zip(preds, labels, strict=True) if p == t and t != no_relation)
    fp = sum(1 for p, t in zip(preds, labels, strict=True) if p != t and p != no_relation)
    fn = sum(1 for p, t in zip(preds, labels, strict=True) if p != t and t != no_relation)
    return _f1_from_counts(tp, fp, fn) * 100.0


def pr_curve_auc(targets: Sequence[int], scores: Sequence[float]) -> float:
    """Trapezoidal area under the precision–recall curve of one binary problem.

    Same points as scikit-learn's ``precision_recall_curve`` (one per distinct score, plus recall 0 /
    precision 1), integrated with ``auc(recall, precision)``. With no positive, recall is 1 everywhere
    (scikit-learn ≥ 1.1 behaviour).
    """
    y = np.asarray(targets, dtype=np.float64)
    s = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-s, kind="mergesort")
    y, s = y[order], s[order]
    last_of_each = np.r_[np.where(np.diff(s))[0], y.size - 1]
    tps = np.cumsum(y)[last_of_each]
    fps = (1 + last_of_each) - tps
    precision = tps / (tps + fps)
    recall = tps / tps[-1] if tps[-1] else np.ones_like(tps)
    precision, recall = np.r_[precision[::-1], 1.0], np.r_[recall[::-1], 0.0]
    return float(abs(np.sum(np.diff(recall) * (precision[1:] + precision[:-1]) / 2)))


def re_auprc(probs: Sequence[Sequence[float]], labels: Sequence[int]) -> float:
    """KLUE-RE AUPRC: mean over all classes of the one-vs-rest PR-curve area (×100).

    ``probs`` is ``[examples, classes]``; ``labels`` are class indices.
    """
    p = np.asarray(probs, dtype=np.float64)
    onehot = np.eye(p.shape[1])[np.asarray(labels, dtype=np.int64)]
    return float(np.mean([pr_curve_auc(onehot[:, c], p[:, c]) for c in range(p.shape[1])])) * 100.0


# --- DP -------------------------------------------------------------------------------------------


def _dp_flat(heads: Sequence[Sequence[int]]) -> list[int]:
    return [h for sentence in heads for h in sentence]


def dp_scores(
    gold_heads: Sequence[Sequence[int]],
    gold_labels: Sequence[Sequence[str]],
    pred_heads: Sequence[Sequence[int]],
    pred_labels: Sequence[Sequence[str]],
) -> dict[str, float]:
    """KLUE-DP: ``uas_macro_f1``, ``las_macro_f1`` (the leaderboard's UAS/LAS) and plain ``uas``/``las``.

    Heads are 1-based word indices (0 = root), one per word (eojeol); labels are KLUE-DP relation names.
    """
    gh, ph = _dp_flat(gold_heads), _dp_flat(pred_heads)
    gl, pl = _dp_flat(gold_labels), _dp_flat(pred_labels)
    if not (len(gh) == len(ph) == len(gl) == len(pl)) or not gh:
        raise ValueError("dp_scores: gold and predicted heads/labels must have the same (>0) words")
    index = {label: i for i, label in enumerate(DP_LABELS)}

    def folded(label: str) -> int:
        i = index.get(label, len(DP_LABELS))
        return _DP_OTHERS if i >= DP_OTHERS_FROM else i

    head_ok = [g == p for g, p in zip(gh, ph, strict=True)]
    gold_types = [folded(label) for label in gl]
    pred_types = [folded(label) if ok else _DP_PAD for label, ok in zip(pl, head_ok, strict=True)]
    return {
        "uas_macro_f1": macro_f1(gh, ph) * 100.0,
        "las_macro_f1": macro_f1(gold_types, pred_types) * 100.0,
        "uas": sum(head_ok) / len(gh) * 100.0,
        "las": sum(1 for ok, g, p in zip(head_ok, gl, pl, strict=True) if ok and g == p) / len(gh) * 100.0,
    }


# --- MRC ------------------------------------------------------------------------------------------

# KLUE-baseline's pattern, kept byte for byte: a character class followed by the literal "()‘’", so it
# only removes those 5-character runs; ASCII punctuation is removed by the next step anyway.
_MRC_NORMALIZE = re.compile(r"[\'\"《》<>〈〉]\(\)\‘\’")
_PUNCTUATION = set(string.punctuation)


def normalize_mrc_answer(answer: str) -> str:
    """KLUE-MRC answer normalisation: lower-case, drop ASCII punctuation, collapse white space."""
    answer = _MRC_NORMALIZE.sub(" ", answer.lower())
    answer = "".join(c for c in answer if c not in _PUNCTUATION)
    return " ".join(answer.split())


def lccs_f1(pred: str, label: str) -> float:
    """KLUE's "ROUGE-W": F1 of the longest common consecutive character substring (fraction)."""
    if label == "":
        return float(pred == label)
    size = SequenceMatcher(None, pred, label).find_longest_match(0, len(pred), 0, len(label)).size
    precision = size / len(pred) if pred else 0.0
    recall = size / len(label)
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def mrc_scores(preds: Sequence[str], answers: Sequence[Sequence[str]]) -> dict[str, float]:
    """KLUE-MRC ``exact_match`` and ``rouge_w`` (×100): best over each question's answers, averaged.

    An unanswerable question has no answers; only the empty prediction is then correct.
    """
    if len(preds) != len(answers) or not preds:
        raise ValueError("mrc_scores: need equally many (>0) predictions and answer lists")
    em, rouge = [], []
    for pred, golds in zip(preds, answers, strict=True):
        p = normalize_mrc_answer(pred)
        normalized = [normalize_mrc_answer(g) for g in golds] or [""]
        em.append(max([0.0] + [float(p == g) for g in normalized]))
        rouge.append(max([0.0] + [lccs_f1(p, g) for g in normalized]))
    return {"exact_match": float(np.mean(em)) * 100.0, "rouge_w": float(np.mean(rouge)) * 100.0}


def weighted_lcs_rouge_w(pred: str, label: str, weight: float = 1.2) -> float:
    """Lin (2004) ROUGE-W F-measure on characters with f(k) = k**weight (reference; not KLUE's score)."""
    if not pred or not label:
        return float(pred == label)
    m, n = len(pred), len(label)
    c = [[0.0] * (n + 1) for _ in range(m + 1)]
    w = [[0] * (n + 1) for _ in range(m + 1)]
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            if pred[i - 1] == label[j - 1]:
                k = w[i - 1][j - 1]
                c[i][j] = c[i - 1][j - 1] + (k + 1) ** weight - k**weight
                w[i][j] = k + 1
            else:
                c[i][j] = max(c[i - 1][j], c[i][j - 1])
    recall = (c[m][n] / n**weight) ** (1 / weight)
    precision = (c[m][n] / m**weight) ** (1 / weight)
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


# --- WoS ------------------------------------------------------------------------------------------


def wos_scores(preds: Sequence[Sequence[str]], golds: Sequence[Sequence[str]]) -> dict[str, float]:
    """WoS ``joint_goal_accuracy`` and ``slot_micro_f1`` (×100) over dialogue turns.

    Each turn's state is a list of ``"domain-slot-value"`` strings. JGA: share of turns whose predicted
    set equals the gold set. Slot F1 (TRADE's ``compute_prf``): per-turn F1 averaged over turns, a turn
    with an empty gold state scoring 1 if the prediction is empty too, else 0.
    """
    if len(preds) != len(golds) or not golds:
        raise ValueError("wos_scores: need equally many (>0) predicted and gold turns")
    joint, f1_sum = 0, 0.0
    for pred, gold in zip(preds, golds, strict=True):
        joint += set(pred) == set(gold)
        if gold:
            tp = sum(1 for g in gold if g in pred)
            fp = sum(1 for p in pred if p not in gold)
            precision = tp / (tp + fp) if tp + fp else 0.0
            recall = tp / len(gold)
            f1_sum += 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        else:
            f1_sum += 1.0 if not pred else 0.0
    return {"joint_goal_accuracy": joint / len(golds) * 100.0, "slot_micro_f1": f1_sum / len(golds) * 100.0}
