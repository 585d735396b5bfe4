"""The local chain executor: one pool for every pipeline, the main process working too, datatrove's per-rank
markers and stats; its output equals a one-process run byte for byte."""

import json
import os
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kplm.corpus.clean import CleanConfig, clean
from kplm.corpus.executors import ExecutorSettings, run_chain
from kplm.corpus.local_chain import LocalChain
from kplm.errors import KplmError

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


class RecordRank:
    """A pipeline step that notes which process ran which rank in ``folder``; it fails on ranks that have a
    ``fail-<rank>`` file there, and holds the process ``wait_pid`` until another process took a rank."""

    def __init__(self, folder: Path, wait_pid: int = 0):
        self.folder, self.wait_pid = folder, wait_pid

    def __call__(self, data, rank: int = 0, world_size: int = 1):
        with open(self.folder / f"{rank}-{os.getpid()}-{uuid.uuid4().hex}", "x", encoding="utf-8") as f:
            f.write(str(world_size))
        if (self.folder / f"fail-{rank}").exists():
            raise ValueError(f"rank {rank} was told to fail")
        deadline = time.time() + 60
        while os.getpid() == self.wait_pid and time.time() < deadline:
            if any(pid != os.getpid() for _, pid in ranks_run(self.folder)):
                break
            time.sleep(0.05)
        yield from ()


def ranks_run(folder: Path) -> list[tuple[int, int]]:
    names = [p.name.split("-") for p in folder.iterdir() if not p.name.startswith("fail")]
    return sorted((int(rank), int(pid)) for rank, pid, _ in names)


def test_every_rank_runs_once_on_main_and_pool_and_reruns_are_noops(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    with LocalChain(2) as chain:  # the main process waits in its first rank until the pool took one
        chain.run([RecordRank(marks, os.getpid())], tmp_path / "logs" / "1", tasks=6)
        chain.run([RecordRank(marks)], tmp_path / "logs" / "2", tasks=1)  # one rank runs on the main process
    runs = ranks_run(marks)
    assert sorted(rank for rank, _ in runs) == [0, 0, 1, 2, 3, 4, 5]
    assert len({pid for _, pid in runs}) == 2  # both the main process and the pool process took ranks
    assert dict((rank, pid) for rank, pid in runs if rank > 0).keys() == {1, 2, 3, 4, 5}
    stats = json.loads((tmp_path / "logs" / "1" / "stats.json").read_text(encoding="utf-8"))
    assert stats is not None
    assert len(list((tmp_path / "logs" / "1" / "completions").iterdir())) == 6
    with LocalChain(2) as chain:  # every rank has its completion marker: nothing runs again
        chain.run([RecordRank(marks)], tmp_path / "logs" / "1", tasks=6)
    assert len(ranks_run(marks)) == 7


def test_a_failing_rank_names_its_logs_and_the_rest_resume(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    (marks / "fail-3").touch()
    stages = [("1_record", [RecordRank(marks)], 5)]
    with pytest.raises(
        KplmError, match=r"corpus cleaning failed \(ValueError: rank 3 was told to fail\); see "
    ):
        run_chain(stages, tmp_path / "logs", ExecutorSettings(workers=2))
    done = {p.name for p in (tmp_path / "logs" / "1_record" / "completions").iterdir()}
    assert "00003" not in done
    (marks / "fail-3").unlink()
    for p in marks.iterdir():
        p.unlink()
    run_chain(stages, tmp_path / "logs", ExecutorSettings(workers=2))
    assert sorted(rank for rank, _ in ranks_run(marks)) == sorted(set(range(5)) - {int(n) for n in done})


def test_two_processes_give_the_one_process_output_byte_for_byte(tmp_path):
    source = SHARED / "nsmc" / "reviews.jsonl.gz"
    import gzip
    import itertools

    with gzip.open(source, "rt", encoding="utf-8") as f:
        lines = list(itertools.islice(f, 4000))
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(4):
        (folder / f"{i}.jsonl").write_text("".join(lines[i * 1000 : (i + 1) * 1000]), encoding="utf-8")
    settings = {"input": [str(folder)], "tasks": 4, "sentence_dedup": True, "sentence_dedup_min_chars": 8}
    one = clean(CleanConfig(output=tmp_path / "one", workers=1, **settings))
    two = clean(CleanConfig(output=tmp_path / "two", workers=2, **settings))
    assert one == two
    assert one["input"] == 4000 == one["kept"] + one["dropped"] + one["quarantined"]
    for rank in range(4):
        name = f"part-{rank:05d}.parquet"
        assert pq.read_table(tmp_path / "two" / name).equals(pq.read_table(tmp_path / "one" / name))
