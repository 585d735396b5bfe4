"""Detection: every supported format in Korean sentences, validators, context, overlaps and look-alikes.

All PII below is made up: test card numbers (4111…), RRNs built with the published check-digit rule,
reserved example domains and the like.
"""

from __future__ import annotations

import pytest

from kplm.pii.detect import DETECTABLE_TYPES, PII_TYPES, PiiSpan, candidates, detect, resolve_overlaps


def found(text: str, **kwargs) -> list[tuple[str, str]]:
    """(span text, type) of every detection in ``text``."""
    return [(text[s.start : s.end], s.type) for s in detect(text, **kwargs)]


def only(text: str, **kwargs) -> PiiSpan:
    spans = detect(text, **kwargs)
    assert len(spans) == 1, [(text[s.start : s.end], s.type, s.score) for s in spans]
    return spans[0]


PHONES = [
    "010-1234-5678",
    "010.9876.5432",
    "010 2345 6789",
    "01034567890",
    "011-234-5678",
    "016-789-1234",
    "019-9876-5432",
    "02-2345-6789",
    "02-123-4567",
    "031-234-5678",
    "064-712-3456",
    "(02) 2345-6789",
    "(02) 123-4567",
    "(031)234-5678",
    "070-1234-5678",
    "0505-123-4567",
    "080-234-5678",
    "1588-1234",
    "1644-5678",
    "1899-0001",
    "+82 10-1234-5678",
    "+82-10-1234-5678",
    "+82-2-123-4567",
    "+821012345678",
    "+82 (0)31-234-5678",
]


@pytest.mark.parametrize("number", PHONES)
def test_phone_formats_in_plain_sentences(number: str) -> None:
    text = f"회의 끝나고 {number}로 보내 주시면 확인하겠습니다."
    assert found(text) == [(number, "PHONE")]


@pytest.mark.parametrize("number", ["0223456789", "0312345678", "07012345678"])
def test_unseparated_landlines_need_context(number: str) -> None:
    assert found(f"이번 주 {number} 건은 보류") == []
    assert found(f"사무실 전화 {number}입니다") == [(number, "PHONE")]


def test_phone_followed_by_particles_and_inside_longer_text() -> None:
    text = "연락처:010-1234-5678(김민수), 집 02-2345-6789이고 팩스는 031.234.5679예요."
    assert found(text) == [
        ("010-1234-5678", "PHONE"),
        ("02-2345-6789", "PHONE"),
        ("031.234.5679", "PHONE"),
    ]


def test_phone_followed_by_beon_still_detected() -> None:
    assert found("010-1234-5678번으로 연락 주세요") == [("010-1234-5678", "PHONE")]


def test_phone_context_raises_score() -> None:
    plain = only("내일 010-1234-5678 건 정리").score
    labelled = only("휴대폰 번호 010-1234-5678 입니다").score
    assert 0.5 <= plain < labelled < 1.0


@pytest.mark.parametrize(
    "text",
    [
        "A01012345678 주문 건",  # glued to an order-code prefix
        "010-123-456 까지만 적혀 있다",  # too short
        "02-0123-4567 은 국번이 0으로 시작한다",  # no exchange starts with 0
        "임진왜란(1592-1598) 당시의 이야기",  # a range of years, not a 1588 service number
        "123-010-1234-5678 은 일련번호",  # middle of a longer dashed number
        "입장료 1800-3000원 사이",  # a price range followed by its unit
    ],
)
def test_phone_lookalikes(text: str) -> None:
    assert found(text) == []


EMAILS = [
    ("결과는 a@b.com으로 보내 주세요", "a@b.com"),
    ("자료는 kim@example.co.kr에게 부탁드려요", "kim@example.co.kr"),
    ("hong.gildong+news@mail.example.org입니다", "hong.gildong+news@mail.example.org"),
    ("메일:user_01@example.net를 확인", "user_01@example.net"),
    ("문의(test-1@example.com) 바랍니다.", "test-1@example.com"),
    ("<minsu.lee@example.com>로 회신", "minsu.lee@example.com"),
    ("주소 끝에 마침표 lee@example.com.", "lee@example.com"),
]


@pytest.mark.parametrize(("text", "email"), EMAILS)
def test_email_ends_at_domain_even_before_particles(text: str, email: str) -> None:
    assert found(text) == [(email, "EMAIL")]


@pytest.mark.parametrize("text", ["아이콘 icon@2x.png 파일", "@minsu 님 감사해요", "a@b 는 주소가 아님"])
def test_email_lookalikes(text: str) -> None:
    assert found(text) == []


def test_rrn_with_and_without_checksum() -> None:
    # 900101-123456? has check digit 8; the 7 variant is what a post-2020 number may look like.
    with_check = only("주민등록번호 900101-1234568 확인 부탁드립니다")
    without = only("주민등록번호 900101-1234567 확인 부탁드립니다")
    assert (with_check.type, without.type) == ("RRN", "RRN")
    assert 0.5 <= without.score < with_check.score
    # Same ordering without any context word.
    assert 0.5 <= only("900101-1234567 건").score < only("900101-1234568 건").score


def test_rrn_date_and_gender_validation() -> None:
    assert found("000229-3123454 건") == [("000229-3123454", "RRN")]  # 2000 was a leap year
    for bad in ("010229-3123456", "901301-1234568", "900230-1234568", "900101-9234568", "900101-0234568"):
        assert found(f"주민번호 {bad}") == [], bad


def test_unseparated_rrn() -> None:
    assert found("번호는 9001011234568 이에요") == [("9001011234568", "RRN")]
    assert found("번호는 9001011234567 이에요") == []  # no checksum, no context: too weak
    assert found("주민번호 9001011234567") == [("9001011234567", "RRN")]
    assert found("바코드 8801151000138 상품") == []  # EAN-13 of a Korean product, also RRN-shaped


def test_frn_is_its_own_type() -> None:
    assert found("외국인등록번호 900101-5234561 제출") == [("900101-5234561", "FRN")]
    assert found("외국인등록번호 050315-7123456") == [("050315-7123456", "FRN")]
    assert found("외국인등록번호 900101-5234561", types=["RRN"]) == []


CARDS = [
    "4111-1111-1111-1111",
    "4111 1111 1111 1111",
    "5500 0000 0000 0004",
    "3782-822463-10005",
    "9410-1234-5678-9010",
    "4111111111111111",
]


@pytest.mark.parametrize("card", CARDS)
def test_card_formats(card: str) -> None:
    assert found(f"이번 달 {card} 으로 처리됨") == [(card, "CARD")]


def test_luhn_invalid_card_needs_context() -> None:
    assert found("참고 4111111111111112 입니다") == []
    assert found("참고 4111-1111-1111-1112 입니다") == []
    assert found("카드번호 4111-1111-1111-1112 입니다") == [("4111-1111-1111-1112", "CARD")]
    assert found("주문번호 4111111111111111 입니다") == []  # labelled as something else


def test_card_not_extended_by_a_following_number() -> None:
    text = "카드 4111 1111 1111 1111 123원 결제"
    assert found(text) == [("4111 1111 1111 1111", "CARD")]


def test_brn_checksum() -> None:
    assert found("사업자등록번호: 123-45-67891") == [("123-45-67891", "BRN")]
    assert found("사업자등록번호: 123-45-67890") == []
    assert found("사업자등록번호 1234567891 입니다") == [("1234567891", "BRN")]
    assert found("참고 1234567891 입니다") == []


def test_ip_public_only() -> None:
    assert found("접속 IP는 211.45.67.89입니다") == [("211.45.67.89", "IP")]
    for private in ("192.168.0.1", "127.0.0.1", "10.0.0.12", "203.0.113.5"):
        assert found(f"서버 주소 {private}") == [], private
    assert found("버전 10.20.30.40 업데이트") == []
    assert found("빌드 10.0.19041.1 설치") == []


LOOKALIKES = [
    "개봉일은 2024-03-15이고 재개봉은 2024.03.15 예정",
    "가격은 12,900원, 세트는 1,234,567원",
    "오후 12:30:45에 시작해서 3:1로 이겼다",
    "v1.2.3 버전과 2.10.4 버전 비교",
    "주문번호 ORD-20240315-0001 / A2024031512345678",
    "ISBN 978-89-7914-063-2 / ISBN 9788979140632",
    "우편번호 06236, 구 우편번호 135-080",
    "타임스탬프 20240315123456 기록",
    "원주율 3.14159265358979",
    "평점 9.5점, 15.08.25 작성, 1+1 행사",
    "2024년 3월 15일 오후 7시 30분",
]


@pytest.mark.parametrize("text", LOOKALIKES)
def test_lookalikes_do_not_fire(text: str) -> None:
    assert found(text) == []


def test_isbn_with_isbn_context_is_not_an_rrn_or_card() -> None:
    assert found("ISBN 9791162540640 도서") == []


def test_offsets_are_str_offsets_and_fullwidth_digits_fold() -> None:
    text = "😀🎬 연락처 ０１０－１２３４－５６７８ 그리고 ｋｉｍ＠ｅｘａｍｐｌｅ．ｃｏｍ"
    spans = detect(text)
    assert [s.type for s in spans] == ["PHONE", "EMAIL"]
    assert text[spans[0].start : spans[0].end] == "０１０－１２３４－５６７８"
    assert text[spans[1].start : spans[1].end] == "ｋｉｍ＠ｅｘａｍｐｌｅ．ｃｏｍ"


def test_types_and_min_score_filters() -> None:
    text = "전화 010-1234-5678, 메일 kim@example.com, 주민번호 900101-1234568"
    assert [s.type for s in detect(text)] == ["PHONE", "EMAIL", "RRN"]
    assert [s.type for s in detect(text, types=["EMAIL"])] == ["EMAIL"]
    assert detect(text, min_score=1.0) == []
    with pytest.raises(ValueError, match="unknown PII type 'PHONES'"):
        detect(text, types=["PHONES"])
    with pytest.raises(ValueError, match="min_score"):
        detect(text, min_score=1.5)
    assert DETECTABLE_TYPES == PII_TYPES  # every type of the issue has a detector


def test_overlaps_resolved_by_score_then_length() -> None:
    # 4501011000059 passes both the RRN and the Visa-13 checks: both recognizers propose it.
    text = "번호 4501011000059 입니다"
    kinds = {c[2] for c in candidates(text) if c[2] != "ACCOUNT"}  # a bare 13-digit account: 0.25
    assert kinds == {"RRN", "CARD"}
    assert found(text) == [("4501011000059", "RRN")]  # the RRN reading scores higher
    # Higher score wins even against a longer span; then the longer span; then the earlier one.
    cands = [(0, 10, "CARD", 0.6), (2, 12, "PHONE", 0.6), (0, 4, "IP", 0.9), (11, 14, "BRN", 0.6)]
    result = resolve_overlaps(cands)
    assert result == [PiiSpan(0, 4, "IP", 0.9), PiiSpan(11, 14, "BRN", 0.6)]
    assert resolve_overlaps(list(reversed(cands))) == result  # independent of input order
    assert resolve_overlaps([(0, 5, "PHONE", 0.7), (0, 8, "CARD", 0.7)]) == [PiiSpan(0, 8, "CARD", 0.7)]
    assert resolve_overlaps([(3, 8, "PHONE", 0.7), (0, 5, "CARD", 0.7)]) == [PiiSpan(0, 5, "CARD", 0.7)]


def test_many_spans_in_one_document_sorted() -> None:
    text = (
        "안녕하세요. 담당자 김민수입니다. 연락처는 010-1234-5678이고, 메일은 minsu@example.com으로 주세요. "
        "사업자등록번호 123-45-67891, 결제 카드 4111-1111-1111-1111, 접속 IP 211.45.67.89."
    )
    assert found(text) == [
        ("010-1234-5678", "PHONE"),
        ("minsu@example.com", "EMAIL"),
        ("123-45-67891", "BRN"),
        ("4111-1111-1111-1111", "CARD"),
        ("211.45.67.89", "IP"),
    ]
