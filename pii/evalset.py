"""The labelled PII evaluation set: deterministic generator of ``pii/eval_data/*.jsonl``.

Every sentence and every value here is written for kplm: values are random but well-formed fakes (valid
birth dates and check digits, Luhn-valid cards, public-range IPs, made-up names and roads), drawn from a
fixed seed, so ``python -m kplm.pii.evalset`` rewrites byte-identical files.

- ``positives.jsonl``: ``{"id", "text", "spans": [{"start", "end", "type"}]}``: Korean sentences with one
  or two embedded PII values of every type and format of the issue (PHONE with -, ., space, none,
  parentheses, ``032)``, +82, 070/050/15xx; EMAIL followed by a particle; …).
- ``negatives.jsonl``: the same shape with ``"spans": []``: look-alikes that are not PII (dates, prices,
  order numbers, versions, ISBNs, scores, coordinates, postcodes, case numbers, times, common nouns
  before 님/씨).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

from kplm.pii.validators import brn_check_digit, frn_check_digit, luhn_check_digit, rrn_check_digit

EVAL_DIR = Path(__file__).resolve().parent / "eval_data"
POSITIVES = EVAL_DIR / "positives.jsonl"
NEGATIVES = EVAL_DIR / "negatives.jsonl"
SEED = 20261129
PER_TEMPLATE = 6  # values drawn per (type, template)

Gen = Callable[[random.Random], str]


def _d(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(n))


def _birth(rng: random.Random) -> tuple[str, int]:
    year = rng.randrange(1950, 2015)
    month, day = rng.randrange(1, 13), rng.randrange(1, 29)
    return f"{year % 100:02d}{month:02d}{day:02d}", year


def _rrn(rng: random.Random, foreign: bool = False) -> str:
    birth, year = _birth(rng)
    g = (5 if foreign else 1) + (2 if year >= 2000 else 0) + rng.randrange(2)
    body = birth + str(g) + _d(rng, 5)
    check = frn_check_digit(body) if foreign else rrn_check_digit(body)
    if not foreign and rng.random() < 0.3:
        check = int(_d(rng, 1))  # issued since Oct 2020: random last digit
    sep = rng.choice(["-", "-", " - ", ""])
    return f"{body[:6]}{sep}{body[6:]}{check}"


def _phone(rng: random.Random) -> str:
    kind = rng.randrange(10)
    sub4 = str(rng.randrange(2, 10)) + _d(rng, 3)
    last = _d(rng, 4)
    if kind <= 3:
        sep = ["-", ".", " ", ""][kind]
        return f"010{sep}{sub4}{sep}{last}"
    if kind == 4:
        return f"+82 10-{sub4}-{last}" if rng.random() < 0.5 else f"+82-10-{sub4}-{last}"
    if kind == 5:
        area = rng.choice(["02", "031", "032", "051", "053", "062", "064"])
        return rng.choice([f"({area}) {sub4}-{last}", f"{area}) {sub4}-{last}", f"{area}-{sub4[:3]}-{last}"])
    if kind == 6:
        return f"070-{sub4}-{last}"
    if kind == 7:
        return f"0505-{sub4[:3]}-{last}" if rng.random() < 0.5 else f"0504-{sub4}-{last}"
    if kind == 8:
        return f"{rng.choice(['1588', '1577', '1544', '1661', '1600'])}-{last}"
    return f"02.{sub4}.{last}"


def _email(rng: random.Random) -> str:
    user = rng.choice(["minji", "hoon", "sora", "jkim", "park.ys", "dev_team", "kang77", "yuna.lee"])
    return f"{user}{rng.randrange(1, 999)}@{rng.choice(['mailbox.kr', 'hanmail.net', 'corp-mail.co.kr', 'inbox.com'])}"


def _card(rng: random.Random) -> str:
    prefix = rng.choice(["4", "51", "53", "9410", "3560"])
    body = prefix + _d(rng, 15 - len(prefix))
    digits = body + str(luhn_check_digit(body))
    sep = rng.choice(["-", " ", "-"])
    return sep.join(digits[i : i + 4] for i in range(0, 16, 4))


def _account(rng: random.Random) -> str:
    shape = rng.choice([(3, 3, 6), (4, 3, 6), (4, 2, 7), (3, 4, 4, 2), (6, 2, 6), (3, 6, 5)])
    return "-".join(_d(rng, n) for n in shape)


def _brn(rng: random.Random) -> str:
    body = f"{rng.randrange(101, 1000)}{rng.randrange(1, 100):02d}{_d(rng, 4)}"
    d = body + str(brn_check_digit(body))
    return f"{d[:3]}-{d[3:5]}-{d[5:]}"


def _passport(rng: random.Random) -> str:
    letter = rng.choice("MMMSR")
    if rng.random() < 0.5:
        return letter + str(rng.randrange(1, 10)) + _d(rng, 7)
    return f"M{_d(rng, 3)}{rng.choice('ABCDEFGH')}{_d(rng, 4)}"


def _license(rng: random.Random) -> str:
    year = f"{rng.randrange(0, 24):02d}"
    if rng.random() < 0.4:
        return f"{rng.choice(['서울', '경기', '부산', '대구', '제주'])} {year}-{_d(rng, 6)}-{_d(rng, 2)}"
    return f"{rng.randrange(11, 27)}-{year}-{_d(rng, 6)}-{_d(rng, 2)}"


def _ip(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return f"{rng.choice([61, 112, 121, 175, 211, 221])}.{rng.randrange(10, 255)}.{rng.randrange(255)}.{rng.randrange(1, 255)}"
    groups = [f"{rng.randrange(0x2400, 0x2A10):x}"] + [f"{rng.randrange(1, 65536):x}" for _ in range(3)]
    return ":".join(groups) + "::" + f"{rng.randrange(1, 65536):x}"


def _url(rng: random.Random) -> str:
    host = rng.choice(
        ["blog.somesite.kr", "www.myshop-mall.co.kr", "cafe.community.net", "www.portfolio-page.com"]
    )
    scheme = (
        rng.choice(["https://", "http://", ""])
        if host.startswith("www")
        else rng.choice(["https://", "http://"])
    )
    return f"{scheme}{host}/{rng.choice(['user', 'post', 'profile'])}/{rng.randrange(100, 99999)}"


_CITY = [
    "서울특별시 마포구",
    "서울 강서구",
    "부산광역시 해운대구",
    "경기도 성남시 분당구",
    "대전광역시 유성구",
    "경기 고양시 일산동구",
]
_ROAD = ["한빛로", "새솔길", "은하수로", "푸른들로", "매화길", "중앙대로", "달맞이길"]
_DONG = ["가람동", "솔내동", "한울동", "누리동"]


def _address(rng: random.Random) -> str:
    city = rng.choice(_CITY)
    if rng.random() < 0.65:
        num = str(rng.randrange(1, 400)) + (f"-{rng.randrange(1, 30)}" if rng.random() < 0.3 else "")
        tail = f" {rng.randrange(101, 120)}동 {rng.randrange(101, 1505)}호" if rng.random() < 0.3 else ""
        return f"{city} {rng.choice(_ROAD)} {num}{tail}"
    num = f"{rng.randrange(1, 900)}-{rng.randrange(1, 40)}"
    return f"{city} {rng.choice(_DONG)} {num}" + ("번지" if rng.random() < 0.5 else "")


_SURNAMES = "김이박최정강조윤장임한오서신권황안송홍전"
_GIVEN = "민서지현우준도윤하은수영진호성재연아주원희경태"


def _person(rng: random.Random) -> str:
    return rng.choice(_SURNAMES) + "".join(rng.choice(_GIVEN) for _ in range(2))


# (type, value generator, templates); "{}" marks where the value goes.
TEMPLATES: list[tuple[str, Gen, list[str]]] = [
    (
        "RRN",
        _rrn,
        [
            "주민등록번호 {} 본인 확인 부탁드립니다.",
            "신청서에 주민번호({})를 적어 냈어요.",
            "생년월일 및 주민번호: {}",
            "[{}] 주민번호 뒷자리까지 노출됨",
        ],
    ),
    (
        "FRN",
        lambda r: _rrn(r, True),
        [
            "외국인등록번호 {} 로 조회됩니다.",
            "그의 외국인등록번호는 {}이다.",
            "외국인 근로자(등록번호 {})의 신청",
        ],
    ),
    (
        "PHONE",
        _phone,
        [
            "문의는 {}로 연락 주세요.",
            "제 번호 {} 입니다",
            "대표전화 {}, 평일 9시~18시",
            "{}으로 문자 남겨주세요",
            "(연락처: {})",
            "폰번호는{}이에요",
        ],
    ),
    (
        "EMAIL",
        _email,
        ["자세한 내용은 {}으로 보내 주세요.", "이메일: {}", "{}로 이력서를 제출하세요.", "문의(E-mail: {})."],
    ),
    ("CARD", _card, ["결제 카드 {} 승인 완료", "카드번호 {}로 할부 결제했습니다.", "체크카드 {} 분실 신고"]),
    (
        "ACCOUNT",
        _account,
        [
            "입금 계좌는 국민은행 {} 입니다.",
            "신한 {} (예금주 본인)으로 송금 바랍니다.",
            "환불받을 계좌: 농협 {}",
            "월세는 우리은행 계좌 {}로 이체해 주세요.",
        ],
    ),
    (
        "BRN",
        _brn,
        ["사업자등록번호 {} / 대표자 본인", "상호 한빛상사, 사업자번호 {}", "(주)가온, 사업자등록번호:{}"],
    ),
    (
        "PASSPORT",
        _passport,
        ["여권번호 {} 확인했습니다.", "출국 심사 때 여권({})을 보여줬다.", "Passport No. {} 입국 심사"],
    ),
    (
        "DRIVER_LICENSE",
        _license,
        ["운전면허번호 {} 로 본인 인증", "면허증 번호는 {}입니다.", "신분증 대신 운전면허({})를 제시했다."],
    ),
    ("IP", _ip, ["접속 IP {} 에서 로그인 시도가 있었습니다.", "서버 주소 {}로 접속하세요.", "공격 IP는 {}."]),
    ("URL", _url, ["제 블로그 {} 에 후기 올렸어요", "자세한 건 {}를 참고하세요.", "(출처: {})"]),
    (
        "ADDRESS",
        _address,
        ["주소: {}", "{}로 배송 부탁드립니다.", "저는 {}에 살고 있어요.", "택배 주소지 {} 맞나요?"],
    ),
    (
        "PERSON",
        _person,
        [
            "{} 씨가 회의에서 발표했다.",
            "담당자 {} 과장에게 전달했습니다.",
            "{} 기자가 현장을 취재했다.",
            "{}님께 감사드립니다.",
            "{} 교수는 이렇게 말했다.",
        ],
    ),
]

NEGATIVES_TEXT: list[str] = [
    "행사는 2024-03-15부터 2024.04.30까지 열립니다.",
    "가격은 1,250,000원이고 할인가는 980,000원입니다.",
    "주문번호 2023112512345678 배송 준비 중",
    "주문번호: 20240315-0012345 확인 바랍니다.",
    "운송장 번호 6071-2345-6789 조회",
    "버전 1.2.3.4 업데이트 후 오류가 사라졌다.",
    "v2.10.3 릴리스 노트를 확인하세요.",
    "ISBN 978-89-6848-123-4 도서",
    "ISBN 9788968481234 재고 있음",
    "점수는 95.5점, 평균 87.25점이었다.",
    "좌표 37.5665, 126.9780 근처에서 만나요.",
    "위도 35.1796 경도 129.0756",
    "우편번호 06236 으로 보내면 됩니다.",
    "사건번호 2023가합12345 판결",
    "대법원 2019도1234 판결 참고",
    "회의는 10:30:00에 시작합니다.",
    "오후 3시 30분에 보자",
    "1592-1598년 임진왜란",
    "인구는 51,780,579명이다.",
    "제품 모델명 SM-G998N 입니다",
    "모델 S20240315 출시",
    "상품번호 1234567890123 재입고",
    "바코드 8801234567893 스캔",
    "고객님 주문이 완료되었습니다.",
    "선생님 말씀 잘 들어라.",
    "사장님이 오늘 쉬신대요.",
    "하느님께 기도했다.",
    "손님이 많아서 기다렸어요.",
    "학교로 3명이 찾아왔다.",
    "집으로 2시간 걸렸다.",
    "이번 동 3층 회의실",
    "시속 120km로 달렸다.",
    "총 3,000개 중 1,200개 판매",
    "2024년 3월 15일 오전 9시",
    "전화번호 아닌 숫자 12345 678",
    "계좌 개설은 1588번 창구에서",
    "로또 번호 3 12 25 31 38 44",
    "IP 등급 192.168.0.1 내부망",
    "127.0.0.1 은 로컬호스트다",
    "파일 icon@2x.png 을 올려라",
    "비율 16:9 화면",
    "시간 12:34:56 기록",
    "A4 용지 210x297mm",
    "영화 평점 9.5/10",
    "에피소드 1.2.3편 정주행",
    "정말 재밌다 10점 만점에 10점",
    "이 영화 2시간 15분",
    "1234-5678 구간 공사",
    "2,000원 할인 쿠폰",
    "2020.01.01~2020.12.31",
]


def _build_positives() -> list[dict]:
    rng = random.Random(SEED)
    records: list[dict] = []
    for kind, gen, templates in TEMPLATES:
        for t_index, template in enumerate(templates):
            for k in range(PER_TEMPLATE):
                value = gen(rng)
                start = template.index("{}")
                text = template.replace("{}", value, 1)
                records.append(
                    {
                        "id": f"pos-{kind.lower()}-{t_index}-{k}",
                        "text": text,
                        "spans": [{"start": start, "end": start + len(value), "type": kind}],
                    }
                )
    # sentences with two values of different types
    for k in range(30):
        phone, email, name = _phone(rng), _email(rng), _person(rng)
        head = f"{name} 씨 연락처 "
        text = f"{head}{phone}, 메일 {email}"
        spans = [
            {"start": 0, "end": len(name), "type": "PERSON"},
            {"start": len(head), "end": len(head) + len(phone), "type": "PHONE"},
            {"start": len(text) - len(email), "end": len(text), "type": "EMAIL"},
        ]
        records.append({"id": f"pos-mixed-{k}", "text": text, "spans": spans})
    return records


def _build_negatives() -> list[dict]:
    rng = random.Random(SEED + 1)
    texts = list(NEGATIVES_TEXT)
    for _ in range(150):  # generated look-alikes: dates, prices, order numbers, versions, scores
        kind = rng.randrange(6)
        if kind == 0:
            texts.append(
                f"{rng.randrange(1990, 2030)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d} 기준 자료"
            )
        elif kind == 1:
            texts.append(f"정가 {rng.randrange(1, 999):,}{rng.randrange(100, 999)}원에 판매 중")
        elif kind == 2:
            texts.append(f"주문번호 {rng.randrange(2019, 2026)}{_d(rng, 10)} 배송 완료")
        elif kind == 3:
            texts.append(f"버전 {rng.randrange(1, 20)}.{rng.randrange(0, 30)}.{rng.randrange(0, 99)} 설치")
        elif kind == 4:
            texts.append(
                f"우편번호 {_d(rng, 5)}, 좌표 {rng.randrange(33, 39)}.{_d(rng, 4)}, {rng.randrange(124, 130)}.{_d(rng, 4)}"
            )
        else:
            texts.append(
                f"사건번호 {rng.randrange(2000, 2025)}{rng.choice(['가합', '고단', '노'])}{_d(rng, 5)} 선고"
            )
    return [{"id": f"neg-{i}", "text": t, "spans": []} for i, t in enumerate(texts)]


def write_evalset(folder: Path = EVAL_DIR) -> dict[str, int]:
    """(Re)write the labelled set into ``folder``; returns record counts."""
    folder.mkdir(parents=True, exist_ok=True)
    counts = {}
    for name, records in (("positives.jsonl", _build_positives()), ("negatives.jsonl", _build_negatives())):
        with (folder / name).open("w", encoding="utf-8") as out:
            out.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        counts[name] = len(records)
    return counts


if __name__ == "__main__":
    print(json.dumps(write_evalset()))
