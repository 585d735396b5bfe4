"""Text normalisation rules for Korean corpora, each with a versioned name that never changes meaning.

Rules run in a fixed order inside one datatrove step (:class:`Normalizer`), which counts how many documents
each rule changed (``changed_<rule>`` stats). A rule that needs fixing gets a new version (``_v2``); configs
name the versions they want, so old runs stay reproducible.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Callable

from datatrove.data import DocumentsPipeline
from datatrove.pipeline.base import PipelineStep

_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]{0,200})?/?>")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_HTML_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_HTML_ENTITY = re.compile(r"&(?:[A-Za-z]{2,8}|#\d{2,6}|#x[0-9A-Fa-f]{2,5});")
# Zero-width and invisible format characters, C0/C1 controls except tab and newline, and the BOM.
_INVISIBLE = re.compile(
    "[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u00ad\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\ufeff]"
)
_SPACES = re.compile(r"[^\S\n]+")
_BLANK_LINES = re.compile(r"\n\s*\n\s*\n+")


def nfc_v1(text: str) -> str:
    """Unicode NFC: composes decomposed Hangul jamo (NFD input, common from macOS) into syllables."""
    return unicodedata.normalize("NFC", text)


def nfkc_v1(text: str) -> str:
    """Unicode NFKC: NFC plus compatibility folding (full-width Latin, circled digits, ㎏ → kg)."""
    return unicodedata.normalize("NFKC", text)


def html_v1(text: str) -> str:
    """Unescape HTML entities (``&amp;`` → ``&``, ``&lt;br&gt;`` → ``<br>``), then drop comments and tags
    (``<br>`` becomes a newline, other tags a space)."""
    if "&" in text and _HTML_ENTITY.search(text):
        text = html.unescape(text).replace("\xa0", " ")
    if "<" in text:
        text = _HTML_COMMENT.sub(" ", text)
        text = _HTML_BREAK.sub("\n", text)
        text = _HTML_TAG.sub(" ", text)
    return text


def invisible_v1(text: str) -> str:
    """Remove control characters (except tab/newline), zero-width characters, bidi marks and the BOM."""
    if text.isprintable():  # every character removed here is non-printable (Cc, Cf, Zl, Zp): nothing to do
        return text
    return _INVISIBLE.sub("", text)


def whitespace_v1(text: str) -> str:
    """Collapse runs of spaces/tabs to one space, at most one blank line between paragraphs, strip ends."""
    if text.isprintable() and "  " not in text:  # only single ASCII spaces (tabs, NBSP... are non-printable)
        return text.strip(" ")
    if "\n" not in text and "\r" not in text:  # one line: the same result, without the line split
        return _SPACES.sub(" ", text).strip()
    text = _SPACES.sub(" ", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = "\n".join(line.strip() for line in text.split("\n"))
    return _BLANK_LINES.sub("\n\n", text).strip()


def make_repeat_rule(max_repeats: int) -> Callable[[str], str]:
    """``repeat_chars_v1``: bound runs of one repeated character (``ㅋㅋㅋㅋㅋㅋ`` → ``ㅋㅋㅋ``, like soynlp's
    ``repeat_normalize``) and of repeated two-character units (``하하하하하하`` keeps ``max_repeats`` units).
    Digits are never touched (``1000000`` stays)."""
    single = re.compile(rf"([^\d\s])\1{{{max_repeats},}}")
    double = re.compile(rf"([^\d\s]{{2}})\1{{{max_repeats},}}")

    def repeat_chars_v1(text: str) -> str:
        text = single.sub(lambda m: m.group(1) * max_repeats, text)
        return double.sub(lambda m: m.group(1) * max_repeats, text)

    return repeat_chars_v1


# Whole lines of web/news boilerplate: copyright and redistribution notices, login/comment prompts, share
# buttons, reporter e-mail sign-offs are kept (they are content), only these fixed phrases go.
_BOILERPLATE_LINE = re.compile(
    r"^\W*(?:"
    r"(?:<\s*)?(?:저작권자|copyrights?)\s*[ⓒ©(]?.{0,40}?무단\s*전재.{0,30}$"
    r"|(?:ⓒ|©|\(c\)).{0,40}무단\s*전재.{0,30}$"
    r"|무단\s*전재\s*(?:및|[-·,/ ]|&)?\s*(?:재배포|복제|배포)\s*(?:금지|를\s*금합니다|를\s*금지합니다)\W*$"
    r"|로그인\s*(?:이\s*필요(?:합니다|한\s*서비스입니다)\W*$|(?:후|하시면)\s*(?:이용|사용|확인|열람|작성|댓글|구독|보실|볼\s*수|참여).{0,15}$)"
    r"|(?:댓글|기사)\s*(?:쓰기|작성|공유하기|스크랩)\W*$"
    r"|(?:페이스북|트위터|카카오톡|카카오스토리|네이버\s*밴드|밴드)\s*(?:공유|으로\s*공유|보내기)\W*$"
    r"|(?:맨\s*)?위로\s*(?:가기|이동)\W*$"
    r"|(?:이전|다음)\s*(?:글|기사)\s*(?:보기)?\W*$"
    r"|목록\s*(?:으로|보기)?\W*$"
    r")",
    re.IGNORECASE,
)
_BOILERPLATE_HINT = re.compile(r"무단|로그인|댓글|기사|공유|위로|이전|다음|목록")


def boilerplate_lines_v1(text: str) -> str:
    """Remove whole lines that are web/news boilerplate: copyright/redistribution notices
    (``무단 전재 및 재배포 금지``, ``<저작권자 ⓒ 연합뉴스, 무단전재-재배포금지>``), login prompts
    (``로그인 후 이용해 주세요``), share/comment buttons, ``위로 가기``, ``이전 글``/``목록``. A line
    counts only when the phrase is (nearly) the whole line, so sentences that mention these words stay."""
    if not _BOILERPLATE_HINT.search(text):
        return text
    lines = text.split("\n")
    kept = [line for line in lines if not (len(line) <= 80 and _BOILERPLATE_LINE.match(line.strip()))]
    return text if len(kept) == len(lines) else "\n".join(kept)


RULES: dict[str, Callable[[str], str]] = {
    "nfc_v1": nfc_v1,
    "nfkc_v1": nfkc_v1,
    "html_v1": html_v1,
    "invisible_v1": invisible_v1,
    "whitespace_v1": whitespace_v1,
    "boilerplate_lines_v1": boilerplate_lines_v1,
}
DEFAULT_RULES = (
    "nfc_v1",
    "html_v1",
    "invisible_v1",
    "boilerplate_lines_v1",
    "repeat_chars_v1",
    "whitespace_v1",
)
KNOWN_RULES = (*RULES, "repeat_chars_v1")


class Normalizer(PipelineStep):
    """Apply the named normalisation rules in order to every document's text."""

    type = "✂️ - FORMAT"
    name = "kplm normalizer"

    def __init__(self, rules: tuple[str, ...] | list[str] = DEFAULT_RULES, max_repeats: int = 3):
        super().__init__()
        unknown = [r for r in rules if r not in KNOWN_RULES]
        if unknown:
            raise ValueError(f"unknown normalisation rule '{unknown[0]}' (known: {', '.join(KNOWN_RULES)})")
        self.rules = list(rules)
        self.max_repeats = max_repeats

    def _functions(self) -> list[tuple[str, Callable[[str], str]]]:
        return [
            (name, make_repeat_rule(self.max_repeats) if name == "repeat_chars_v1" else RULES[name])
            for name in self.rules
        ]

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        functions = self._functions()
        changed = dict.fromkeys(self.rules, 0)  # counted here, added to the stats once at the end
        for doc in data:
            text = doc.text
            for name, rule in functions:
                new = rule(text)
                if new != text:
                    changed[name] += 1
                    text = new
            doc.text = text
            yield doc
        for name, n in changed.items():
            if n:
                self.stat_update(f"changed_{name}", value=n)


def normalize(text: str, rules: tuple[str, ...] = DEFAULT_RULES, max_repeats: int = 3) -> str:
    """Apply the rules to one string (the same code path as the pipeline step)."""
    for _, rule in Normalizer(rules, max_repeats)._functions():
        text = rule(text)
    return text
