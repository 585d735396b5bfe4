"""The cleaning stage's fast paths give exactly what the plain implementations give: the column-buffered shard
writer vs datatrove's ParquetWriter, the printable-text shortcuts of the rules, kplm's exact-dedup steps vs
datatrove's, and duplicate finding split over hash buckets vs one task."""

import gzip
import itertools
import json

import pyarrow.parquet as pq
import pytest
from datatrove.data import Document
from datatrove.pipeline.dedup.exact_dedup import ExactDedupFilter, ExactDedupSignature
from datatrove.pipeline.writers import ParquetWriter

from kplm.corpus import clean as clean_module
from kplm.corpus import filters, normalize
from kplm.corpus.clean import CleanConfig, clean
from kplm.corpus.shard_writer import _row, shard_writer
from kplm.corpus.shards import SCHEMA

TRICKY = [
    "오늘 서울의 낮 기온은 영상 십오 도까지 올라 포근하겠습니다.",
    "  앞뒤 공백이 있는 문장  ",
    "두 칸  띄어 쓴 문장",
    "탭이\t들어간 문장",
    "줄바꿈이\n들어간\r\n문장",
    "전각\u3000공백과\xa0줄바꿈 없는 공백",
    "보이지\u200b 않는\u00ad 문자\ufeff와 \u2028 줄 구분자",
    "제어\x07문자",
    "이모지 😀 와 𝐀 수학 문자",
    "",
]


def test_printable_shortcuts_agree_with_the_regex_rules():
    for text in TRICKY:
        assert normalize.invisible_v1(text) == normalize._INVISIBLE.sub("", text)
        assert filters.visible_chars(text) == sum(map(len, text.split()))
        slow = normalize._SPACES.sub(" ", text.replace("\r\n", "\n").replace("\r", "\n"))
        slow = normalize._BLANK_LINES.sub(
            "\n\n", "\n".join(line.strip() for line in slow.split("\n"))
        ).strip()
        assert normalize.whitespace_v1(text) == slow
        bmp, astral = filters._symbol_patterns()
        assert filters.count_symbols(text) == len(bmp.findall(text)) + len(astral.findall(text))
        assert filters.TextStats(text).digits == len(filters._DIGIT.findall(text))


def test_shard_writer_writes_what_datatrove_writer_writes(tmp_path):
    docs = [
        Document(
            text=text,
            id=f"doc-{i}",
            metadata={
                "source": "뉴스",
                "origin": f"a.jsonl:{i}",
                "label": i % 2,
                "file_path": "x",
                "평점": 4.5,
            },
        )
        for i, text in enumerate(TRICKY * 3)
    ]
    reference = ParquetWriter(
        str(tmp_path / "ref"),
        output_filename="${rank}.parquet",
        adapter=_row,
        schema=SCHEMA,
        batch_size=7,
        max_file_size=-1,
    )
    fast = shard_writer(tmp_path / "fast")
    fast.batch_size = 7  # several batches per file
    for writer in (reference, fast):
        with writer:
            for doc in docs:
                writer.write(doc, rank=3)
    table = pq.read_table(tmp_path / "fast" / "00003.parquet")
    assert table.equals(pq.read_table(tmp_path / "ref" / "00003.parquet"))
    assert table.num_rows == len(docs)
    assert json.loads(table.column("metadata")[0].as_py()) == {"label": 0, "origin": "a.jsonl:0", "평점": 4.5}


@pytest.fixture(scope="module")
def reviews(tmp_path_factory, shared_data):
    """3,000 real NSMC reviews (with real duplicates) in 3 files."""
    folder = tmp_path_factory.mktemp("reviews")
    with gzip.open(shared_data / "nsmc" / "reviews.jsonl.gz", "rt", encoding="utf-8") as f:
        lines = list(itertools.islice(f, 3000))
    for i in range(3):
        (folder / f"r{i}.jsonl").write_text("".join(lines[i::3]), encoding="utf-8")
    return folder


def tables(out):
    return [pq.read_table(path) for path in sorted(out.glob("part-*.parquet"))]


def test_exact_dedup_fast_steps_and_buckets_match_datatrove(reviews, tmp_path, monkeypatch):
    settings = {"input": [str(reviews)], "tasks": 3}
    bucketed = clean(CleanConfig(output=tmp_path / "bucketed", **settings))  # 3 buckets found in parallel
    assert bucketed["dropped_by_rule"]["exact_dedup_v1"] > 0
    one = clean(CleanConfig(output=tmp_path / "one", dedup_buckets=1, **settings))
    monkeypatch.setattr(clean_module, "FastExactDedupSignature", ExactDedupSignature)
    monkeypatch.setattr(clean_module, "FastExactDedupFilter", ExactDedupFilter)
    datatrove = clean(CleanConfig(output=tmp_path / "datatrove", dedup_buckets=2, **settings))
    assert bucketed == one == datatrove
    for a, b, c in zip(
        tables(tmp_path / "bucketed"), tables(tmp_path / "one"), tables(tmp_path / "datatrove"), strict=True
    ):
        assert a.equals(b) and a.equals(c)
    excluded = [
        pq.read_table(tmp_path / name / "excluded" / "exact_dedup_v1") for name in ("one", "datatrove")
    ]
    assert excluded[0].sort_by("id").equals(excluded[1].sort_by("id"))
