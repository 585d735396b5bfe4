"""Pattern recognizers: compiled regexes plus validators that turn matches into scored candidates.

A :class:`Recognizer` scans a text with one compiled pattern and turns each match into zero or more
``(start, end, type, score)`` candidates; the score is the recognizer's confidence *before* context words
are considered (:mod:`kplm.pii.detect` adds those and resolves overlaps). New detectors (accounts,
passports, addresses, NER-based names) are added by appending to :data:`RECOGNIZERS` and giving their
type context words in :data:`CONTEXT`.

Digits are delimited with lookarounds such as ``(?<![0-9])`` rather than ``\\b``: Hangul counts as a
word character, so ``\\b`` would fail between ``010-1234-5678`` and a particle like ``로``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kplm.pii.validators import (
    FRN_CENTURY,
    RRN_CENTURY,
    brn_ok,
    card_network_ok,
    ean13_ok,
    luhn_ok,
    public_ipv4,
    rrn_checksum_ok,
    valid_birth_date,
)

Candidate = tuple[int, int, str, float]

# Left/right guards for numbers: no digit directly adjacent, and not the middle of a longer dashed/dotted
# digit run (``123-010-1234-5678``, ``978-89-12345-67-8``).
_L = r"(?<![0-9])(?<![0-9][-.])"
_R = r"(?![0-9])(?![-.][0-9])"
# A separator between digit groups: hyphen/dash (optionally spaced), dot, or a single space.
_SEP = r"(?: ?[-\u2010-\u2015\u2212] ?|\.| )"
_DASH = r"(?: ?[-\u2010-\u2015\u2212] ?)"
_DASHES = "-\u2010\u2011\u2012\u2013\u2014\u2015\u2212"


def _ascii_letter(ch: str) -> bool:
    return ch.isascii() and ch.isalpha()


def _glued_to_letters(text: str, start: int, end: int) -> bool:
    """True when an unseparated number touches ASCII letters (``A01012345678``, order/serial codes)."""
    return (start > 0 and _ascii_letter(text[start - 1])) or (end < len(text) and _ascii_letter(text[end]))


def _sep_kind(sep: str | None) -> str:
    """Normalise a captured separator: '' (none), '-', '.', or ' '."""
    if not sep:
        return ""
    s = sep.strip()
    if not s:
        return " "
    return "-" if s in _DASHES else s


@dataclass(frozen=True)
class Recognizer:
    """One compiled pattern and the function that validates and scores its matches."""

    name: str
    types: tuple[str, ...]
    pattern: re.Pattern[str]
    score: Callable[[str, re.Match[str]], Iterator[Candidate]]
    needs: str = "digit"  # cheap pre-check: "digit" (text has a digit) or "@"


# ---------------------------------------------------------------------------------------------- PHONE
_MOBILE = "1[016789]"
_AREA = "2|3[1-3]|4[1-4]|5[1-5]|6[1-4]"
_NETWORK = "70|80|50[2-8]"
PHONE_PATTERN = re.compile(
    _L
    + r"(?:(?P<intl>\+ ?82)(?P<s0>[- ]?)(?:\(0\) ?)?(?P<ip>"
    + f"{_MOBILE}|{_AREA}|{_NETWORK}"
    + r")|\(?(?P<pp>0(?:"
    + f"{_MOBILE}|{_AREA}|{_NETWORK}"
    + r"))\) ?|(?P<p>0(?:"
    + f"{_MOBILE}|{_AREA}|{_NETWORK}"
    + r")))"
    + rf"(?P<s1>{_SEP}?)(?P<mid>[0-9]{{3,4}})(?P<s2>{_SEP}?)(?P<last>[0-9]{{4}})"
    + _R
    + r"|"
    + _L
    + rf"(?P<svc>1[568][0-9]{{2}})(?P<s3>{_SEP})(?P<svc2>[0-9]{{4}})"
    + _R
)


def _score_phone(text: str, m: re.Match[str]) -> Iterator[Candidate]:
    start, end = m.span()
    if m["svc"]:
        sep = _sep_kind(m["s3"])
        head, tail = int(m["svc"]), int(m["svc2"])
        if sep == "-" and 1000 <= tail <= 2099 and tail > head:
            score = 0.25  # "1592-1598": a range of years, not a 1588-style service number
        else:
            score = 0.6 if sep == "-" else 0.45
        yield start, end, "PHONE", score
        return
    prefix = m["ip"] or (m["pp"] or m["p"]).removeprefix("0")
    mid = m["mid"]
    mobile = prefix[0] == "1"
    landline = prefix[0] in "23456" and not prefix.startswith("50")
    if landline and mid[0] == "0":
        return  # local exchange numbers never start with 0
    # ... and rarely with 1 (special services such as 02-120), so such numbers score lower.
    penalty = 0.15 if landline and mid[0] == "1" else 0.0
    if prefix == "10" and len(mid) == 3:
        base = 0.6  # 010 numbers have had 4-digit middles for two decades
    elif m["intl"]:
        base = 0.9
    elif m["pp"]:
        base = 0.8
    else:
        seps = (_sep_kind(m["s1"]), _sep_kind(m["s2"]))
        if seps[0] and seps[0] == seps[1]:
            base = 0.85 if mobile else 0.75
        elif seps[0] or seps[1]:
            base = 0.7 if mobile else 0.55
        else:
            if _glued_to_letters(text, start, end):
                return
            base = (0.75 if len(mid) == 4 else 0.5) if mobile else 0.45
    yield start, end, "PHONE", base - penalty


# ---------------------------------------------------------------------------------------------- EMAIL
_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+\-])"
    r"(?P<local>[A-Za-z0-9](?:[A-Za-z0-9._%+\-]{0,62}[A-Za-z0-9_%+\-])?)"
    r"@(?P<domain>(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+(?P<tld>[A-Za-z]{2,24}))"
    r"(?![A-Za-z0-9\-])(?!\.[A-Za-z0-9])"
)
# Top-level "domains" that are really file extensions: icon@2x.png, logo@hd.svg.
_FILE_EXTENSIONS = frozenset(
    [
        "png",
        "jpg",
        "jpeg",
        "gif",
        "svg",
        "webp",
        "bmp",
        "ico",
        "js",
        "css",
        "html",
        "htm",
        "php",
        "json",
        "xml",
        "txt",
        "pdf",
        "zip",
        "mp3",
        "mp4",
    ]
)


def _score_email(text: str, m: re.Match[str]) -> Iterator[Candidate]:
    score = 0.3 if m["tld"].lower() in _FILE_EXTENSIONS else 0.95
    yield m.start(), m.end(), "EMAIL", score


# ------------------------------------------------------------------------------------------- RRN / FRN
_RRN = re.compile(
    _L + r"(?P<birth>[0-9]{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12][0-9]|3[01]))"
    rf"(?P<sep>{_DASH}| ?)(?P<g>[1-8])(?P<rest>[0-9]{{6}})" + _R
)


def _score_rrn(text: str, m: re.Match[str]) -> Iterator[Candidate]:
    g = m["g"]
    kind = "FRN" if g in FRN_CENTURY else "RRN"
    century = FRN_CENTURY.get(g) or RRN_CENTURY[g]
    if not valid_birth_date(m["birth"], century):
        return
    digits = m["birth"] + g + m["rest"]
    checksum = rrn_checksum_ok(digits)
    sep = _sep_kind(m["sep"])
    if sep == "-":
        score = 0.95 if checksum else 0.75
    elif sep == " ":
        score = 0.85 if checksum else 0.6
    else:
        if _glued_to_letters(text, m.start(), m.end()):
            return
        if digits[:3] in ("880", "978", "979") and ean13_ok(digits):
            score = 0.3  # a Korean (880) product barcode or an ISBN-13 that happens to look like a date
        else:
            score = 0.8 if checksum else 0.4
    yield m.start(), m.end(), kind, score


# ----------------------------------------------------------------------------------------------- CARD
_CARD = re.compile(
    _L + r"(?:(?P<g16>[0-9]{4}(?P<cs>[- ])[0-9]{4}(?P=cs)[0-9]{4}(?P=cs)[0-9]{4})(?P<g19>(?P=cs)[0-9]{3})?"
    r"|[0-9]{4}(?P<ca>[- ])[0-9]{6}(?P=ca)[0-9]{4,5}"
    r"|[0-9]{13,19})" + _R
)


def _card_score(digits: str, grouped: bool) -> float:
    if luhn_ok(digits):
        if card_network_ok(digits):
            return 0.9 if grouped else 0.65
        return 0.6 if grouped else 0.35
    return 0.3 if grouped else 0.15


def _score_card(text: str, m: re.Match[str]) -> Iterator[Candidate]:
    start, end = m.span()
    raw = m.group()
    digits = re.sub(r"[^0-9]", "", raw)
    grouped = len(digits) != len(raw)
    if not grouped and _glued_to_letters(text, start, end):
        return
    score = _card_score(digits, grouped)
    if m["g19"] and score < 0.6:
        # "1234 5678 9012 3456 789원": the 19-digit reading failed; try the plain 16-digit card before it.
        short = _card_score(re.sub(r"[^0-9]", "", m["g16"]), True)
        if short > score:
            end, score = m.end("g16"), short
    yield start, end, "CARD", score


# ------------------------------------------------------------------------------------------------ BRN
_BRN = re.compile(_L + r"(?P<a>[1-9][0-9]{2})(?P<s>[- ]?)(?P<b>[0-9]{2})(?P=s)(?P<c>[0-9]{5})" + _R)


def _score_brn(text: str, m: re.Match[str]) -> Iterator[Candidate]:
    if not brn_ok(m["a"] + m["b"] + m["c"]):
        return
    sep = m["s"]
    if not sep and _glued_to_letters(text, m.start(), m.end()):
        return
    score = {"-": 0.85, " ": 0.6}.get(sep, 0.35)
    yield m.start(), m.end(), "BRN", score


# ------------------------------------------------------------------------------------------------- IP
_IP = re.compile(r"(?<![0-9A-Za-z.])[0-9]{1,3}(?:\.[0-9]{1,3}){3}(?![0-9]|\.[0-9])")


def _score_ip(text: str, m: re.Match[str]) -> Iterator[Candidate]:
    if not public_ipv4(m.group()):
        return
    octets = [int(p) for p in m.group().split(".")]
    score = 0.35 if max(octets) < 10 else 0.8  # 1.2.3.4 reads like a version number
    yield m.start(), m.end(), "IP", score


RECOGNIZERS: tuple[Recognizer, ...] = (
    Recognizer("phone", ("PHONE",), PHONE_PATTERN, _score_phone),
    Recognizer("email", ("EMAIL",), _EMAIL, _score_email, needs="@"),
    Recognizer("rrn", ("RRN", "FRN"), _RRN, _score_rrn),
    Recognizer("card", ("CARD",), _CARD, _score_card),
    Recognizer("brn", ("BRN",), _BRN, _score_brn),
    Recognizer("ip", ("IP",), _IP, _score_ip),
)

# Context words (lower case) looked for just before / after a candidate: positive ones raise its score,
# negative ones (labels of things that merely look like PII) lower it.
_ID_NEGATIVE = (
    "isbn",
    "주문번호",
    "송장",
    "운송장",
    "상품번호",
    "바코드",
    "일련번호",
    "시리얼",
    "serial",
    "모델",
)
CONTEXT: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "PHONE": (
        (
            "전화",
            "연락",
            "휴대폰",
            "핸드폰",
            "폰",
            "문의",
            "팩스",
            "tel",
            "phone",
            "mobile",
            "fax",
            "콜센터",
            "고객센터",
            "대표번호",
            "번호로",
        ),
        _ID_NEGATIVE,
    ),
    "EMAIL": (("이메일", "메일", "email", "e-mail", "mail", "연락"), ()),
    "RRN": (("주민번호", "주민등록", "주민", "생년월일", "rrn"), _ID_NEGATIVE),
    "FRN": (("외국인등록", "외국인", "등록번호", "주민번호", "주민등록"), _ID_NEGATIVE),
    "CARD": (("카드", "card", "결제", "신용", "체크", "visa", "master", "할부"), _ID_NEGATIVE + ("계좌",)),
    "BRN": (("사업자", "등록번호", "법인", "상호", "대표자"), _ID_NEGATIVE),
    "IP": (("ip", "아이피", "서버", "접속", "주소", "host", "호스트"), ("버전", "version", "ver", "v.")),
}
