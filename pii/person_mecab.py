"""PERSON names from MeCab-ko: morphemes tagged ``NNP,인명`` (person proper noun) by mecab-ko-dic.

The context recognizer of :mod:`kplm.pii.recognizers_ext` only finds names next to a title (``씨``,
``기자`` …). Most names in running text have none (``손흥민이 골을 넣었다``); mecab-ko-dic lists tens of
thousands of person names and its CRF guesses unknown ones from context, which finds far more of them
(KLUE-NER dev PS: see ``kplm pii eval --person mecab``) at the price of speed: MeCab parses a few
thousand sentences per second per core, so it is an opt-in (``person: mecab``), not the default.

The tagger is created lazily once per process (MeCab taggers do not pickle), so steps that carry this
option still pickle for multi-process executors.
"""

from __future__ import annotations

from typing import Literal, get_args

from kplm.pii.recognizers import Candidate

PersonMode = Literal["context", "mecab", "crf"]  # crf: kplm.pii.person_crf
PERSON_MODES: tuple[str, ...] = get_args(PersonMode)
MECAB_SCORE = 0.65  # a dictionary/CRF guess: above the default threshold, below checksummed IDs

_tagger = None


def _get_tagger():  # noqa: ANN202 (mecab_ko has no type hints)
    global _tagger
    if _tagger is None:
        import mecab_ko as MeCab  # noqa: N813 (mecab-python3's own spelling)

        _tagger = MeCab.Tagger()
    return _tagger


def mecab_person_candidates(text: str) -> list[Candidate]:
    """``(start, end, "PERSON", score)`` for every run of ``NNP,인명`` morphemes in ``text``."""
    if not text.strip():
        return []
    out: list[Candidate] = []
    pos = 0
    run: tuple[int, int] | None = None
    node = _get_tagger().parseToNode(text)
    while node is not None:
        surface = node.surface
        if surface:
            idx = text.find(surface, pos)
            if idx < 0:  # MeCab normalised something: skip the morpheme, keep the cursor
                node = node.next
                continue
            feature = node.feature
            is_name = feature.startswith("NNP,인명")
            if is_name and run is not None and run[1] == idx:
                run = (run[0], idx + len(surface))  # 김 + 철수 split in two morphemes: one name
            else:
                if run is not None:
                    out.append((run[0], run[1], "PERSON", MECAB_SCORE))
                run = (idx, idx + len(surface)) if is_name else None
            pos = idx + len(surface)
        node = node.next
    if run is not None:
        out.append((run[0], run[1], "PERSON", MECAB_SCORE))
    return [c for c in out if _plausible(text, c[0], c[1])]


def _plausible(text: str, start: int, end: int) -> bool:
    """Drop lone syllables (정, 노 in 2005노1234: surnames alone are left to the title rules) and
    "names" glued to digits or Latin letters (case numbers, codes)."""
    if end - start < 2:
        return False
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    return not (before.isascii() and before.isalnum()) and not (after.isascii() and after.isalnum())
