"""Korean quality filters: one small datatrove filter per rule, the rule's versioned name is its drop reason.

Each filter's ``filter(doc)`` returns True to keep a document or ``(False, rule_name)`` to drop it; the
dropped document goes to that rule's exclusion writer (``excluded/<rule>/``) with the reason in its metadata,
so every drop can be audited and counted.
"""

import unicodedata

from datatrove.data import Document
from datatrove.pipeline.filters.base_filter import BaseFilter
from datatrove.pipeline.writers.disk_base import DiskWriter


def is_hangul(ch: str) -> bool:
    """Hangul syllables, jamo and compatibility jamo (ㅋ, ㅠ count: they are Korean writing)."""
    code = ord(ch)
    return (
        0xAC00 <= code <= 0xD7A3
        or 0x1100 <= code <= 0x11FF
        or 0x3130 <= code <= 0x318F
        or 0xA960 <= code <= 0xA97F
    )


def visible_chars(text: str) -> int:
    return sum(1 for ch in text if not ch.isspace())


class KoreanFilter(BaseFilter):
    """Base for kplm's filters: ``rule`` is the versioned name used as drop reason and stat label."""

    rule: str = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.name = cls.rule

    def drop(self) -> tuple[bool, str]:
        return False, self.rule


class MinCharsFilter(KoreanFilter):
    """``min_chars_v1``: drop documents with fewer than ``min_chars`` non-space characters."""

    rule = "min_chars_v1"

    def __init__(self, min_chars: int, exclusion_writer: DiskWriter | None = None):
        super().__init__(exclusion_writer)
        self.min_chars = min_chars

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        return visible_chars(doc.text) >= self.min_chars or self.drop()


class MaxCharsFilter(KoreanFilter):
    """``max_chars_v1``: drop documents longer than ``max_chars`` characters (dumps, logs, tables)."""

    rule = "max_chars_v1"

    def __init__(self, max_chars: int, exclusion_writer: DiskWriter | None = None):
        super().__init__(exclusion_writer)
        self.max_chars = max_chars

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        return len(doc.text) <= self.max_chars or self.drop()


class HangulRatioFilter(KoreanFilter):
    """``hangul_ratio_v1``: drop documents whose share of Hangul among non-space characters is below
    ``min_ratio`` (mostly English, numbers or code)."""

    rule = "hangul_ratio_v1"

    def __init__(self, min_ratio: float, exclusion_writer: DiskWriter | None = None):
        super().__init__(exclusion_writer)
        self.min_ratio = min_ratio

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        visible = visible_chars(doc.text)
        hangul = sum(1 for ch in doc.text if is_hangul(ch))
        return (visible > 0 and hangul / visible >= self.min_ratio) or self.drop()


class SymbolRatioFilter(KoreanFilter):
    """``symbol_ratio_v1``: drop documents where punctuation and symbols (Unicode categories P*, S*) make up
    more than ``max_ratio`` of the non-space characters (emoticon walls, ASCII art, separators)."""

    rule = "symbol_ratio_v1"

    def __init__(self, max_ratio: float, exclusion_writer: DiskWriter | None = None):
        super().__init__(exclusion_writer)
        self.max_ratio = max_ratio

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        visible = visible_chars(doc.text)
        symbols = sum(1 for ch in doc.text if unicodedata.category(ch)[0] in "PS")
        return visible == 0 or symbols / visible <= self.max_ratio or self.drop()


class RepeatedLinesFilter(KoreanFilter):
    """``repeated_lines_v1`` (Gopher-style): drop documents with at least 3 lines in which the share of lines
    that repeat an earlier line exceeds ``max_fraction`` (menus, spam, scraped boilerplate)."""

    rule = "repeated_lines_v1"

    def __init__(self, max_fraction: float, exclusion_writer: DiskWriter | None = None):
        super().__init__(exclusion_writer)
        self.max_fraction = max_fraction

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        lines = [line for line in doc.text.split("\n") if line.strip()]
        if len(lines) < 3:
            return True
        repeated = len(lines) - len(set(lines))
        return repeated / len(lines) <= self.max_fraction or self.drop()


def dedup_key(doc: Document) -> bytes:
    """``exact_dedup_v1`` key: the text casefolded with all whitespace removed, so spacing variants of the
    same text count as duplicates (UTF-8 bytes: datatrove's xxhash takes bytes)."""
    return "".join(doc.text.casefold().split()).encode("utf-8")
