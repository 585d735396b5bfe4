"""A learned PERSON tagger: a linear-chain CRF (python-crfsuite) over characters with MeCab-ko features.

The title-anchored recognizer finds names before 씨/기자/교수 …, and ``person: mecab`` every morpheme
mecab-ko-dic tags ``NNP,인명``; both miss most names of running text. This tagger labels every character
``B``/``I``/``O`` (begin/inside/outside a person name, KLUE-NER's own character-level scheme) from:

- the character and its neighbours (unigrams ±2, bigrams, trigram), its script, its place in the eojeol,
  whether it is a common surname syllable;
- the MeCab-ko morpheme it belongs to: part of speech, semantic class (``인명``, ``지명`` …), the
  character's position in the morpheme, the morpheme itself when short;
- the previous and the next two morphemes (surface and POS), which carry particles and titles (``이``,
  ``씨``, ``감독``, ``선수`` …).

Characters whose probability of being inside a name (1 − P(O), from the CRF marginals) reaches the model's
threshold form the names, a run split where ``B`` is likelier than ``I``; common nouns of address (하느님,
손님) and ASCII "names" glued to digits are dropped. Training data is KLUE-NER dev (CC BY-SA), so no model is
shipped: :func:`kplm.pii.person_crf_train.train_person` (``kplm pii train-person``) builds one from
``../shared/data`` into a user-given path in a minute or two.

Each process loads a model lazily once (:func:`crf_person_candidates`); steps carry only its path, so they
pickle. A model is a CRFsuite file plus ``<model>.json`` (format, feature version, threshold — chosen on
an inner validation fold of the training part, never on the held-out part — split, held-out metrics); a
missing, corrupt or outdated one raises :class:`~kplm.errors.KplmError`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kplm.errors import KplmError
from kplm.pii.recognizers import Candidate
from kplm.pii.recognizers_ext import _NOT_NAMES, _TITLES, SURNAMES, _words

FEATURE_VERSION = 2  # bump when features change: older models are refused with a clear message
MODEL_FORMAT = "kplm-person-crf"

# Titles and forms of address that follow names (the context recognizer's list plus a few more).
_TITLE_WORDS = frozenset(_TITLES) | frozenset(
    _words("모 군 양 옹 여사 아나운서 주임 상무 전무 이사 위원 검사 경위 경사 순경 신부 스님 목사 씨가 씨는")
)
_NOT_NAME_ENDS = ("번호", "주소", "계좌", "메일")  # 폰번호, 집주소: labels of structured values
_taggers: dict[str, Any] = {}
_mecab = None


def _get_mecab():  # noqa: ANN202 (mecab_ko has no type hints)
    global _mecab
    if _mecab is None:
        import mecab_ko as MeCab  # noqa: N813

        _mecab = MeCab.Tagger()
    return _mecab


def _morphemes(text: str) -> list[tuple[int, int, str, str]]:
    """(start, end, POS, semantic class) of each MeCab-ko morpheme found verbatim in ``text``."""
    out = []
    pos = 0
    node = _get_mecab().parseToNode(text)
    while node is not None:
        surface = node.surface
        if surface:
            idx = text.find(surface, pos)
            if idx >= 0:
                feat = node.feature.split(",", 2)
                sem = feat[1] if len(feat) > 1 and feat[1] != "*" else ""
                out.append((idx, idx + len(surface), feat[0], sem))
                pos = idx + len(surface)
        node = node.next
    return out


def _script(ch: str) -> str:
    if "\uac00" <= ch <= "\ud7a3":
        return "H"
    if ch.isdigit():
        return "D"
    if ch.isascii() and ch.isalpha():
        return "L"
    if ch.isspace():
        return "S"
    return "P" if not ch.isalnum() else "X"


def features(text: str) -> list[list[str]]:
    """The CRF feature strings of every character of ``text`` (same length as ``text``).

    Morpheme features are built once per morpheme and shared by its characters (the hot path of
    ``person: crf`` is here and in MeCab)."""
    n = len(text)
    padded = "^^" + text + "$$"
    scripts = [_script(ch) for ch in padded]
    morphs = _morphemes(text)
    nm = len(morphs)
    descs = (
        ["<none>"] + [f"{text[s:e] if e - s <= 4 else '~'}/{tag}" for s, e, tag, _ in morphs] + ["<none>"] * 2
    )
    titles = ["1" if text[s:e] in _TITLE_WORDS else "0" for s, e, _, _ in morphs] + ["0", "0"]
    per_morph: list[tuple[list[str], str, str, int]] = []  # shared features, mts prefix/suffix, start
    for k, (s, e, tag, sem) in enumerate(morphs):
        d = k + 1  # index into descs
        gap = "s" if k + 1 < nm and morphs[k + 1][0] > e else "g"
        shared = [
            "m=" + descs[d],
            "mt=" + tag,
            "ms=" + sem,
            "mp=" + descs[d - 1],
            "mn=" + descs[d + 1],
            "mn2=" + descs[d + 2],
            "mpt=" + (morphs[k - 1][2] if k > 0 else "^") + "|" + (morphs[k + 1][2] if k + 1 < nm else "$"),
            "tt=" + titles[k + 1] + titles[k + 2] + gap,
        ]
        per_morph.append((shared, "mts=" + tag + sem, str(min(e - s, 4)), s))
    owner = [-1] * n  # index into morphs of the morpheme covering each character
    for k, (s, e, _, _) in enumerate(morphs):
        owner[s:e] = [k] * (e - s)
    out = []
    run = 0
    for i in range(n):
        ch = padded[i + 2]
        run = 0 if ch.isspace() else run + 1
        p1, p2, n1, n2 = padded[i + 1], padded[i], padded[i + 3], padded[i + 4]
        f = [
            "b",
            "c=" + ch,
            "c-1=" + p1,
            "c+1=" + n1,
            "c-2=" + p2,
            "c+2=" + n2,
            "c-10=" + p1 + ch,
            "c0+1=" + ch + n1,
            "c-1+1=" + p1 + ch + n1,
            "c0+2=" + ch + n1 + n2,
            "t=" + scripts[i + 2] + scripts[i + 1] + scripts[i + 3],
            "wp=" + str(min(run, 4)),
        ]
        if ch in SURNAMES:
            f.append("sur0" if run == 1 else "surx")
        k = owner[i]
        if k >= 0:
            shared, mts, length, s = per_morph[k]
            f += shared
            f.append(mts + ("B" if i == s else "I") + length)
        else:
            f.append("m=<gap>")
        out.append(f)
    return out


def spans_from_marginals(
    probs: list[float], starts: list[bool], threshold: float
) -> list[tuple[int, int, float]]:
    """Person spans from per-character P(not O): maximal runs with P ≥ ``threshold``, split where ``B``
    is likelier than ``I``; the score of a span is its mean probability."""
    spans = []
    i, n = 0, len(probs)
    while i < n:
        if probs[i] < threshold:
            i += 1
            continue
        j = i + 1
        while j < n and probs[j] >= threshold and not starts[j]:
            j += 1
        spans.append((i, j, sum(probs[i:j]) / (j - i)))
        i = j
    return spans


def _tag(tagger: Any, text: str, threshold: float) -> list[tuple[int, int, float]]:
    if not text.strip():
        return []
    tagger.set(features(text))
    marginal = tagger.marginal
    probs = [1.0 - marginal("O", i) for i in range(len(text))]
    # B likelier than I (P(I) = P(not O) - P(B)); only asked where a name can be
    starts = [p >= threshold and 2 * marginal("B", i) > p for i, p in enumerate(probs)]
    return spans_from_marginals(probs, starts, threshold)


def load_tagger(path: Path | str) -> tuple[Any, float]:
    """The CRFsuite tagger of a ``kplm pii train-person`` model and its threshold, cached per
    process; :class:`KplmError` when the file or its ``.json`` is missing, corrupt or of another version."""
    key = str(path)
    tagger = _taggers.get(key)
    if tagger is not None:
        return tagger
    import pycrfsuite

    model = Path(path)
    if not model.is_file():
        raise KplmError(
            f"person model not found: {model} (train one with `kplm pii train-person --output PATH`)"
        )
    meta = _meta(model)
    if meta.get("feature_version") != FEATURE_VERSION:
        raise KplmError(
            f"{model}: trained with feature version {meta.get('feature_version')}, this kplm uses "
            f"{FEATURE_VERSION}; retrain it with `kplm pii train-person`"
        )
    tagger = pycrfsuite.Tagger()
    try:
        tagger.open(str(model))
        labels = set(tagger.labels())
    except (OSError, ValueError, RuntimeError) as e:
        raise KplmError(f"{model}: not a readable CRFsuite model ({type(e).__name__}: {e})") from None
    if labels != {"B", "I", "O"}:
        raise KplmError(f"{model}: a CRF model with labels {sorted(labels)}, not a kplm person model")
    threshold = meta.get("threshold")
    if not isinstance(threshold, float) or not 0.0 < threshold < 1.0:
        raise KplmError(f"{model}.json: threshold must be a number between 0 and 1")
    _taggers[key] = (tagger, threshold)
    return tagger, threshold


def _meta(path: Path | str) -> dict[str, Any]:
    meta_path = Path(str(path) + ".json")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise KplmError(
            f"{meta_path}: missing or unreadable person-model metadata ({type(e).__name__})"
        ) from None
    if not isinstance(meta, dict) or meta.get("format") != MODEL_FORMAT:
        raise KplmError(f"{meta_path}: not a kplm person-model metadata file")
    return meta


def holdout_every(path: Path | str) -> int:
    """The ``holdout_every`` a model was trained with (its KLUE-NER sentences with index % N == 0 are
    unseen), from its metadata."""
    every = _meta(path).get("holdout_every")
    if not isinstance(every, int) or every < 2:
        raise KplmError(f"{path}.json: holdout_every must be an integer of at least 2")
    return every


def crf_person_candidates(text: str, model: Path | str) -> list[Candidate]:
    """``(start, end, "PERSON", score)`` for each name the CRF model at ``model`` finds in ``text``.

    Every span has P(name) ≥ the model's threshold; its score, 0.5 + 0.45 × its mean probability, passes
    the default ``min_score`` (0.5) and ranks below checksummed IDs unless the tagger is sure."""
    tagger, threshold = load_tagger(model)
    return [
        (s, e, "PERSON", round(0.5 + 0.45 * p, 4))
        for s, e, p in _tag(tagger, text, threshold)
        if _plausible(text, s, e)
    ]


def _plausible(text: str, start: int, end: int) -> bool:
    """Drop common nouns of address (하느님, 고객님, 손님: the context recognizer's stop list) and ASCII
    "names" glued to digits or letters (A4, KLUE's ``<A:PS>`` pseudonyms teach the tagger single letters)."""
    name = text[start:end]
    if (
        name in _NOT_NAMES
        or (name.endswith("님") and name[:-1] in _NOT_NAMES)
        or name.endswith(_NOT_NAME_ENDS)
        or (text[end : end + 1] == "님" and text[start : end + 1] in _NOT_NAMES)  # 손 of 손님
    ):
        return False
    if name.isascii():
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        return not (before.isascii() and before.isalnum()) and not (after.isascii() and after.isalnum())
    return True
