"""`kplm study`: arms from one YAML, shared stages linked, NSMC held out for sentiment, one report."""

import gzip
import hashlib
import json
from pathlib import Path

import pytest
import yaml

from kplm.cli import main
from kplm.config import build
from kplm.pipeline.study import SentimentSplitConfig, StudyConfig, merge, split_nsmc

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
SAMPLE = ROOT / "corpus" / "sample" / "kplm_sample_ko.jsonl"


def test_merge_is_recursive_and_leaves_the_base_alone():
    base = {"pii": {"policy": "tag", "person": "context"}, "nproc": 1}
    merged = merge(base, {"pii": {"policy": "off"}, "nproc": 2})
    assert merged == {"pii": {"policy": "off", "person": "context"}, "nproc": 2}
    assert base["pii"]["policy"] == "tag"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"arms": {"a": {"random_init_of": "nope"}}}, "arms.a.random_init_of"),
        ({"arms": {"a": {"overrides": {}, "random_init_of": "a"}}}, "arms.a"),
        ({"finetune": {"seed": 3}}, "finetune.seed"),
        ({"compare": [{"arm": "a", "other": "zzz", "task": "korsts", "metric": "pearsonr"}]}, "compare"),
        ({"seeds": []}, "seeds"),
    ],
)
def test_bad_study_configs_name_the_field(change, message):
    data = {"output": "x", "run": {}, "arms": {"a": {"overrides": {}}}, "finetune": {}, **change}
    with pytest.raises(Exception, match=message):
        build(StudyConfig, data, where="study.yaml")


def _nsmc_slice(path: Path, lines: int) -> None:
    with gzip.open(DATA / "nsmc" / "reviews.jsonl.gz", "rt", encoding="utf-8") as f, open(path, "w") as w:
        for _, line in zip(range(lines), f, strict=False):
            w.write(line)
        w.write("{not json\n")  # an unreadable line goes to the corpus stage, which quarantines it


def test_nsmc_split_holds_texts_out_of_pretraining(tmp_path):
    source = tmp_path / "nsmc.jsonl"
    _nsmc_slice(source, 6000)
    config = SentimentSplitConfig(
        source=str(source), holdout_permille=100, train_examples=200, test_examples=100
    )
    counts = split_nsmc(config, tmp_path / "data")
    assert counts["lines"] == 6001 and counts["unreadable"] == 1
    assert counts["pretrain"] + counts["held_out"] == counts["lines"]
    assert 400 < counts["held_out"] < 800  # ~10% of the distinct texts
    pretrain_texts = set()
    for line in (tmp_path / "data" / "nsmc_pretrain.jsonl").read_text(encoding="utf-8").splitlines():
        try:
            pretrain_texts.add(json.loads(line)["text"].strip())
        except json.JSONDecodeError:
            continue
    rows = []
    for name in ("train", "test"):
        path = tmp_path / "data" / "nsmc" / f"sentiment_{name}.jsonl"
        rows += [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 300 and {r["label"] for r in rows} == {0, 1}
    assert not pretrain_texts & {r["text"] for r in rows}
    for r in rows:  # the hash rule put it there
        assert int(hashlib.sha1(r["text"].encode()).hexdigest()[:8], 16) % 1000 < 100
    labels: dict[str, set[int]] = {}  # every labelled rating of a text: 1-4 negative, 9-10 positive
    for line in source.read_text(encoding="utf-8").splitlines()[:6000]:
        record = json.loads(line)
        if record["rating"] <= 4 or record["rating"] >= 9:
            labels.setdefault(record["text"].strip(), set()).add(int(record["rating"] >= 9))
    for r in rows:
        assert labels[r["text"]] == {r["label"]}
    assert split_nsmc(config, tmp_path / "data") == counts  # complete: a rerun only reads the record


def test_tiny_study_end_to_end(tmp_path):
    _nsmc_slice(tmp_path / "nsmc.jsonl", 2500)
    config = {
        "output": str(tmp_path / "study"),
        "nsmc_sentiment": {
            "source": str(tmp_path / "nsmc.jsonl"),
            "holdout_permille": 100,
            "train_examples": 32,
            "test_examples": 16,
        },
        "run": {
            "sources": [str(SAMPLE)],
            "corpus": {"min_chars": 10, "tasks": 1, "workers": 1},
            "pii": {"policy": "tag"},
            "tokenizer": {"mode": "morpheme", "vocab_size": 1500, "num_proc": 1},
            "pack": {"seq_len": 64},
            "pretrain": {
                "model": {"arch": "roberta", "size": "tiny", "hidden": 32, "heads": 2, "ffn": 64},
                "micro_batch_size": 8,
                "max_steps": 6,
                "warmup_steps": 1,
                "lr": 1e-3,
                "precision": "fp32",
                "zero_stage": 0,
                "save_every": 6,
                "log_every": 2,
                "eval_every": 3,
            },
        },
        "arms": {
            "morpheme": {"overrides": {}},
            "random": {"random_init_of": "morpheme"},
            "pii_off": {"overrides": {"pii": {"policy": "off"}}},
        },
        "seeds": [1, 2],
        "finetune": {
            "data_dir": str(DATA),
            "tasks": ["klue-sts", "nsmc"],
            "epochs": 2,
            "select": "last",
            "save_models": False,
            "max_train_examples": 16,
            "max_eval_examples": 16,
            "threads": 1,
        },
        "compare": [
            {"arm": "morpheme", "other": "random", "task": "klue-sts", "metric": "pearsonr", "min_gain": 5}
        ],
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    assert main(["study", str(path)]) == 0
    out = tmp_path / "study"
    summary = json.loads((out / "study.json").read_text(encoding="utf-8"))
    assert list(summary["arms"]) == ["morpheme", "pii_off", "random"]
    # the corpus stage ran once and is linked into the second arm; the PII-free arm has its own tokenizer
    assert (out / "pii_off" / "corpus").is_symlink()
    assert (out / "pii_off" / "corpus").resolve() == (out / "morpheme" / "corpus").resolve()
    assert "shared_with" in summary["arms"]["pii_off"]["stages"]["corpus"]
    assert not (out / "pii_off" / "tokenizer").is_symlink()
    assert summary["data"]["sentiment_train"] == 32 and summary["data"]["pretrain"] > 2000
    for arm in summary["arms"].values():
        assert set(arm["finetune"]["scores"]) == {"1", "2"}
        assert "pearsonr" in arm["finetune"]["scores"]["1"]["klue-sts"]
        assert 0 <= arm["finetune"]["scores"]["2"]["nsmc"]["accuracy"] <= 100
    nsmc = json.loads((out / "morpheme" / "finetune" / "seed-1" / "nsmc" / "results.json").read_text())
    result = nsmc["results"][0]
    assert result["eval_split"].startswith("sentiment_test") and result["eval_examples"] == 16
    assert result["best_epoch"] == result["training"]["epochs"][-1]["epoch"]  # select: last
    assert result["saved_model"] is None
    from safetensors.torch import load_file

    trained = load_file(out / "morpheme" / "model" / "model.safetensors")
    untrained = load_file(out / "random" / "model" / "model.safetensors")
    key = next(k for k in trained if k.endswith("word_embeddings.weight"))
    assert trained[key].shape == untrained[key].shape and not trained[key].equal(untrained[key])
    report = (out / "report.md").read_text(encoding="utf-8")
    assert (
        "| klue-sts pearsonr |" in report and "| nsmc accuracy |" in report and "morpheme − random" in report
    )
    assert (out / "loss.svg").read_text().startswith("<svg") and "polyline" in (out / "loss.svg").read_text()
    assert (out / "scores.svg").exists()
    for arm in ("morpheme", "pii_off"):
        assert f"| {arm} | pretrain |" in report


def test_shipped_study_config_validates_every_arm():
    from kplm.pipeline.study import load_study

    prepared = load_study(ROOT / "pipeline" / "configs" / "study-cpu.yaml")
    assert set(prepared.config.arms) == {"morpheme", "random_init", "plain_bpe", "pii_off"}
    assert prepared.run_data["sources"][0].endswith("nsmc_pretrain.jsonl")
    assert Path(prepared.config.nsmc_sentiment.source).is_file()
    assert all(Path(p).is_dir() for p in prepared.run_data["corpus"]["decontaminate"])
    assert set(prepared.settings["tasks"]) == {"korsts", "klue-nli", "klue-ner", "nsmc"}


def test_a_bad_arm_is_refused_before_anything_runs(tmp_path, capsys):
    data = yaml.safe_load((ROOT / "pipeline" / "configs" / "study-cpu.yaml").read_text(encoding="utf-8"))
    data["output"] = str(tmp_path / "out")
    data["nsmc_sentiment"]["source"] = str(DATA / "nsmc" / "reviews.jsonl.gz")
    data["run"]["corpus"]["decontaminate"] = [str(DATA / "klue")]
    data["finetune"]["data_dir"] = str(DATA)
    data["arms"]["plain_bpe"]["overrides"]["tokenizer"]["vocab_size"] = "big"
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    assert main(["study", str(path)]) == 2
    assert "arms.plain_bpe: tokenizer.vocab_size: expected an integer" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before the NSMC split or any stage ran


def _write_pack(folder: Path, train: list[list[int]], valid: list[list[int]], vocab: int) -> None:
    import numpy as np

    folder.mkdir(parents=True)
    meta = {"vocab_size": vocab, "special_ids": {"pad": 0, "cls": 1, "sep": 2, "all": [0, 1, 2]}}
    (folder / "pack_meta.json").write_text(json.dumps(meta), encoding="utf-8")
    np.save(folder / "train.npy", np.array(train, dtype=np.uint16))
    np.save(folder / "valid.npy", np.array(valid, dtype=np.uint16))


def test_context_free_baselines_separate_frequency_from_context(tmp_path):
    """Tokens 3..10 cycle in a fixed order: equally frequent (unigram = log 8) and each fully predicted by its
    left neighbour (bigram = -log(0.9 + 0.1/8)); specials and padding are not scored."""
    import math

    from kplm.pipeline.study_report import context_free_baselines

    cycle = [3 + i % 8 for i in range(16)]
    _write_pack(tmp_path / "pack", [[1, *cycle, 2, 0]] * 50, [[1, *cycle[3:], 2, 0, 0, 0]] * 2, vocab=11)
    got = context_free_baselines(tmp_path / "pack")
    # add-one smoothing over the 8 ordinary tokens leaves the unigram uniform
    assert got["unigram"] == pytest.approx(math.log(8), abs=1e-9)
    assert got["bigram"] == pytest.approx(-math.log(0.9 + 0.1 / 8), abs=1e-9)
    # a shuffled valid order breaks the left-neighbour rule: the bigram reference rises above the unigram
    _write_pack(tmp_path / "shuffled", [[1, *cycle, 2, 0]] * 50, [[1, 3, 5, 7, 9, 4, 6, 8, 10, 2]], vocab=11)
    shuffled = context_free_baselines(tmp_path / "shuffled")
    assert shuffled["bigram"] > shuffled["unigram"] == pytest.approx(math.log(8), abs=1e-9)
    assert context_free_baselines(tmp_path / "missing") is None


def test_report_takes_a_reused_steps_time_from_its_record(tmp_path):
    """A rerun of a study skips finished steps (~0 s); the report shows how long each step took when it ran."""
    from kplm.pipeline.study_report import stage_seconds

    (tmp_path / "arm" / "packed").mkdir(parents=True)
    (tmp_path / "arm" / "packed" / "kplm_record.json").write_text(
        json.dumps({"seconds": 25.9}), encoding="utf-8"
    )
    assert stage_seconds(tmp_path, "arm", "pack", {"seconds": 0.0, "skipped": True}) == 25.9
    assert stage_seconds(tmp_path, "arm", "pretrain", {"seconds": 3.5}) == 3.5  # no record: this run's time
