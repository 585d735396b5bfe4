"""The datatrove step: rewrites doc.text, counts per type in metadata and stats, pickles, runs in executors."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datatrove.data import Document
from datatrove.executor.base import ExecutorJSONEncoder
from datatrove.executor.local import LocalPipelineExecutor
from datatrove.pipeline.readers import ParquetReader
from datatrove.pipeline.writers import ParquetWriter

from kplm.pii.detect import PII_TYPES
from kplm.pii.step import PiiScrubStep

DOCS = [
    ("d1", "예매 문의는 010-1234-5678 또는 02-2345-6789로 주세요. 메일 ticket@example.com"),
    ("d2", "주민번호 900101-1234568 를 적으라니 황당하네요"),
    ("d3", "2024.03.15 개봉, 평점 9.5점. 가격 12,900원인데 볼만함"),
    ("d4", "카드 4111-1111-1111-1111 로 결제했어요"),
]


def nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if v}


def run_step(step: PiiScrubStep) -> list[Document]:
    docs = [Document(text=t, id=i) for i, t in DOCS]
    return list(step.run(iter(docs)))


def test_tag_step_rewrites_text_counts_and_stats() -> None:
    step = PiiScrubStep(policy="tag")
    out = run_step(step)
    assert out[0].text == "예매 문의는 [PHONE] 또는 [PHONE]로 주세요. 메일 [EMAIL]"
    # one key per searched type, zeros included: a stable schema for Parquet writers
    assert list(out[0].metadata["pii"]) == list(PII_TYPES)
    assert nonzero(out[0].metadata["pii"]) == {"EMAIL": 1, "PHONE": 2}
    assert out[1].text == "주민번호 [RRN] 를 적으라니 황당하네요"
    assert out[2].text == DOCS[2][1] and nonzero(out[2].metadata["pii"]) == {}
    assert nonzero(out[3].metadata["pii"]) == {"CARD": 1}
    assert step.stats["docs_with_pii"].total == 3
    assert step.stats["pii_PHONE"].total == 2
    assert step.stats["pii_EMAIL"].total == 1
    assert step.stats["pii_RRN"].total == 1
    assert step.stats["pii_CARD"].total == 1
    # metadata holds counts only, never values
    assert "010" not in json.dumps([d.metadata for d in out])


def test_step_types_min_score_and_mask() -> None:
    out = run_step(PiiScrubStep(policy="mask", types=["PHONE"]))
    assert out[0].text == "예매 문의는 ***-****-**** 또는 **-****-****로 주세요. 메일 ticket@example.com"
    assert out[1].text == DOCS[1][1]
    assert out[1].metadata["pii"] == {"PHONE": 0}
    assert run_step(PiiScrubStep(min_score=1.0))[0].text == DOCS[0][1]
    with pytest.raises(ValueError, match="policy"):
        PiiScrubStep(policy="delete")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown PII type"):
        PiiScrubStep(types=["PHONE_NUMBER"])


def test_step_pickles_and_keeps_surrogates_consistent_without_leaking_the_secret() -> None:
    step = PiiScrubStep(policy="surrogate", surrogate_secret="hidden-secret-123")
    clone = pickle.loads(pickle.dumps(step))
    a, b = run_step(step), run_step(clone)
    assert [d.text for d in a] == [d.text for d in b]
    assert "010-1234-5678" not in a[0].text and a[0].text.startswith("예매 문의는 010-")
    # datatrove writes each step's attributes to executor.json: the secret must not appear there.
    dumped = json.dumps({k: v for k, v in step.__dict__.items() if k != "stats"}, cls=ExecutorJSONEncoder)
    assert "hidden-secret-123" not in dumped


def test_step_in_a_multiprocess_datatrove_pipeline(tmp_path: Path) -> None:
    """Two tasks on two worker processes (forkserver: the pipeline is pickled into each worker)."""
    src = tmp_path / "in"
    src.mkdir()
    for part in range(2):
        table = pa.table({"id": [f"{part}-{i}" for i, _ in DOCS], "text": [t for _, t in DOCS]})
        pq.write_table(table, src / f"part{part}.parquet")
    executor = LocalPipelineExecutor(
        pipeline=[ParquetReader(str(src)), PiiScrubStep(policy="tag"), ParquetWriter(str(tmp_path / "out"))],
        tasks=2,
        workers=2,
        logging_dir=str(tmp_path / "logs"),
    )
    stats = executor.run()
    rows = []
    for path in sorted((tmp_path / "out").glob("*.parquet")):
        rows += pq.read_table(path).to_pylist()
    assert len(rows) == 8
    assert sum(r["text"].count("[PHONE]") for r in rows) == 4
    assert all("010-1234-5678" not in r["text"] for r in rows)
    assert sorted(r["metadata"]["pii"]["RRN"] for r in rows) == [0] * 6 + [1, 1]
    step_stats = next(s for s in stats.stats if s.name == str(PiiScrubStep()))
    assert step_stats["docs_with_pii"].total == 6
    assert step_stats["pii_PHONE"].total == 4
