"""The base alphabet of a vocabulary: the characters it can always spell, whatever the pieces learned.

A character outside the alphabet is an [UNK] at inference (in WordPiece the whole word becomes one [UNK]).
The alphabet is the training text's most frequent characters up to ``character_coverage``, plus a fixed set
of *required* characters that the training text may lack: NSMC reviews, for instance, never contain some
common syllables of news text (튤립, 톈진) nor the conjoining jamo (ᄏᄏ) that NFKC-normalised text such as
KLUE-NER carries. In WordPiece every character that can continue a word costs two entries (``가`` and
``##가``); punctuation and Hanja are always words of their own and cost one. In BPE every character costs one.

**Hanja** (``required_characters="ksx1001_hanja"``, the default since algorithm version 3). Text of other
domains (news, KLUE) carries Hanja that review text rarely does; on KLUE dev they were 90% of the [UNK]s of
an NSMC-trained vocabulary. KS X 1001's 4,622 Hanja (after NFC) and its 56 punctuation marks cover them at
one WordPiece entry each, because the BERT normaliser (``handle_chinese_chars``) makes every Hanja a word
of its own: no ``##`` form is ever needed. ``ksx1001_all`` adds KS X 1001's other symbols, kana and Greek
and Cyrillic letters, which need both forms (about 1,760 entries more for little gain on Korean text).
"""

from __future__ import annotations

from kplm.tokenizer.morphemes import MARKER
from kplm.tokenizer.report import is_bert_punctuation, is_cjk_ideograph

REQUIRED_SETS = ("ksx1001_all", "ksx1001_hanja", "ksx1001", "jamo", "none")
"""Named required sets, each a superset of the next (a set that does not fit falls back along this order)."""


def needs_continuation_form(ch: str) -> bool:
    """False for characters that are always a word of their own (punctuation, Hanja) at inference."""
    return not (is_bert_punctuation(ch) or is_cjk_ideograph(ch))


def _euc_kr(cp: int) -> bool:
    return len(chr(cp).encode("euc-kr", "ignore")) == 2


def ksx1001_hanja() -> list[str]:
    """The 4,888 Hanja of KS X 1001 as NFC leaves them: 4,620 unified ideographs plus 2 that only its 268
    compatibility ideographs (U+F900–FAFF, the same character under another reading) normalise to; the
    compatibility forms themselves never survive NFC, so they would be wasted entries."""
    import unicodedata

    chars = (chr(c) for c in range(0x3400, 0x10000) if is_cjk_ideograph(chr(c)) and _euc_kr(c))
    return list(dict.fromkeys(unicodedata.normalize("NFC", c) for c in chars))


def required_characters(name: str) -> list[str]:
    """``none``; ``jamo``: printable ASCII, Hangul compatibility jamo (ㄱ…ㅣ) and the modern conjoining jamo
    (ᄀ…ᄒ, ᅡ…ᅵ, ᆨ…ᇂ); ``ksx1001``: those plus the 2,350 Hangul syllables of KS X 1001 (the EUC-KR set);
    ``ksx1001_hanja``: those plus every KS X 1001 character that is always a word of its own, so costs one
    WordPiece entry: its Hanja (:func:`ksx1001_hanja`, 4,622; the normaliser splits Hanja apart) and its 56
    punctuation marks (``·``, ``…``, ``「」``, curly quotes, full-width forms); ``ksx1001_all``: every
    character of KS X 1001 (also its ~880 other symbols, kana, Greek and Cyrillic letters, which need a
    ``##`` form too)."""
    if name == "none":
        return []
    chars = [chr(c) for c in range(0x21, 0x7F)]
    chars += [chr(c) for c in range(0x3131, 0x3164)]
    chars += [chr(c) for c in (*range(0x1100, 0x1113), *range(0x1161, 0x1176), *range(0x11A8, 0x11C3))]
    if name in ("ksx1001", "ksx1001_hanja", "ksx1001_all"):
        chars += [chr(c) for c in range(0xAC00, 0xD7A4) if _euc_kr(c)]
    if name in ("ksx1001_hanja", "ksx1001_all"):
        chars += ksx1001_hanja()
        chars += [chr(c) for c in range(0xA0, 0x10000) if _euc_kr(c) and is_bert_punctuation(chr(c))]
    if name == "ksx1001_all":
        have = set(chars)
        chars += [
            chr(c)
            for c in range(0xA0, 0x10000)
            if not 0xAC00 <= c < 0xD7A4
            and not 0xD800 <= c < 0xE000
            and not is_cjk_ideograph(chr(c))
            and chr(c) not in have
            and _euc_kr(c)
            and not chr(c).isspace()
        ]
    return chars


def entry_cost(ch: str, wordpiece: bool) -> int:
    """Vocabulary entries one alphabet character takes."""
    return 2 if wordpiece and needs_continuation_form(ch) else 1


def choose_alphabet(
    counts: dict[str, int], coverage: float, budget: int, required: str = "none", wordpiece: bool = True
) -> list[str]:
    """Most frequent characters covering ``coverage`` of all occurrences, then the ``required`` set.

    At most ``budget`` entries: the largest of ``ksx1001`` ⊃ ``jamo`` ⊃ ``none`` (starting at ``required``)
    that fits next to the frequent characters is used, so small vocabularies keep working.
    """
    items = sorted(
        ((c, n) for c, n in counts.items() if not c.isspace() and c != MARKER), key=lambda x: (-x[1], x[0])
    )
    total = sum(n for _, n in items)
    chosen, covered, entries = [], 0, 0
    for ch, n in items:
        if covered >= coverage * total:
            break
        cost = entry_cost(ch, wordpiece)
        if entries + cost > budget:
            break
        chosen.append(ch)
        covered += n
        entries += cost
    have = set(chosen)
    for name in REQUIRED_SETS[REQUIRED_SETS.index(required) :]:
        extra = [c for c in required_characters(name) if c not in have]
        if entries + sum(entry_cost(c, wordpiece) for c in extra) <= budget:
            return chosen + extra
    return chosen
