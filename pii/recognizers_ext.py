"""Recognizers of the second round: ACCOUNT, PASSPORT, DRIVER_LICENSE, IPv6, URL, ADDRESS and PERSON.

They follow :mod:`kplm.pii.recognizers` (same :class:`Recognizer` shape, same digit lookarounds) and
:data:`ALL_RECOGNIZERS` / :data:`ALL_CONTEXT` join both sets for :mod:`kplm.pii.detect`.

Two of these types are costly to look for in every document, so their patterns are *anchored* on
rare, literal pieces and the span is grown backwards in Python:

- ``ADDRESS`` is anchored on a road/lot word followed by a number (``…로 152``, ``…길 7``, ``…동 123-4``);
  the words before it count as the address only when they are administrative units (``…시``, ``…구``,
  ``…군``, ``…읍``, ``서울``, ``경기`` …). A road word with no unit before it scores under the threshold
  unless a context word (``주소``, ``소재지`` …) is near.
- ``PERSON`` is anchored on a title or form of address (``씨``, ``님``, ``기자``, ``교수``, ``과장`` …); the
  1-3 Hangul syllables before it are a name only if they start with a common surname and are not a
  common noun (``고객님``, ``선생님``). Names without such a title are not found (see the evaluation).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

from kplm.pii.recognizers import _DASH, _L, _R, CONTEXT, RECOGNIZERS, Candidate, Recognizer


def _words(words: str) -> tuple[str, ...]:
    """A tuple of the space-separated words of ``words`` (keeps long word lists compact)."""
    return tuple(words.split())


_L_ALNUM = r"(?<![0-9A-Za-z])"
_R_ALNUM = r"(?![0-9A-Za-z])"

# ---------------------------------------------------------------------------------------------- ACCOUNT
# Dashed groups of a bank account (110-123-456789, 1002-123-456789, 3333-01-1234567, 352-1234-5678-93,
# 123456-78-901234) or a run of 10-14 digits; only bank context words make them count.
_ACCOUNT = re.compile(
    _L + r"(?:[0-9]{2,6}(?:" + _DASH + r"[0-9]{2,7}){2,3}|[0-9]{10,14})" + _R,
)


def _score_account(text: str, m: re.Match[str]) -> Iterator[Candidate]:
    raw = m.group()
    digits = sum(ch.isdigit() for ch in raw)
    if not 10 <= digits <= 14:
        return
    # Without context an account is indistinguishable from an order or tracking number: 0.3 plus the
    # context boost (0.25) reaches the threshold only next to 계좌/은행/입금 words.
    yield m.start(), m.end(), "ACCOUNT", 0.3 if digits != len(raw) else 0.25


# --------------------------------------------------------------------------------------------- PASSPORT
# Korean passports: a type letter (M, S, R, O, D, G) and 8 digits, or since Dec 2021 M123A4567.
_PASSPORT = re.compile(_L_ALNUM + r"[MSRODG](?:[0-9]{8}|[0-9]{3}[A-Z][0-9]{4})" + _R_ALNUM)
_DATE8 = re.compile(r"(?:19|20)[0-9]{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12][0-9]|3[01])")


def _score_passport(text: str, m: re.Match[str]) -> Iterator[Candidate]:
    body = m.group()[1:]
    if body.isdigit():
        score = 0.3 if _DATE8.fullmatch(body) else 0.55  # S20240315 is a dated code, not a passport
    else:
        score = 0.7
    yield m.start(), m.end(), "PASSPORT", score


# --------------------------------------------------------------------------------------- DRIVER_LICENSE
# 12 digits: 2-digit region code (11-26, 28), 2-digit year, 6-digit serial, 2 check digits; since 2011
# licences may print the region name instead of its code (서울 20-123456-78).
_REGION_NAMES = "서울|부산|경기|강원|충북|충남|전북|전남|경북|경남|제주|대구|인천|광주|대전|울산|세종"
_LICENSE = re.compile(
    r"(?:(?P<name>" + _REGION_NAMES + r") ?|" + _L + r"(?P<code>1[1-9]|2[0-68])(?P<s0>" + _DASH + r"?))"
    r"(?P<year>[0-9]{2})(?P<s1>" + _DASH + r"?)[0-9]{6}(?P=s1)[0-9]{2}" + _R
)


def _score_license(text: str, m: re.Match[str]) -> Iterator[Candidate]:
    dashed = bool(m["s1"])
    if m["name"]:
        score = 0.8 if dashed else 0.45
    else:
        score = 0.7 if dashed and m["s0"] else 0.3
    yield m.start(), m.end(), "DRIVER_LICENSE", score


# ----------------------------------------------------------------------------------------------- IPv6
_IPV6 = re.compile(
    r"(?<![0-9A-Fa-f:.])(?:[0-9A-Fa-f]{1,4}:|:)(?::|[0-9A-Fa-f]{1,4}:){1,7}[0-9A-Fa-f]{0,4}"
    r"(?![0-9A-Fa-f:])"
)


def _score_ipv6(text: str, m: re.Match[str]) -> Iterator[Candidate]:
    raw = m.group()
    if "::" not in raw and raw.count(":") != 7:
        return  # 10:30:00 and other colon-separated numbers are not IPv6 addresses
    try:
        addr = ipaddress.IPv6Address(raw)
    except ValueError:
        return
    if addr.is_global:
        yield m.start(), m.end(), "IP", 0.85


# ------------------------------------------------------------------------------------------------ URL
_URL = re.compile(r"(?i:https?://|www\.)[^\s<>\"'\u3131-\u318e\uac00-\ud7a3]+")
_URL_TRAIL = ".,;:!?)]}'\""


def _score_url(text: str, m: re.Match[str]) -> Iterator[Candidate]:
    start, end = m.span()
    while end > start and text[end - 1] in _URL_TRAIL:
        if text[end - 1] == ")" and "(" in text[start:end]:
            break  # https://ko.wikipedia.org/wiki/X_(Y) keeps its parenthesis
        end -= 1
    if end - start > 10:
        yield start, end, "URL", 0.8


# -------------------------------------------------------------------------------------------- ADDRESS
_ADDR_ANCHOR = re.compile(
    r"(?<=[\uac00-\ud7a30-9])(?P<kind>로|길|동|리) ?(?P<num>[0-9]{1,5}(?:-[0-9]{1,5})?)(?![0-9]|[-.][0-9])"
    r"(?P<tail>번지|(?:번길 ?[0-9]{1,5}))?(?P<unit>(?:,? ?[0-9]{1,4}동)? ?[0-9]{1,5}호)?"
)
_ADMIN_SUFFIX = frozenset("시도군구읍면동")
_REGION_SHORT = frozenset(_REGION_NAMES.split("|"))
_NOT_ADMIN = frozenset(
    ["하지만", "그리고", "이번", "모두", "지금", "여기", "저기", "역시", "다시", "또는", "모든"]
)


_ADDR_FOLLOW = frozenset("에이은의을와과로까부번호입인도")
_NAME_FOLLOW = frozenset("는가를도의에께와랑한하만이은과요")


def _hangul(ch: str) -> bool:
    return "\uac00" <= ch <= "\ud7a3"


def _word_start(text: str, end: int, digits: bool) -> int:
    i = end
    while i > 0 and (_hangul(text[i - 1]) or (digits and text[i - 1].isdigit())):
        i -= 1
    return i


def _score_address(text: str, m: re.Match[str]) -> Iterator[Candidate]:
    end = m.end()
    start = _word_start(text, m.start("kind"), digits=True)
    after = text[end : end + 1]
    if not m["tail"] and not m["unit"] and (after == "%" or (_hangul(after) and after not in _ADDR_FOLLOW)):
        return  # "천호동 3류극장", "치료제로 30살", "…로 3명": the number belongs to the next word
    units = 0
    while units < 4 and start > 1 and text[start - 1] == " ":
        w_start = _word_start(text, start - 1, digits=False)
        word = text[w_start : start - 1]
        if len(word) < 2 or word in _NOT_ADMIN:
            break
        if word[-1] not in _ADMIN_SUFFIX and word not in _REGION_SHORT and not word.endswith("특별자치도"):
            break
        start, units = w_start, units + 1
    road = m["kind"] in "로길"
    if units:
        score = 0.8 if road or m["tail"] == "번지" else 0.6
    else:
        score = 0.45 if m["tail"] == "번지" else 0.3
    yield start, end, "ADDRESS", score


# --------------------------------------------------------------------------------------------- PERSON
SURNAMES = frozenset(
    "김이박최정강조윤장임한오서신권황안송전홍유고문양손배백허남심노하곽성차주우구민류나진지엄채원천방공"
    "현함변염여추도소석선설마길연위표명기반왕금옥육인맹제모탁국은편용예봉경사부가복태목형피두감음빈동온"
)
_TITLES = _words(
    "씨 님 기자 교수 과장 대표 부장 차장 사장 회장 의원 장관 선생 박사 감독 선수 원장 총장 위원장 변호사 "
    "판사 작가 대통령 팀장 실장 군수 도지사 목사 특파원 앵커 모씨 후보 총리 대변인 의장 국장 단장 소장 "
    "코치 배우 가수 비서관 수석"
)
_PERSON = re.compile(
    r"(?<=[\uac00-\ud7a3])(?P<sp> ?)(?:전 )?(?P<title>"
    + "|".join(sorted(_TITLES, key=len)[::-1])
    + r"|모(?=\(|,| ?씨))"  # 김모(33)씨, 김모 씨: a surname with 모 (so-and-so)
)
# Common nouns that take 님/씨/장 and start with a surname syllable (고객님, 선생님, 사장님 …).
_NOT_NAMES = frozenset(
    [
        "고객",
        "손님",
        "하느",
        "하나",
        "사장",
        "부장",
        "과장",
        "교수",
        "선생",
        "회장",
        "원장",
        "기사",
        "형",
        "언니",
        "누나",
        "오빠",
        "아버",
        "어머",
        "할머",
        "할아",
        "주인",
        "도련",
        "아가",
        "이모",
        "고모",
        "삼촌",
        "신랑",
        "신부",
        "조카",
        "사모",
        "장모",
        "장인",
        "부모",
        "자녀",
        "이웃",
        "여러분",
        "구독",
        "시청",
        "국민",
        "전",
        "정부",
        "우리",
        "유저",
        "성도",
        "학생",
        "환자",
        "작가",
        "감독",
        "배우",
        "가수",
        "조교",
        "주무",
        "이장",
        "반장",
        "동장",
        "구청",
        "시청",
        "도청",
        "공무",
        "기자",
        "연기",
        "대표",
        "전문",
        "이사",
        "부사",
        "위원",
        "국회",
        "지방",
        "경찰",
        "소방",
        "검찰",
        "법무",
        "금융",
        "대학",
        "고등",
        "중학",
        "한국",
        "일본",
        "중국",
        "미국",
        "영국",
        "독일",
        "유럽",
        "해외",
        "국내",
        "지역",
        "동네",
        "이번",
        "저번",
        "오늘",
        "내일",
        "올해",
        "정말",
        "진짜",
    ]
)
_PARTICLE_END = frozenset("는을를의에와과만")  # not 은/이/가/도/로: 주은, 수이, 준도, 수로 end names


def _score_person(text: str, m: re.Match[str]) -> Iterator[Candidate]:
    end = m.start("sp")
    start = _word_start(text, end, digits=False)
    name = text[start:end]
    title = m["title"]
    if title in ("모씨", "모"):
        name_ok = len(name) == 1
    else:
        name_ok = 1 <= len(name) <= 4
    after = text[m.end() : m.end() + 1]
    if title in ("씨", "님") and _hangul(after) and after not in _NAME_FOLLOW:
        return  # "씨지비", "님비": the syllable starts a word, it is no title
    if title == "님" and name.endswith("아"):
        return  # "…아님" (is not)
    if any(name.endswith(t) for t in _TITLES if len(t) > 1):
        return  # "김선생님": the name is found before 선생, not as 김선생 before 님
    if not name_ok or name[0] not in SURNAMES or name in _NOT_NAMES or name[:2] in _NOT_NAMES:
        return
    if len(name) >= 2 and name[-1] in _PARTICLE_END:
        return  # "최고의 배우", "소속들을 …": a word with its particle, not a name
    if len(name) >= 2 and m["sp"] == "" and title not in ("씨", "님"):
        return  # "공동대표", "여배우", "국세청장": compounds; glued names count with 씨/님 only
    if len(name) == 1 and m["sp"] and name in "이두전" and title != "씨":
        return  # "이 배우는" (this actor), "두 배우", "전 의원": determiners, not surnames
    if len(name) == 1:
        if m["sp"] == "" and title == "님":
            return  # "정님", "이님": noise far more often than a surname-only address
        score = 0.7
    elif len(name) == 4:
        score = 0.5  # 남궁민수, 황보 … rare; also many nouns
    else:
        score = 0.75 if len(name) == 3 else 0.6
    if title in ("님", "씨") and len(name) == 2:
        score -= 0.05
    yield start, end, "PERSON", score


# ------------------------------------------------------------------------------------------- tables

ALL_RECOGNIZERS: tuple[Recognizer, ...] = RECOGNIZERS + (
    Recognizer("account", ("ACCOUNT",), _ACCOUNT, _score_account),
    Recognizer("passport", ("PASSPORT",), _PASSPORT, _score_passport),
    Recognizer("driver_license", ("DRIVER_LICENSE",), _LICENSE, _score_license),
    Recognizer("ipv6", ("IP",), _IPV6, _score_ipv6, needs="::"),
    Recognizer("url", ("URL",), _URL, _score_url, needs="url"),
    Recognizer("address", ("ADDRESS",), _ADDR_ANCHOR, _score_address),
    Recognizer("person", ("PERSON",), _PERSON, _score_person, needs="person"),
)

#: Characters of which one must occur in a text before a recognizer with that ``needs`` runs (the
#: other ``needs`` values, "digit", "@", "::" and "url", are checked by :mod:`kplm.pii.detect` itself).
NEEDS_CHARS: dict[str, frozenset[str]] = {"person": frozenset(t[0] for t in _TITLES)}

_BANKS = _words(
    "계좌 은행 입금 송금 이체 예금주 뱅크 국민 신한 우리 하나 기업 농협 수협 신협 우체국 새마을금고 카카오 "
    "토스 account"
)
ALL_CONTEXT: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    **CONTEXT,
    "ACCOUNT": (_BANKS, ("주문", "송장", "운송장", "상품번호", "isbn", "바코드", "일련번호", "사건", "카드")),
    "PASSPORT": (
        ("여권", "passport", "비자", "출국", "입국"),
        ("모델", "주문", "품번", "상품", "제품", "부품"),
    ),
    "DRIVER_LICENSE": (("운전면허", "면허번호", "면허증", "면허", "license", "driver"), ("주문", "사건")),
    "URL": ((), ()),
    "ADDRESS": (("주소", "소재지", "거주", "살고", "사는", "위치", "도로명", "지번", "배송지", "주소지"), ()),
    "PERSON": ((), ()),
}
