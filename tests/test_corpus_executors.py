"""The cleaning stage on Slurm (fake ``sbatch``/``scontrol`` that run the submitted job arrays on this machine) and
on Ray (a real local Ray instance), against the local executor's output; sentence-level dedup on literal Korean."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kplm.corpus.clean import CleanConfig, clean
from kplm.corpus.executors import ExecutorSettings, concurrency, slurm_executors
from kplm.corpus.sentence_dedup import remove_sentences
from kplm.corpus.shards import iter_documents
from kplm.errors import KplmError

DOCS = {
    "a.jsonl": [
        "오늘 서울의 낮 기온은 영상 십오 도까지 올라 포근하겠습니다. 주말에는 전국에 비가 내리겠습니다.",
        "주말에는 전국에비가 내리겠습니다. 감사합니다. 다음 주에는 기온이 크게 떨어지겠습니다.",
        "오늘 서울의 낮 기온은 영상 십오 도까지 올라 포근하겠습니다. 주말에는 전국에 비가 내리겠습니다.",
    ],
    "b.jsonl": [
        "다음 주에는 기온이 크게 떨어지겠습니다.",
        "감사합니다. 새해 복 많이 받으시고 가족 모두 건강하세요.",
        "정부는 올해 하반기 경제정책 방향을 발표하고 내수 회복을 위한 지원책을 내놓았다.",
    ],
    "c.jsonl": [
        "감사합니다. 새해 복 많이 받으시고 가족 모두 건강하세요. 올해도 잘 부탁드립니다 여러분.",
        "ㅋㅋ",
        "전문가들은 소비 심리가 살아나려면 물가 안정이 먼저라고 지적했다.",
    ],
}


@pytest.fixture
def korean_inputs(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for name, texts in DOCS.items():
        lines = [
            json.dumps({"id": f"{name[0]}{i}", "text": t}, ensure_ascii=False) for i, t in enumerate(texts)
        ]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def texts_by_id(out):
    return {d["id"]: d["text"] for d in iter_documents(out)}


def test_sentence_dedup_keeps_first_occurrence_in_input_order(korean_inputs, tmp_path):
    counts = {}
    for tasks in (1, 2):
        counts[tasks] = clean(
            CleanConfig(
                input=[str(korean_inputs)],
                output=tmp_path / f"out{tasks}",
                sentence_dedup=True,
                sentence_dedup_min_chars=10,
                tasks=tasks,
                workers=2,
            )
        )
    kept = texts_by_id(tmp_path / "out1")
    assert kept == {
        "a0": DOCS["a.jsonl"][0],
        # the spacing variant of a0's second sentence goes; the short common 감사합니다. stays
        "a1": "감사합니다. 다음 주에는 기온이 크게 떨어지겠습니다.",
        "b1": DOCS["b.jsonl"][1],
        "b2": DOCS["b.jsonl"][2],
        # file c comes after b: its copy of b1's sentence goes, although with 2 tasks c is read by rank 0
        "c0": "감사합니다. 올해도 잘 부탁드립니다 여러분.",
        "c2": DOCS["c.jsonl"][2],
    }
    # 2 shards (rank 0 reads a and c, rank 1 reads b) give exactly the 1-shard result
    assert texts_by_id(tmp_path / "out2") == kept
    assert counts[1] == counts[2]
    c = counts[1]
    assert c["dropped_by_rule"] == {"exact_dedup_v1": 1, "min_chars_v1": 1, "sentence_dedup_v1": 1}
    assert c["sentence_dedup"] == {"sentences_removed": 3, "documents_changed": 3, "documents_emptied": 1}
    assert c["input"] == c["kept"] + c["dropped"] + c["quarantined"] == 9
    emptied = list(iter_documents(tmp_path / "out1" / "excluded" / "sentence_dedup_v1"))
    assert [d["id"] for d in emptied] == ["b0"]
    assert json.loads(emptied[0]["metadata"])["filter_reason"] == "sentence_dedup_v1"
    assert "3 repeated sentences removed" in (tmp_path / "out1" / "clean_report.md").read_text(
        encoding="utf-8"
    )
    # the minimum length protects short sentences: with the default 20 characters nothing above is removed
    default = clean(CleanConfig(input=[str(korean_inputs)], output=tmp_path / "d", sentence_dedup=True))
    assert default["sentence_dedup"]["sentences_removed"] == 0


def test_remove_sentences_keeps_lines():
    text = "첫 문장입니다. 둘째 문장입니다.\n\n셋째 문장입니다! 넷째 문장입니다?"
    assert remove_sentences(text, {1, 2}) == ("첫 문장입니다.\n\n넷째 문장입니다?", 2)
    assert remove_sentences(text, {0, 1, 2, 3}) == ("", 4)


def test_executor_settings_are_validated(tmp_path):
    with pytest.raises(ValueError, match="slurm_partition: required"):
        ExecutorSettings(executor="slurm")
    with pytest.raises(ValueError, match="slurm_time"):
        ExecutorSettings(slurm_time="two hours")
    with pytest.raises(ValueError, match="slurm_sbatch_args"):
        ExecutorSettings(slurm_sbatch_args=["account nlp"])
    with pytest.raises(ValueError, match="ray_cpus_per_task"):
        CleanConfig(input=["x"], output=tmp_path, ray_cpus_per_task=0)
    with pytest.raises(ValueError, match="dedup_buckets"):
        CleanConfig(input=["x"], output=tmp_path, dedup_buckets=-1)
    with pytest.raises(ValueError, match="workers"):
        CleanConfig(input=["x"], output=tmp_path, workers=-1)
    # workers 0 (the default): one local process, no limit on a cluster
    stages = [("1_write", [], 3)]
    assert concurrency(ExecutorSettings(), 3) == 1 and concurrency(ExecutorSettings(executor="ray"), 3) == 3
    unlimited = slurm_executors(stages, tmp_path, ExecutorSettings(executor="slurm", slurm_partition="cpu"))
    limited = slurm_executors(
        stages, tmp_path, ExecutorSettings(executor="slurm", slurm_partition="cpu", workers=2)
    )
    assert (
        unlimited[0].get_sbatch_args(3)["array"] == "0-2"
        and limited[0].get_sbatch_args(3)["array"] == "0-2%2"
    )


FAKE_SBATCH = r"""#!/usr/bin/env bash
# Fake sbatch: records its arguments and the job script, then (unless FAKE_SLURM_HOLD is set: the job stays
# "queued") runs every array task of the job on this machine.
set -e
dir="$FAKE_SLURM_DIR"
n=$(( $(cat "$dir/counter" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$dir/counter"
cp "${@: -1}" "$dir/job_$n.sh"
printf '%s\n' "${@:1:$#-1}" > "$dir/job_$n.args"
[ -n "$FAKE_SLURM_HOLD" ] || fake_slurm_run "$n"
echo "Submitted batch job $n"
"""
FAKE_SLURM_RUN = r"""#!/usr/bin/env bash
# Runs the array tasks of recorded job $1 one after the other, with the environment Slurm gives them.
dir="$FAKE_SLURM_DIR"
script="$dir/job_$1.sh"
range=$(sed -n 's/^#SBATCH --array=\([0-9]*\)-\([0-9]*\).*/\1 \2/p' "$script")
read -r first last <<< "${range:-0 0}"
for i in $(seq "$first" "$last"); do
  SLURM_ARRAY_TASK_ID=$i SLURM_ARRAY_JOB_ID=$1 SLURM_JOB_ID=$1 SLURM_NODELIST=localhost \
    bash "$script" >> "$dir/job_$1_$i.out" 2>&1 || echo "job $1 task $i exit $?" >> "$dir/failed"
done
"""
FAKE_SCONTROL = """#!/usr/bin/env bash
[ "$1 $2" = "show hostnames" ] && echo "$3"
"""
# Fake squeue: lists the jobs named in $FAKE_SLURM_DIR/queued (none by default: every job is over).
FAKE_SQUEUE = """#!/usr/bin/env bash
echo "$@" >> "$FAKE_SLURM_DIR/squeue.args"
cat "$FAKE_SLURM_DIR/queued" 2>/dev/null
exit 0
"""


def fake_slurm(tmp_path, monkeypatch):
    bin_dir, jobs = tmp_path / "bin", tmp_path / "jobs"
    bin_dir.mkdir()
    jobs.mkdir()
    for name, body in (
        ("sbatch", FAKE_SBATCH),
        ("fake_slurm_run", FAKE_SLURM_RUN),
        ("scontrol", FAKE_SCONTROL),
        ("squeue", FAKE_SQUEUE),
    ):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(stat.S_IRWXU)
    path = f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("FAKE_SLURM_DIR", str(jobs))
    return jobs


def test_slurm_submits_a_dependent_chain_that_gives_the_local_output(korean_inputs, tmp_path, monkeypatch):
    settings = {"input": [str(korean_inputs)], "tasks": 2}
    local = clean(CleanConfig(output=tmp_path / "local", **settings))
    jobs = fake_slurm(tmp_path, monkeypatch)
    config = CleanConfig(
        output=tmp_path / "slurm",
        executor="slurm",
        workers=2,
        slurm_partition="cpu",
        slurm_time="01:00:00",
        slurm_cpus_per_task=2,
        slurm_mem_per_cpu_gb=3,
        slurm_job_name="ko-clean",
        slurm_sbatch_args=["account=nlp", "exclusive"],
        **settings,
    )
    monkeypatch.setenv("FAKE_SLURM_HOLD", "1")  # submitted jobs wait in the "queue"
    submitted = clean(config)
    assert submitted["status"] == "submitted"
    names = list(submitted["jobs"])
    assert names == ["1_exact_signatures", "2_exact_find", "3_write", "9_report"]
    # every pipeline is a job array, followed by datatrove's merge-stats job; each array waits for the one before
    scripts = {}
    for n in range(1, 2 * len(names) + 1):
        script = (jobs / f"job_{n}.sh").read_text()
        args = (jobs / f"job_{n}.args").read_text().split()
        if "launch_pickled_pipeline" in script:
            scripts[n] = (script, args)
    assert sorted(scripts) == [1, 3, 5, 7]
    for i, (n, (script, args)) in enumerate(sorted(scripts.items())):
        name = names[i]
        assert f"#SBATCH --job-name=ko-clean-{name}" in script
        assert "#SBATCH --partition=cpu" in script and "#SBATCH --time=01:00:00" in script
        assert "#SBATCH --cpus-per-task=2" in script and "#SBATCH --mem-per-cpu=3G" in script
        assert "#SBATCH --account=nlp" in script and "#SBATCH --exclusive" in script
        tasks = 1 if name == "9_report" else 2
        assert f"#SBATCH --array=0-{tasks - 1}%{min(2, tasks)}" in script
        assert f"source {Path(sys.prefix) / 'bin' / 'activate'}" in script
        dependency = [] if i == 0 else [f"--dependency=afterok:{n - 2}"]
        assert args == ["--export=ALL,RUN_OFFSET=0", *dependency]
    # a rerun while Slurm still lists a job of the chain submits nothing
    (jobs / "queued").write_text("1_0\n1_1\n")
    running = clean(config)
    assert running["status"] == "running" and running["active"] == ["1_0", "1_1"]
    assert (jobs / "counter").read_text().strip() == "8"
    assert (jobs / "squeue.args").read_text().split() == ["--noheader", "--format=%i", "--jobs=1,3,5,7"]
    # Slurm runs the jobs in dependency order
    (jobs / "queued").unlink()
    for n in range(1, 9):
        subprocess.run(["fake_slurm_run", str(n)], check=True)
    assert not (jobs / "failed").exists(), (jobs / "failed").read_text()
    # the last job wrote the report and the record: the same command now returns the counts
    assert clean(config) == local
    for rank in range(2):
        name = f"part-{rank:05d}.parquet"
        assert pq.read_table(tmp_path / "slurm" / name).equals(pq.read_table(tmp_path / "local" / name))


def test_slurm_without_sbatch_is_a_clear_error(korean_inputs, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    config = CleanConfig(
        input=[str(korean_inputs)], output=tmp_path / "o", executor="slurm", slurm_partition="cpu"
    )
    with pytest.raises(KplmError, match="'sbatch' not found"):
        clean(config)


def test_ray_runs_the_chain_to_the_local_output(korean_inputs, tmp_path):
    pytest.importorskip("ray", reason="ray is not installed (pip install ray)")
    settings = {
        "input": [str(korean_inputs)],
        "tasks": 2,
        "sentence_dedup": True,
        "sentence_dedup_min_chars": 10,
    }
    local = clean(CleanConfig(output=tmp_path / "local", **settings))
    on_ray = clean(
        CleanConfig(output=tmp_path / "ray", executor="ray", workers=2, ray_mem_per_cpu_gb=0.25, **settings)
    )
    assert on_ray == local
    assert texts_by_id(tmp_path / "ray") == texts_by_id(tmp_path / "local")
    assert (tmp_path / "ray" / "kplm_record.json").exists()
