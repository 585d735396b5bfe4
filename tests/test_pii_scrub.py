"""Scrub policies: placeholders, same-length masks and checksum-valid, consistent surrogates."""

from __future__ import annotations

import json
import pickle
import re

import pytest

from kplm.pii.detect import PII_TYPES, PiiSpan, detect
from kplm.pii.scrub import PLACEHOLDERS, mask_text, scrub
from kplm.pii.surrogate import SECRET_ENV, Surrogator
from kplm.pii.validators import brn_ok, card_network_ok, luhn_ok, rrn_checksum_ok, valid_birth_date

TEXT = (
    "담당자 연락처는 010-1234-5678이고 메일은 minsu@example.co.kr으로 주세요. "
    "주민번호 900101-1234568, 카드 4111-1111-1111-1111, 사업자등록번호 123-45-67891, 서버 211.45.67.89."
)


def test_placeholders_cover_every_type() -> None:
    assert set(PLACEHOLDERS) == set(PII_TYPES)
    assert PLACEHOLDERS["PHONE"] == "[PHONE]" and PLACEHOLDERS["DRIVER_LICENSE"] == "[DRIVER_LICENSE]"


def test_tag_policy() -> None:
    out = scrub(TEXT, detect(TEXT), "tag")
    assert out == (
        "담당자 연락처는 [PHONE]이고 메일은 [EMAIL]으로 주세요. "
        "주민번호 [RRN], 카드 [CARD], 사업자등록번호 [BRN], 서버 [IP]."
    )


def test_mask_policy_keeps_length_and_separators() -> None:
    spans = detect(TEXT)
    out = scrub(TEXT, spans, "mask")
    assert len(out) == len(TEXT)
    assert "***-****-****이고" in out
    assert "*****@*******.**.**으로" in out
    assert "******-*******," in out
    assert "****-****-****-****" in out
    assert "***.**.**.**." in out
    assert not re.search(r"[0-9]", out)
    assert mask_text("(02) 123-4567") == "(**) ***-****"


def test_no_spans_is_identity_and_bad_spans_are_rejected() -> None:
    assert scrub("개인정보 없는 문장", [], "tag") == "개인정보 없는 문장"
    with pytest.raises(ValueError, match="overlapping"):
        scrub("0123456789", [PiiSpan(0, 5, "PHONE", 0.9), PiiSpan(3, 8, "PHONE", 0.9)], "tag")
    with pytest.raises(ValueError, match="policy"):
        scrub("0123456789", [], "redact")  # type: ignore[arg-type]


def test_surrogates_are_valid_same_format_and_consistent() -> None:
    sur = Surrogator("test-secret")
    spans = detect(TEXT)
    out = scrub(TEXT, spans, "surrogate", surrogator=sur)
    assert out != TEXT
    assert out == scrub(TEXT, spans, "surrogate", surrogator=Surrogator("test-secret"))
    assert out != scrub(TEXT, spans, "surrogate", surrogator=Surrogator("another-secret"))

    fakes = {s.type: sur.fake(s.type, TEXT[s.start : s.end]) for s in spans}
    for s in spans:  # every original value is gone
        assert TEXT[s.start : s.end] not in out

    assert re.fullmatch(r"010-[0-9]{4}-[0-9]{4}", fakes["PHONE"])
    assert re.fullmatch(r"[a-z]+[0-9]+@example\.(com|net|org)", fakes["EMAIL"])
    rrn = fakes["RRN"].replace("-", "")
    assert re.fullmatch(r"[0-9]{6}-[1-4][0-9]{6}", fakes["RRN"]) and rrn_checksum_ok(rrn)
    assert valid_birth_date(rrn[:6], 1900 if rrn[6] in "12" else 2000)
    card = fakes["CARD"].replace("-", "")
    assert re.fullmatch(r"4111(-[0-9]{4}){3}", fakes["CARD"]) and luhn_ok(card) and card_network_ok(card)
    assert re.fullmatch(r"[0-9]{3}-[0-9]{2}-[0-9]{5}", fakes["BRN"]) and brn_ok(fakes["BRN"].replace("-", ""))
    assert re.fullmatch(r"(192\.0\.2|198\.51\.100|203\.0\.113)\.[0-9]+", fakes["IP"])

    # The fakes are themselves detected as the same types (except documentation-range IPs).
    assert [s.type for s in detect(out)] == ["PHONE", "EMAIL", "RRN", "CARD", "BRN"]


def test_surrogate_same_value_same_fake_across_formats() -> None:
    sur = Surrogator(b"k")
    a = sur.fake("PHONE", "010-1234-5678")
    b = sur.fake("PHONE", "010 1234 5678")
    c = sur.fake("PHONE", "+82 10-1234-5678")
    assert a.replace("-", "") == b.replace(" ", "") == "0" + c.replace("+82 ", "").replace("-", "")
    assert sur.fake("PHONE", "010-1234-5679") != a
    assert re.fullmatch(r"\(02\) [2-9][0-9]{2}-[0-9]{4}", sur.fake("PHONE", "(02) 123-4567"))
    assert re.fullmatch(r"1588-[0-9]{4}", sur.fake("PHONE", "1588-1234"))
    frn = sur.fake("FRN", "900101-5234561")
    assert frn[7] in "5678" and rrn_checksum_ok(frn.replace("-", ""))
    name = sur.fake("PERSON", "홍길동")
    assert re.fullmatch(r"[가-힣]{3}", name) and name == sur.fake("PERSON", "홍길동")
    assert sur.fake("NOT_A_TYPE", "x") is None  # every PII type has a generator; unknown ones do not
    text = "고객 홍길동"
    assert scrub(text, [PiiSpan(3, 6, "PERSON", 0.9)], "surrogate", surrogator=sur) == f"고객 {name}"


def test_surrogate_secret_never_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "do-not-leak-7f3a9c"
    sur = Surrogator(secret)
    assert secret not in repr(sur) and secret not in str(sur)
    assert secret not in json.dumps({"s": sur}, default=str)
    clone = pickle.loads(pickle.dumps(sur))
    assert clone.fake("PHONE", "010-1234-5678") == sur.fake("PHONE", "010-1234-5678")
    monkeypatch.setenv(SECRET_ENV, secret)
    assert Surrogator().fake("EMAIL", "a@b.com") == sur.fake("EMAIL", "a@b.com")
    monkeypatch.delenv(SECRET_ENV)
    assert Surrogator().fake("CARD", "4111111111111111") != Surrogator().fake("CARD", "4111111111111111")
    with pytest.raises(ValueError, match="empty"):
        Surrogator("")
