"""detect_file / scrub_file on JSON Lines: outputs, counts, gzip, atomicity and every bad-input message."""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import pytest

from kplm.cliargs import add_config_arguments, config_from_args
from kplm.config import build
from kplm.errors import KplmError
from kplm.pii.files import PiiFileConfig, detect_file, rejected_path, scrub_file

RECORDS = [
    {"id": 1, "text": "예약 확인 문자는 010-1234-5678로 보내드립니다.", "src": "sms"},
    {"id": 2, "text": "견적서는 sales@example.co.kr으로 회신 부탁드립니다. 대표번호 02-2345-6789"},
    {"id": 3, "text": "배우들 연기가 좋았고 2024.03.15 재개봉 때 또 볼 거예요. 9점"},
    {"id": 4, "body": "다른 필드에 글이 있는 레코드", "text": "주민번호 900101-1234568 제출"},
]


def write_jsonl(path: Path, lines: list[str | bytes]) -> Path:
    data = b"".join((ln if isinstance(ln, bytes) else ln.encode("utf-8")) + b"\n" for ln in lines)
    if path.name.endswith(".gz"):
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


def dumps(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False)


def read_jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "in.jsonl", [dumps(r) for r in RECORDS] + [""])


def test_detect_file_adds_spans(sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "detected.jsonl"
    counts = detect_file(PiiFileConfig(input=sample, output=out))
    assert counts == {
        "records": 4,
        "records_with_pii": 3,
        "spans": 4,
        "rejected": 0,
        "types": {"EMAIL": 1, "PHONE": 2, "RRN": 1},
    }
    rows = read_jsonl(out)
    assert [r["id"] for r in rows] == [1, 2, 3, 4]
    assert rows[0]["src"] == "sms"
    (span,) = rows[0]["pii"]
    assert set(span) == {"start", "end", "type", "score"}
    assert RECORDS[0]["text"][span["start"] : span["end"]] == "010-1234-5678"
    assert [s["type"] for s in rows[1]["pii"]] == ["EMAIL", "PHONE"]
    assert rows[2]["pii"] == []
    assert not rejected_path(out).exists()


def test_scrub_file_policies_types_and_text_field(sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "scrubbed.jsonl.gz"
    counts = scrub_file(PiiFileConfig(input=sample, output=out))
    assert counts["records_with_pii"] == 3
    rows = read_jsonl(out)
    assert rows[0]["text"] == "예약 확인 문자는 [PHONE]로 보내드립니다."
    assert rows[1]["text"] == "견적서는 [EMAIL]으로 회신 부탁드립니다. 대표번호 [PHONE]"
    assert rows[1]["pii_counts"] == {"EMAIL": 1, "PHONE": 1}
    assert rows[2]["text"] == RECORDS[2]["text"] and rows[2]["pii_counts"] == {}

    masked = tmp_path / "masked.jsonl"
    scrub_file(PiiFileConfig(input=sample, output=masked, policy="mask", types=["RRN"]))
    rows = read_jsonl(masked)
    assert rows[3]["text"] == "주민번호 ******-******* 제출"
    assert rows[0]["text"] == RECORDS[0]["text"]

    fake = tmp_path / "fake.jsonl"
    scrub_file(PiiFileConfig(input=sample, output=fake, policy="surrogate"))
    text = read_jsonl(fake)[0]["text"]
    assert text.startswith("예약 확인 문자는 010-") and "010-1234-5678" not in text

    body = tmp_path / "body.jsonl"
    counts = scrub_file(
        PiiFileConfig(
            input=write_jsonl(tmp_path / "b.jsonl", [dumps(RECORDS[3])]), output=body, text_field="body"
        )
    )
    assert counts["records_with_pii"] == 0
    assert read_jsonl(body)[0]["text"] == RECORDS[3]["text"]  # only the chosen field is touched


def test_gzip_input_detected_by_content(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl.gz", [dumps(r) for r in RECORDS])
    counts = detect_file(PiiFileConfig(input=src, output=tmp_path / "o.jsonl"))
    assert counts["records"] == 4 and counts["types"]["PHONE"] == 2


BAD_LINES = [
    ('{"text": "첫 줄은 정상"}', None),
    ('{"text": "이 줄은 닫히지 않음"', "in.jsonl:2: invalid JSON (Expecting ',' delimiter at column"),
    (b'{"text": "\xed\x95\x9c\xea\xb8"}', "in.jsonl:3: invalid UTF-8 at byte 13"),
    ('{"body": "text 필드 없음"}', "in.jsonl:4: field 'text' missing or not a string"),
    ('{"text": 17}', "in.jsonl:5: field 'text' missing or not a string"),
    ('["목록", "객체 아님"]', "in.jsonl:6: expected a JSON object, got a JSON list"),
]


@pytest.mark.parametrize("bad", range(1, len(BAD_LINES)))
def test_each_bad_line_stops_with_a_one_line_error(tmp_path: Path, bad: int) -> None:
    lines = [BAD_LINES[0][0]] * bad + [BAD_LINES[bad][0]]
    src = write_jsonl(tmp_path / "in.jsonl", lines)
    out = tmp_path / "out.jsonl"
    with pytest.raises(KplmError) as err:
        scrub_file(PiiFileConfig(input=src, output=out))
    message = str(err.value)
    line_no = bad + 1
    expected = BAD_LINES[bad][1].split(":", 2)[2]
    assert message.startswith(f"{src}:{line_no}:{expected}"), message
    assert "\n" not in message
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [src]  # no temporary file left behind


def test_skip_bad_lines_quarantines_them(tmp_path: Path) -> None:
    lines = [ln for ln, _ in BAD_LINES] + ['{"text": "전화 010-9876-5432"}']
    src = write_jsonl(tmp_path / "in.jsonl", lines)
    out = tmp_path / "out.jsonl"
    counts = detect_file(PiiFileConfig(input=src, output=out, skip_bad_lines=True))
    assert (counts["records"], counts["rejected"], counts["types"]) == (2, 5, {"PHONE": 1})
    rejected = read_jsonl(rejected_path(out))
    assert [r["line"] for r in rejected] == [2, 3, 4, 5, 6]
    assert all(r["file"] == str(src) for r in rejected)
    assert rejected[1]["reason"] == "invalid UTF-8 at byte 13"
    assert rejected[2]["raw"] == '{"body": "text 필드 없음"}'
    # A clean rerun removes the stale quarantine file.
    write_jsonl(src, [lines[0]])
    assert detect_file(PiiFileConfig(input=src, output=out, skip_bad_lines=True))["rejected"] == 0
    assert not rejected_path(out).exists()


def test_missing_and_unreadable_inputs(tmp_path: Path) -> None:
    with pytest.raises(KplmError, match=r"^input file not found: .*nope\.jsonl$"):
        detect_file(PiiFileConfig(input=tmp_path / "nope.jsonl", output=tmp_path / "o.jsonl"))
    with pytest.raises(KplmError, match="not a file"):
        detect_file(PiiFileConfig(input=tmp_path, output=tmp_path / "o.jsonl"))
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(gzip.compress(b'{"text": "a"}\n' * 100)[:40])
    with pytest.raises(KplmError, match="corrupt gzip data"):
        detect_file(PiiFileConfig(input=broken, output=tmp_path / "o.jsonl"))
    assert not (tmp_path / "o.jsonl").exists()


def test_config_validation_through_build(tmp_path: Path) -> None:
    data = {"input": str(tmp_path / "a.jsonl"), "output": str(tmp_path / "b.jsonl")}
    cfg = build(PiiFileConfig, data | {"types": ["PHONE", "EMAIL"], "min_score": 0.7})
    assert cfg.input == tmp_path / "a.jsonl" and cfg.types == ["PHONE", "EMAIL"] and cfg.policy == "tag"
    cases = {
        "min_score": (1.5, "min_score: must be between 0 and 1"),
        "policy": ("redact", "policy: must be one of 'tag', 'mask', 'surrogate'"),
        "types": (["PHONE", "ADRESS"], "types: unknown PII type 'ADRESS'"),
        "text_field": ("", "text_field: must not be empty"),
        "output": (str(tmp_path / "a.jsonl"), "output: must differ from input"),
    }
    for key, (value, message) in cases.items():
        with pytest.raises(KplmError, match=message):
            build(PiiFileConfig, data | {key: value}, where="pii")
    assert build(PiiFileConfig, data | {"types": ["ADDRESS", "PERSON"]}, where="pii").types == [
        "ADDRESS",
        "PERSON",
    ]


def test_cli_flags_from_the_config() -> None:
    parser = argparse.ArgumentParser(prog="kplm pii scrub")
    add_config_arguments(parser, PiiFileConfig)
    args = parser.parse_args(
        [
            "--input",
            "a.jsonl",
            "--output",
            "b.jsonl",
            "--types",
            "PHONE",
            "EMAIL",
            "--policy",
            "mask",
            "--min-score",
            "0.6",
            "--skip-bad-lines",
        ]
    )
    cfg = config_from_args(PiiFileConfig, args)
    assert (cfg.policy, cfg.types, cfg.min_score, cfg.skip_bad_lines) == (
        "mask",
        ["PHONE", "EMAIL"],
        0.6,
        True,
    )
    with pytest.raises(KplmError, match="unknown PII type 'PHONES'"):
        config_from_args(
            PiiFileConfig, parser.parse_args(["--input", "a", "--output", "b", "--types", "PHONES"])
        )
