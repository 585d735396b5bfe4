"""Corpus cleaning on real Korean text: rules, quarantine, exact dedup, reconciliation, sharding, resume."""

import gzip
import hashlib
import itertools
import json
import os
import unicodedata
from collections import Counter

import pyarrow.parquet as pq
import pytest

from kplm.corpus.clean import CleanConfig, clean
from kplm.corpus.normalize import normalize
from kplm.corpus.shards import iter_documents
from kplm.errors import KplmError

GOOD = "오늘 서울의 낮 기온은 영상 십오 도까지 올라 포근하겠습니다."


def write_jsonl(path, records, raw_lines=()):
    with open(path, "wb") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")
        for line in raw_lines:
            f.write(line + b"\n")
    return path


def excluded_ids(out, rule):
    return sorted(d["id"] for d in iter_documents(out / "excluded" / rule))


def test_each_rule_drops_with_its_reason(tmp_path):
    records = [
        {"id": "good", "text": GOOD},
        {"id": "short", "text": "ㅇㅇ 굿"},
        {"id": "english", "text": "This movie was absolutely fantastic, highly recommended!"},
        {"id": "symbols", "text": "정말 최고의 영화였어요 진짜로 ★★★★★ ♥♥♥ !!!"},
        {"id": "lines", "text": "\n".join(["광고 문의는 쪽지로 주세요"] * 4 + ["공지사항을 꼭 읽어 주세요"])},
        {"id": "long", "text": "가나다라마바사 " * 40},
        {"id": "dup", "text": GOOD.replace(" ", "  ")},
    ]
    src = write_jsonl(tmp_path / "in.jsonl", records)
    out = tmp_path / "out"
    counts = clean(CleanConfig(input=[str(src)], output=out, max_chars=200))
    assert [d["id"] for d in iter_documents(out)] == ["good"]
    assert excluded_ids(out, "min_chars_v1") == ["short"]
    assert excluded_ids(out, "hangul_ratio_v1") == ["english"]
    assert excluded_ids(out, "symbol_ratio_v1") == ["symbols"]
    assert excluded_ids(out, "repeated_lines_v1") == ["lines"]
    assert excluded_ids(out, "max_chars_v1") == ["long"]
    assert excluded_ids(out, "exact_dedup_v1") == ["dup"]
    dropped = json.loads(next(iter_documents(out / "excluded" / "hangul_ratio_v1"))["metadata"])
    assert dropped["filter_reason"] == "hangul_ratio_v1"
    assert counts["input"] == 7 and counts["kept"] == 1 and counts["dropped"] == 6


def test_normalisation_rules():
    nfd = unicodedata.normalize("NFD", "한국어 문장")
    assert normalize(nfd) == "한국어 문장"
    assert normalize("진짜 웃겨ㅋㅋㅋㅋㅋㅋㅋㅋ!!!!!!") == "진짜 웃겨ㅋㅋㅋ!!!"
    assert normalize("가격은 1000000원") == "가격은 1000000원"
    assert normalize("첫 줄<br>둘째\u200b 줄&nbsp;&amp; 끝") == "첫 줄\n둘째 줄 & 끝"
    assert normalize("공지&lt;br&gt;내용<!-- end --> <p class='x'>본문</p>") == "공지\n내용 본문"
    assert normalize("  공백이   많은\t\t문장  ") == "공백이 많은 문장"


def test_bad_lines_are_quarantined_with_file_and_line(tmp_path):
    src = write_jsonl(
        tmp_path / "in.jsonl",
        [{"text": GOOD}],
        raw_lines=[b'{"text": "\xed\x95\x9c\xff\xfe"}', b"{not json", b'{"body": "no text"}', b"[1, 2]"],
    )
    out = tmp_path / "out"
    counts = clean(CleanConfig(input=[str(src)], output=out))
    assert counts["quarantined"] == 4 and counts["kept"] == 1
    entries = [json.loads(line) for line in (out / "quarantine" / "00000.jsonl").read_text().splitlines()]
    assert [(e["origin"].rsplit(":", 1)[1], e["reason_code"]) for e in entries] == [
        ("2", "invalid_utf8"),
        ("3", "invalid_json"),
        ("4", "bad_text_field"),
        ("5", "not_an_object"),
    ]
    assert "invalid UTF-8 at byte 13" in entries[0]["reason"]


def test_missing_input_and_bad_values_are_clear_errors(tmp_path):
    with pytest.raises(KplmError, match="input not found: .*nope.jsonl"):
        clean(CleanConfig(input=[str(tmp_path / "nope.jsonl")], output=tmp_path / "o"))
    (tmp_path / "data.csv").write_text("a,b\n")
    with pytest.raises(KplmError, match="unsupported input format"):
        clean(CleanConfig(input=[str(tmp_path / "data.csv")], output=tmp_path / "o"))
    with pytest.raises(ValueError, match="min_hangul_ratio"):
        CleanConfig(input=["x"], output=tmp_path, min_hangul_ratio=1.5)


@pytest.fixture(scope="module")
def nsmc_files(tmp_path_factory, shared_data):
    """6,000 real NSMC reviews split over 3 files (gzip, plain jsonl, txt) with real duplicates."""
    folder = tmp_path_factory.mktemp("nsmc")
    with gzip.open(shared_data / "nsmc" / "reviews.jsonl.gz", "rt", encoding="utf-8") as f:
        lines = list(itertools.islice(f, 6000))
    with gzip.open(folder / "a.jsonl.gz", "wt", encoding="utf-8") as f:
        f.writelines(lines[:2000])
    (folder / "b.jsonl").write_text("".join(lines[2000:4000]), encoding="utf-8")
    texts = [json.loads(line)["text"].replace("\n", " ") for line in lines[4000:]]
    (folder / "c.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    return folder


def test_real_reviews_reconcile_and_shards_agree(nsmc_files, tmp_path):
    one = clean(CleanConfig(input=[str(nsmc_files)], output=tmp_path / "one"))
    two = clean(CleanConfig(input=[str(nsmc_files)], output=tmp_path / "two", tasks=3, workers=2))
    for counts in (one, two):
        assert counts["input"] == 6000
        assert counts["input"] == counts["kept"] + counts["dropped"] + counts["quarantined"]
        assert counts["dropped_by_rule"]["exact_dedup_v1"] > 0
    texts_one = [d["text"] for d in iter_documents(tmp_path / "one")]
    texts_two = [d["text"] for d in iter_documents(tmp_path / "two")]
    # duplicates differing only in spacing/case keep one representative, which one depends on the sharding
    keys_one = sorted("".join(t.casefold().split()) for t in texts_one)
    keys_two = sorted("".join(t.casefold().split()) for t in texts_two)
    assert keys_one == keys_two
    assert len(set(keys_one)) == len(keys_one)
    assert all(unicodedata.is_normalized("NFC", t) for t in texts_one)
    assert len(list((tmp_path / "two").glob("part-*.parquet"))) == 3
    # the per-rank kept statistics agree with the written documents, for 1 and 3 shards
    for counts, folder in ((one, tmp_path / "one"), (two, tmp_path / "two")):
        docs = list(iter_documents(folder))
        histogram = counts["kept_length_histogram"]
        assert sum(histogram.values()) == counts["kept"] == len(docs)
        assert histogram["20-49"] == sum(20 <= len(d["text"]) < 50 for d in docs)
        assert histogram["0-19"] == sum(len(d["text"]) < 20 for d in docs)
        assert counts["kept_by_source"] == dict(sorted(Counter(d["source"] for d in docs).items()))
    assert set(one["kept_by_source"]) == {"a", "b", "c"}


def test_rerun_is_a_noop_and_config_change_redoes(nsmc_files, tmp_path):
    out = tmp_path / "out"
    config = CleanConfig(input=[str(nsmc_files / "b.jsonl")], output=out)
    first = clean(config)
    part = out / "part-00000.parquet"
    stamp = part.stat().st_mtime_ns
    assert clean(config) == first
    assert part.stat().st_mtime_ns == stamp
    # a re-copied or remounted input (new modification time, same bytes) is the same input: still a no-op,
    # and the record keeps the inputs' digests
    source = nsmc_files / "b.jsonl"
    os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 10**10))
    assert clean(config) == first
    assert part.stat().st_mtime_ns == stamp
    digests = json.loads((out / "kplm_record.json").read_text(encoding="utf-8"))["inputs"]
    assert digests[str(source)][2] == hashlib.sha256(source.read_bytes()).hexdigest()
    stricter = clean(CleanConfig(input=[str(nsmc_files / "b.jsonl")], output=out, min_chars=30))
    assert stricter["kept"] < first["kept"]
    assert pq.read_table(part).num_rows == stricter["kept"]


@pytest.mark.parametrize(
    "dedups",
    [{}, {"near_dedup": True}, {"sentence_dedup": True, "sentence_dedup_min_chars": 8}],
    ids=["exact", "exact+minhash", "exact+sentences"],
)
def test_killed_run_resumes_to_identical_output(nsmc_files, tmp_path, monkeypatch, dedups):
    """A run that dies in its second shard, rerun, gives exactly the output of an uninterrupted run."""
    from kplm.corpus.readers import SourceReader

    settings = {"input": [str(nsmc_files)], "tasks": 3, **dedups}
    reference = clean(CleanConfig(output=tmp_path / "ref", **settings))
    config = CleanConfig(output=tmp_path / "out", **settings)
    real_read = SourceReader._read_file

    def dies_on_second_file(self, path):
        for i, item in enumerate(real_read(self, path)):
            if path.endswith("b.jsonl") and i == 500:
                raise OSError("simulated crash")
            yield item

    monkeypatch.setattr(SourceReader, "_read_file", dies_on_second_file)
    with pytest.raises(KplmError, match="simulated crash"):
        clean(config)
    out = tmp_path / "out"
    assert not (out / "kplm_record.json").exists()
    monkeypatch.setattr(SourceReader, "_read_file", real_read)
    assert clean(config) == reference
    for name in ("part-00000.parquet", "part-00001.parquet", "part-00002.parquet"):
        assert pq.read_table(out / name).equals(pq.read_table(tmp_path / "ref" / name))
    assert reference["input"] == 6000
    assert reference["input"] == reference["kept"] + reference["dropped"] + reference["quarantined"]
    if dedups.get("near_dedup"):
        assert reference["dropped_by_rule"]["minhash_dedup_v1"] > 0
    if dedups.get("sentence_dedup"):
        assert reference["sentence_dedup"]["sentences_removed"] > 0
