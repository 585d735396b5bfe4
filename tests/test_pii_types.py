"""The second-round PII types: ACCOUNT, PASSPORT, DRIVER_LICENSE, IPv6, URL, ADDRESS, PERSON (+ 032) phones).

Every sentence is Korean text written for these tests; values are fakes of the real formats. Each test
asserts the exact span (so boundaries around particles are checked) and the look-alikes that must stay
silent.
"""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import pytest

from kplm.pii.detect import detect
from kplm.pii.files import PiiFileConfig, detect_file
from kplm.pii.scrub import scrub
from kplm.pii.step import PiiScrubStep
from kplm.pii.surrogate import Surrogator


def found(text: str, **kw: object) -> list[tuple[str, str]]:
    return [(text[s.start : s.end], s.type) for s in detect(text, **kw)]


@pytest.mark.parametrize(
    ("text", "value", "kind"),
    [
        ("입금 계좌는 국민은행 123456-78-901234 입니다.", "123456-78-901234", "ACCOUNT"),
        ("신한 110-482-736519로 보내 주세요", "110-482-736519", "ACCOUNT"),
        ("카카오뱅크 3333-01-5829174 (예금주 본인)", "3333-01-5829174", "ACCOUNT"),
        ("농협 계좌 352-1234-5678-93", "352-1234-5678-93", "ACCOUNT"),
        ("여권번호 M52814736 확인했습니다.", "M52814736", "PASSPORT"),
        ("새 여권(M381B2046)을 받았다", "M381B2046", "PASSPORT"),
        ("운전면허번호 11-19-482715-63 로 인증", "11-19-482715-63", "DRIVER_LICENSE"),
        ("면허증 번호는 경기 08-553172-40입니다.", "경기 08-553172-40", "DRIVER_LICENSE"),
        ("접속 IP 2406:5a00:1f2b::8c1 에서 로그인", "2406:5a00:1f2b::8c1", "IP"),
        (
            "제 블로그 https://blog.somesite.kr/post/8812에 후기 올렸어요.",
            "https://blog.somesite.kr/post/8812",
            "URL",
        ),
        ("자세한 건 www.myshop-mall.co.kr/item/3를 참고하세요.", "www.myshop-mall.co.kr/item/3", "URL"),
        ("주소: 서울특별시 마포구 한빛로 128-4", "서울특별시 마포구 한빛로 128-4", "ADDRESS"),
        (
            "경기도 성남시 분당구 새솔길 35 101동 1203호로 보내주세요",
            "경기도 성남시 분당구 새솔길 35 101동 1203호",
            "ADDRESS",
        ),
        (
            "저는 부산광역시 해운대구 솔내동 512-7번지에 살아요",
            "부산광역시 해운대구 솔내동 512-7번지",
            "ADDRESS",
        ),
        ("김민서 씨가 회의에서 발표했다.", "김민서", "PERSON"),
        ("담당자 이준호 과장에게 전달했습니다.", "이준호", "PERSON"),
        ("한주은님께 감사드립니다.", "한주은", "PERSON"),
        ("박 교수는 이렇게 말했다.", "박", "PERSON"),
        ("성매매 여성 김모씨 등", "김", "PERSON"),
        ("피의자 박모(33)씨를 입건했다", "박", "PERSON"),
        ("정세훈 전 대통령이 방문했다", "정세훈", "PERSON"),
        ("문의 032) 809-6524 로 전화 주세요", "032) 809-6524", "PHONE"),
    ],
)
def test_new_types_exact_spans(text: str, value: str, kind: str) -> None:
    assert found(text) == [(value, kind)]


@pytest.mark.parametrize(
    "text",
    [
        "주문번호 2024-0315-123456 배송 완료",  # account-shaped but an order number
        "110-482-736519",  # account-shaped, no bank context
        "모델 S20240315 출시",  # passport-shaped date code
        "회의는 10:30:00에 시작합니다.",  # colons, not IPv6
        "내부망 fe80::1 과 문서용 2001:db8::5 주소",  # not public IPv6
        "학교로 3명이 찾아왔다.",  # "…로 3" followed by a counter
        "88년도 천호동 3류극장에서 봤다",
        "치료제로 30살까지 살았다",
        "고객님 주문이 완료되었습니다.",
        "선생님 말씀 잘 들어라.",
        "하느님께 기도했다.",
        "채널 씨지비에서 봤다",
        "장난아님 진짜",
        "사건번호 2023가합12345 판결",
        "회의실은 이번 동 3층",
        "명품배우들이 모였다",  # compound noun before a title
        "최고의 배우! 이 배우는 누구?",
    ],
)
def test_look_alikes_stay_silent(text: str) -> None:
    assert found(text) == []


def test_title_forms_and_mecab_mode() -> None:
    assert found("김선생님께 여쭤봤다") == [("김", "PERSON")]
    text = "손흥민이 두 골을 넣었다."
    assert found(text) == []  # no title: the context detector does not see the name
    assert found(text, person="mecab") == [("손흥민", "PERSON")]
    assert found("사건번호 2005노21631 선고", person="mecab") == []  # lone syllable glued to digits
    with pytest.raises(ValueError, match="person: must be one of"):
        detect(text, person="bert")


def test_surrogates_of_new_types_keep_format_and_are_consistent() -> None:
    sur = Surrogator(b"test-key")
    cases = {
        "ACCOUNT": ("110-482-736519", r"[0-9]{3}-[0-9]{3}-[0-9]{6}"),
        "PASSPORT": ("M381B2046", r"M[0-9]{3}B[0-9]{4}"),
        "DRIVER_LICENSE": ("11-19-482715-63", r"11-[0-9]{2}-[0-9]{6}-[0-9]{2}"),
        "URL": ("https://blog.somesite.kr/post/8812", r"https://example\.(com|net|org)/[a-z]+/[0-9]+"),
        "PERSON": ("김민서", r"[가-힣]{3}"),
        "ADDRESS": ("서울특별시 마포구 한빛로 128-4", r"[가-힣 ]+(로|길) [0-9]+"),
    }
    for kind, (value, shape) in cases.items():
        fake = sur.fake(kind, value)
        assert re.fullmatch(shape, fake), kind
        assert fake != value and fake == sur.fake(kind, value), kind
    v6 = sur.fake("IP", "2406:5a00:1f2b::8c1")
    assert v6.startswith("2001:db8:") and found(f"IP {v6}") == []  # documentation range: never re-detected
    text = "입금 계좌는 국민은행 123456-78-901234, 담당 김민서 씨"
    out = scrub(text, detect(text), "surrogate", surrogator=sur)
    assert "123456-78-901234" not in out and "김민서" not in out
    assert [s.type for s in detect(out)] == ["ACCOUNT", "PERSON"]  # fakes keep the shape detectors know


def test_person_mode_reaches_the_step_and_the_file_commands(tmp_path: Path) -> None:
    step = pickle.loads(pickle.dumps(PiiScrubStep(policy="tag", person="mecab")))  # tagger is lazy
    assert step.scrub_text("손흥민이 두 골을 넣었다.")[0] == "[PERSON]이 두 골을 넣었다."
    assert PiiScrubStep(policy="tag").scrub_text("손흥민이 두 골을 넣었다.")[1]["PERSON"] == 0
    with pytest.raises(ValueError, match="person"):
        PiiScrubStep(person="bert")
    src = tmp_path / "in.jsonl"
    src.write_text(
        json.dumps({"text": "손흥민이 두 골을 넣었다."}, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    out = tmp_path / "out.jsonl"
    counts = detect_file(PiiFileConfig(input=src, output=out, person="mecab"))
    assert counts["types"] == {"PERSON": 1}
    assert json.loads(out.read_text(encoding="utf-8"))["pii"][0]["end"] == 3
