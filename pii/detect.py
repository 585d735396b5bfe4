"""Find personal information in Korean text: scored, typed, non-overlapping character spans.

:func:`detect` runs the recognizers of :mod:`kplm.pii.recognizers` (compiled regexes + validators such as
date, checksum and Luhn checks), adjusts each candidate's score by the Korean/English context words found
within a few characters of it (``연락처``, ``주민번호``, ``카드`` … raise it; ``주문번호``, ``ISBN`` … lower
it), drops candidates under ``min_score`` and resolves overlaps deterministically: the higher score wins,
then the longer span, then the earlier one. Offsets are Python ``str`` offsets into the original text.

Full-width forms (``０１０－１２３４－５６７８``, ``ｋｉｍ＠ｅｘａｍｐｌｅ.ｃｏｍ``) are folded to ASCII
one character for one character before matching, so offsets stay valid.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kplm.pii.person_mecab import PERSON_MODES, mecab_person_candidates
from kplm.pii.recognizers import Candidate, Recognizer
from kplm.pii.recognizers_ext import ALL_CONTEXT as CONTEXT
from kplm.pii.recognizers_ext import ALL_RECOGNIZERS as RECOGNIZERS
from kplm.pii.recognizers_ext import NEEDS_CHARS

#: Every PII type name kplm knows (placeholders exist for all). :data:`DETECTABLE_TYPES` are those with a
#: recognizer, which is every one of them now; the distinction guards types added before their detector.
PII_TYPES: tuple[str, ...] = (
    "RRN",
    "FRN",
    "PHONE",
    "EMAIL",
    "CARD",
    "ACCOUNT",
    "BRN",
    "PASSPORT",
    "DRIVER_LICENSE",
    "IP",
    "URL",
    "ADDRESS",
    "PERSON",
)
DETECTABLE_TYPES: tuple[str, ...] = tuple(t for t in PII_TYPES if any(t in r.types for r in RECOGNIZERS))

CONTEXT_BEFORE = 24  # characters looked at before a candidate for context words
CONTEXT_AFTER = 12  # ... and after it
CONTEXT_BOOST = 0.25
CONTEXT_PENALTY = 0.35
MAX_SCORE = 0.99
STRUCTURED_FLOOR = 0.4  # person="crf": names overlapping a structured candidate scoring this much are dropped

_TYPE_RANK = {t: i for i, t in enumerate(PII_TYPES)}
# A number directly followed by a unit or counter is a quantity (1800-3000원, 1592-1598년), not an ID.
# (번 is left out on purpose: "010-1234-5678번으로 연락" is common.)
_UNITS = frozenset("원명개년월일회점편위배분초만억천세층%$")
_NUMERIC_TYPES = frozenset(PII_TYPES) - {"EMAIL", "URL", "ADDRESS", "PERSON"}
_HAS_DIGIT = re.compile(r"[0-9\uff10-\uff19]")
_FULLWIDTH = re.compile(r"[\uff01-\uff5e]")
_FOLD = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)}


@dataclass(frozen=True)
class PiiSpan:
    """One detected piece of personal information: ``text[start:end]`` is of ``type`` with ``score``."""

    start: int
    end: int
    type: str
    score: float


def check_types(types: Sequence[str] | None) -> tuple[str, ...]:
    """Validate a requested type list; None means every detectable type. Raises ``ValueError``."""
    if types is None:
        return DETECTABLE_TYPES
    if isinstance(types, str):
        raise ValueError(f"types: expected a list of type names, got the string {types!r}")
    for t in types:
        if t not in PII_TYPES:
            raise ValueError(f"types: unknown PII type {t!r} (known: {', '.join(PII_TYPES)})")
        if t not in DETECTABLE_TYPES:
            raise ValueError(f"types: {t} has no detector yet (detectable: {', '.join(DETECTABLE_TYPES)})")
    return tuple(dict.fromkeys(types))


def _context_score(lowered: str, start: int, end: int, kind: str, score: float) -> float:
    """Raise or lower ``score`` by the context words of ``kind`` found around ``[start, end)``."""
    positive, negative = CONTEXT.get(kind, ((), ()))
    if kind in _NUMERIC_TYPES and lowered[end : end + 1] in _UNITS:
        return score - CONTEXT_PENALTY
    window = lowered[max(0, start - CONTEXT_BEFORE) : start] + "\n" + lowered[end : end + CONTEXT_AFTER]
    if negative and any(w in window for w in negative):
        return score - CONTEXT_PENALTY
    if any(w in window for w in positive):
        # At most CONTEXT_BOOST, and at most half the remaining distance to 1, so that context never
        # erases the difference between, e.g., a checksummed and a checksum-less RRN.
        return min(MAX_SCORE, score + min(CONTEXT_BOOST, (1.0 - score) / 2))
    return score


_PLANS: dict[tuple[str, ...], tuple[Recognizer, ...]] = {}


def _plan(wanted: tuple[str, ...]) -> tuple[Recognizer, ...]:
    """The recognizers producing at least one of the ``wanted`` types (cached per type tuple)."""
    plan = _PLANS.get(wanted)
    if plan is None:
        plan = _PLANS[wanted] = tuple(r for r in RECOGNIZERS if any(t in wanted for t in r.types))
    return plan


def check_person(person: str, person_model: str | Path | None) -> None:
    """Validate a PERSON detector choice; ``crf`` needs ``person_model``. Raises ``ValueError``."""
    if person not in PERSON_MODES:
        raise ValueError(f"person: must be one of {', '.join(PERSON_MODES)}, got {person!r}")
    if person == "crf" and not person_model:
        raise ValueError("person_model: required with person: crf (train one with `kplm pii train-person`)")


def candidates(
    text: str,
    types: Sequence[str] | None = None,
    person: str = "context",
    person_model: str | Path | None = None,
) -> list[Candidate]:
    """Every scored candidate (context applied, overlaps *not* resolved) of the requested types.

    ``person="mecab"`` adds the names MeCab-ko tags as person proper nouns to the title-anchored ones;
    ``person="crf"`` adds those of the learned tagger at ``person_model`` (:mod:`kplm.pii.person_crf`).
    """
    wanted = check_types(types)
    check_person(person, person_model)
    if _FULLWIDTH.search(text):
        text = text.translate(_FOLD)
    has_digit = _HAS_DIGIT.search(text) is not None
    chars: frozenset[str] | None = None
    lowered: str | None = None
    found: list[Candidate] = []
    for rec in _plan(wanted):
        needs = rec.needs
        if needs == "digit":
            if not has_digit:
                continue
        elif needs == "@" or needs == "::":
            if needs[0] not in text:
                continue
        elif needs == "url":
            if "://" not in text and "www." not in text and "WWW." not in text:
                continue
        else:  # needs one of a few characters (PERSON: first syllables of the titles)
            if chars is None:
                chars = frozenset(text)
            if chars.isdisjoint(NEEDS_CHARS[needs]):
                continue
        for match in rec.pattern.finditer(text):
            for start, end, kind, score in rec.score(text, match):
                if kind not in wanted:
                    continue
                if lowered is None:
                    lowered = text.lower()
                found.append((start, end, kind, round(_context_score(lowered, start, end, kind, score), 4)))
    if person == "mecab" and "PERSON" in wanted:
        found.extend(mecab_person_candidates(text))
    elif person == "crf" and "PERSON" in wanted:
        from kplm.pii.person_crf import crf_person_candidates  # imports pycrfsuite only when used

        # Structured values win: the tagger sometimes reads a name into an e-mail, URL or account holder.
        taken = [(c[0], c[1]) for c in found if c[2] != "PERSON" and c[3] >= STRUCTURED_FLOOR]
        found.extend(
            c
            for c in crf_person_candidates(text, person_model)  # type: ignore[arg-type]
            if not any(s < c[1] and c[0] < e for s, e in taken)
        )
    return found


def resolve_overlaps(found: Sequence[Candidate]) -> list[PiiSpan]:
    """Keep a non-overlapping subset, preferring higher score, then longer span, then earlier start."""
    order = sorted(found, key=lambda c: (-c[3], -(c[1] - c[0]), c[0], _TYPE_RANK.get(c[2], 99)))
    starts: list[int] = []  # kept spans, sorted by start (they never overlap, so ends are sorted too)
    kept: list[Candidate] = []
    for cand in order:
        i = bisect.bisect_right(starts, cand[0])
        if i > 0 and kept[i - 1][1] > cand[0]:
            continue  # overlaps the kept span starting at or before it
        if i < len(kept) and kept[i][0] < cand[1]:
            continue  # overlaps the kept span starting after it
        starts.insert(i, cand[0])
        kept.insert(i, cand)
    return [PiiSpan(s, e, t, sc) for s, e, t, sc in kept]


def detect(
    text: str,
    *,
    types: Sequence[str] | None = None,
    min_score: float = 0.5,
    person: str = "context",
    person_model: str | Path | None = None,
) -> list[PiiSpan]:
    """The PII spans of ``text`` scoring at least ``min_score``, sorted by position and non-overlapping.

    ``types`` restricts detection to some of :data:`DETECTABLE_TYPES` (None: all of them). ``person``
    chooses the PERSON detector: ``context`` (names before a title such as 씨/기자/교수; fast) or ``mecab``
    (also every name MeCab-ko tags ``NNP,인명``; far higher recall, ~10x slower) or ``crf`` (also the
    names of the learned tagger whose model file is ``person_model``; highest recall, MeCab-bound speed).
    """
    if not 0.0 <= min_score <= 1.0:
        raise ValueError(f"min_score: must be between 0 and 1, got {min_score}")
    found = [c for c in candidates(text, types, person, person_model) if c[3] >= min_score]
    return resolve_overlaps(found)
