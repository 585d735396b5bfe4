"""Korean quality filters: one small class per rule, the rule's versioned name is its drop reason.

Every rule is a datatrove filter (``filter(doc)`` returns True to keep a document or ``(False, rule)`` to
drop it), usable on its own in any datatrove pipeline. The cleaning stage runs them fused in one step,
:class:`QualityFilters`, which computes each document's character statistics (:class:`TextStats`) once and
shares them between the rules instead of letting every rule re-scan the text; a dropped document goes to its
rule's exclusion writer (``excluded/<rule>/``) with the reason in its metadata, so every drop is auditable.

A rule never changes meaning: a fix is a new rule with the next version suffix.
"""

from __future__ import annotations

import contextlib
import re
import unicodedata
from functools import cache

from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.filters.base_filter import BaseFilter
from datatrove.pipeline.writers.disk_base import DiskWriter

_HANGUL_CLASS = "\uac00-\ud7a3\u1100-\u11ff\u3130-\u318f\ua960-\ua97f"
_HANGUL_RUN = re.compile(f"[{_HANGUL_CLASS}]+")
_DIGIT = re.compile(r"\d")
_URL = re.compile(r"(?:https?://|www\.)[^\s<>\"']+", re.IGNORECASE)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


def is_hangul(ch: str) -> bool:
    """Hangul syllables, jamo and compatibility jamo (ㅋ, ㅠ count: they are Korean writing)."""
    code = ord(ch)
    return (
        0xAC00 <= code <= 0xD7A3
        or 0x1100 <= code <= 0x11FF
        or 0x3130 <= code <= 0x318F
        or 0xA960 <= code <= 0xA97F
    )


SYMBOL_SCAN_END = 0x20000
_ASTRAL_ANY = re.compile("[\U00010000-\U0010ffff]")


def _char_class(codes: list[int]) -> str:
    ranges: list[list[int]] = []
    for code in codes:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    return "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges
    )


@cache
def _symbol_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Regex classes of exactly the Unicode categories P* and S*, split into the Basic Multilingual Plane and
    plane 1 (built once per process): sre matches a BMP-only class through a bitmap, ~15× faster than one
    class that also holds astral ranges.

    Planes 2-16 hold no P*/S* characters (ideographs, tags, private use), so only planes 0-1 are scanned;
    ``tests/test_corpus_rules.py`` checks that against the running Python's Unicode database."""
    codes = [c for c in range(SYMBOL_SCAN_END) if unicodedata.category(chr(c))[0] in "PS"]
    bmp = re.compile(f"[{_char_class([c for c in codes if c < 0x10000])}]")
    astral = re.compile(f"[{_char_class([c for c in codes if c >= 0x10000])}]")
    return bmp, astral


def count_symbols(text: str) -> int:
    """Number of characters in Unicode categories P* and S*."""
    bmp, astral = _symbol_patterns()
    n = len(bmp.findall(text))
    if not text.isascii() and _ASTRAL_ANY.search(text):
        n += len(astral.findall(text))
    return n


def visible_chars(text: str) -> int:
    """Number of non-whitespace characters (``str.isspace`` semantics)."""
    if text.isprintable():  # the only whitespace a printable string can hold is the ASCII space
        return len(text) - text.count(" ")
    return sum(map(len, text.split()))


class TextStats:
    """Character statistics of one text, each computed on first use and then cached."""

    __slots__ = ("text", "_visible", "_hangul", "_symbols", "_digits", "_lines")

    def __init__(self, text: str):
        self.text = text
        self._visible = self._hangul = self._symbols = self._digits = None
        self._lines: list[str] | None = None

    @property
    def visible(self) -> int:
        if self._visible is None:
            self._visible = visible_chars(self.text)
        return self._visible

    @property
    def hangul(self) -> int:
        if self._hangul is None:
            self._hangul = len(self.text) - len(_HANGUL_RUN.sub("", self.text))
        return self._hangul

    @property
    def symbols(self) -> int:
        if self._symbols is None:
            self._symbols = count_symbols(self.text)
        return self._symbols

    @property
    def digits(self) -> int:
        if self._digits is None:
            self._digits = len(_DIGIT.findall(self.text)) if _DIGIT.search(self.text) else 0
        return self._digits

    @property
    def lines(self) -> list[str]:
        """Non-blank lines."""
        if self._lines is None:
            self._lines = [line for line in self.text.split("\n") if line.strip()]
        return self._lines


class KoreanFilter(BaseFilter):
    """Base for kplm's filters: ``rule`` is the versioned name used as drop reason and stat label.

    Subclasses implement ``keep(stats)``; ``filter(doc)`` (datatrove's API) wraps it.
    """

    rule: str = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.name = cls.rule

    def drop(self) -> tuple[bool, str]:
        return False, self.rule

    def keep(self, stats: TextStats) -> bool:
        raise NotImplementedError

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        return self.keep(TextStats(doc.text)) or self.drop()


class MinCharsFilter(KoreanFilter):
    """``min_chars_v1``: drop documents with fewer than ``min_chars`` non-space characters."""

    rule = "min_chars_v1"

    def __init__(self, min_chars: int, exclusion_writer: DiskWriter | None = None):
        super().__init__(exclusion_writer)
        self.min_chars = min_chars

    def keep(self, stats: TextStats) -> bool:
        return stats.visible >= self.min_chars


class MaxCharsFilter(KoreanFilter):
    """``max_chars_v1``: drop documents longer than ``max_chars`` characters (dumps, logs, tables)."""

    rule = "max_chars_v1"

    def __init__(self, max_chars: int, exclusion_writer: DiskWriter | None = None):
        super().__init__(exclusion_writer)
        self.max_chars = max_chars

    def keep(self, stats: TextStats) -> bool:
        return len(stats.text) <= self.max_chars


class HangulRatioFilter(KoreanFilter):
    """``hangul_ratio_v1``: drop documents whose share of Hangul among non-space characters is below
    ``min_ratio`` (mostly English, numbers or code)."""

    rule = "hangul_ratio_v1"

    def __init__(self, min_ratio: float, exclusion_writer: DiskWriter | None = None):
        super().__init__(exclusion_writer)
        self.min_ratio = min_ratio

    def keep(self, stats: TextStats) -> bool:
        return stats.visible > 0 and stats.hangul / stats.visible >= self.min_ratio


class SymbolRatioFilter(KoreanFilter):
    """``symbol_ratio_v1``: drop documents where punctuation and symbols (Unicode categories P*, S*) make up
    more than ``max_ratio`` of the non-space characters (emoticon walls, ASCII art, separators)."""

    rule = "symbol_ratio_v1"

    def __init__(self, max_ratio: float, exclusion_writer: DiskWriter | None = None):
        super().__init__(exclusion_writer)
        self.max_ratio = max_ratio

    def keep(self, stats: TextStats) -> bool:
        return stats.visible == 0 or stats.symbols / stats.visible <= self.max_ratio


class DigitRatioFilter(KoreanFilter):
    """``digit_ratio_v1``: drop documents where decimal digits (Unicode Nd) make up more than ``max_ratio``
    of the non-space characters (price lists, score tables, phone directories)."""

    rule = "digit_ratio_v1"

    def __init__(self, max_ratio: float, exclusion_writer: DiskWriter | None = None):
        super().__init__(exclusion_writer)
        self.max_ratio = max_ratio

    def keep(self, stats: TextStats) -> bool:
        return stats.visible == 0 or stats.digits / stats.visible <= self.max_ratio


class UrlEmailRatioFilter(KoreanFilter):
    """``url_email_ratio_v1``: drop link farms and contact spam: documents where URLs (``http(s)://…``,
    ``www.…``) and e-mail addresses make up more than ``max_ratio`` of the non-space characters, each one
    counted as ``ITEM_CHARS`` (20) characters whatever its real length, so that one long source link under a
    short review does not count as a link-heavy document, while a list of links does."""

    rule = "url_email_ratio_v1"
    ITEM_CHARS = 20

    def __init__(self, max_ratio: float, exclusion_writer: DiskWriter | None = None):
        super().__init__(exclusion_writer)
        self.max_ratio = max_ratio

    def keep(self, stats: TextStats) -> bool:
        text = stats.text
        if stats.visible == 0 or "." not in text:
            return True
        items = _URL.findall(text)
        if "@" in text:
            items += _EMAIL.findall(_URL.sub(" ", text))
        if not items:
            return True
        weight = self.ITEM_CHARS * len(items)
        rest = stats.visible - sum(visible_chars(item) for item in items)
        return weight / (rest + weight) <= self.max_ratio


class RepeatedLinesFilter(KoreanFilter):
    """``repeated_lines_v1`` (Gopher-style): drop documents with at least 3 lines in which the share of lines
    that repeat an earlier line exceeds ``max_fraction`` (menus, spam, scraped boilerplate)."""

    rule = "repeated_lines_v1"

    def __init__(self, max_fraction: float, exclusion_writer: DiskWriter | None = None):
        super().__init__(exclusion_writer)
        self.max_fraction = max_fraction

    def keep(self, stats: TextStats) -> bool:
        if "\n" not in stats.text:
            return True
        lines = stats.lines
        if len(lines) < 3:
            return True
        repeated = len(lines) - len(set(lines))
        return repeated / len(lines) <= self.max_fraction


class RepeatedNgramsFilter(KoreanFilter):
    """``repeated_ngrams_v1`` (Gopher's duplicate n-gram fraction, on characters: Korean has no reliable word
    boundaries): drop documents of at least ``min_chars`` non-space characters in which the character
    ``n``-grams (spaces removed) that occur more than once cover more than ``max_fraction`` of the characters
    (copy-pasted paragraphs, spam loops). Short texts are exempt: a few repeats there are normal."""

    rule = "repeated_ngrams_v1"

    def __init__(
        self,
        max_fraction: float,
        n: int = 10,
        min_chars: int = 200,
        exclusion_writer: DiskWriter | None = None,
    ):
        super().__init__(exclusion_writer)
        self.max_fraction = max_fraction
        self.n = n
        self.min_chars = min_chars

    def keep(self, stats: TextStats) -> bool:
        if stats.visible < max(self.min_chars, 2 * self.n):
            return True
        chars = "".join(stats.text.split())
        n = self.n
        first: dict[str, int] = {}
        covered = bytearray(len(chars))
        for i in range(len(chars) - n + 1):
            gram = chars[i : i + n]
            j = first.setdefault(gram, i)
            if j != i:  # a repeat: mark both occurrences as duplicated characters
                covered[i : i + n] = b"\x01" * n
                covered[j : j + n] = b"\x01" * n
        return covered.count(1) / len(chars) <= self.max_fraction


class QualityFilters(PipelineStep):
    """Run several :class:`KoreanFilter` rules in one pass, sharing each document's :class:`TextStats`.

    The first rule that fails decides the drop reason (rules run in the given order); the document goes to that
    rule's exclusion writer. Stats: ``total``, ``forwarded``, ``dropped`` and ``dropped_<rule>``.
    """

    type = "🔻 - FILTER"
    name = "kplm quality filters"

    def __init__(self, rules: list[KoreanFilter]):
        super().__init__()
        self.rules = rules

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        with contextlib.ExitStack() as stack:
            writers = {
                rule.rule: stack.enter_context(rule.exclusion_writer)
                for rule in self.rules
                if rule.exclusion_writer is not None
            }
            kept = dropped = 0
            for doc in data:
                stats = TextStats(doc.text)
                failed = next((rule.rule for rule in self.rules if not rule.keep(stats)), None)
                if failed is None:
                    kept += 1
                    yield doc
                    continue
                dropped += 1
                self.stat_update(f"dropped_{failed}")
                if failed in writers:
                    doc.metadata["filter_reason"] = failed
                    writers[failed].write(doc, rank)
            self.stat_update("total", value=kept + dropped)
            self.stat_update("forwarded", value=kept)
            self.stat_update("dropped", value=dropped)


def dedup_key(doc: Document) -> bytes:
    """``exact_dedup_v1`` key: the text casefolded with all whitespace removed, so spacing variants of the
    same text count as duplicates (UTF-8 bytes: datatrove's xxhash takes bytes)."""
    return "".join(doc.text.casefold().split()).encode("utf-8")
