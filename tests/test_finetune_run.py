"""Fine-tuning a tiny BERT (built from a config, tokenizer trained here on real KLUE text) on real KLUE files."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from _finetune_fixtures import DATA, NER, NLI, STS, shared_tiny_model

from kplm.config import build, fingerprint
from kplm.errors import KplmError
from kplm.finetune import data, metrics
from kplm.finetune.run import FinetuneConfig, finetune
from kplm.finetune.task_cls import decode_ner, encode_ner
from kplm.records import content_digests, content_identity


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return shared_tiny_model(tmp_path_factory)


def test_nli_split_of_dev_file_writes_named_results(tiny_model, tmp_path):
    out = tmp_path / "nli"
    config = FinetuneConfig(
        model=tiny_model,
        task="klue-nli",
        output=out,
        split_of=NLI,
        max_train_examples=64,
        max_eval_examples=48,
        epochs=1,
        batch_size=16,
        threads=1,
    )
    result = finetune(config)
    assert result["train_split"] == "klue-nli-v1.1_dev[:80%] (shuffled seed 42, grouped by text_a) first 64"
    assert result["eval_split"] == "klue-nli-v1.1_dev[80%:] (shuffled seed 42, grouped by text_a) first 48"
    assert result["hyperparameters"]["lr"] == 5e-5 and result["hyperparameters"]["max_length"] == 128
    assert 0.0 <= result["metrics"]["accuracy"] <= 100.0
    saved = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert saved["results"][0]["metrics"] == result["metrics"]
    assert saved["table"]["rows"][0]["values"]["KLUE-NLI ACC"] == result["metrics"]["accuracy"]
    assert "klue-nli-v1.1_dev[80%:]" in (out / "results.md").read_text(encoding="utf-8")
    assert (out / "kplm_record.json").is_file()
    # the finished output is reused (same config, model and data): identical result, no training
    again = finetune(dataclasses.replace(config, threads=2))
    assert again == result
    # a result finished before the grouped split (its fingerprint lacks the split rule) is redone, not reused
    record_path = out / "kplm_record.json"
    record = json.loads(record_path.read_text(encoding="utf-8"))
    settings = {k: v for k, v in vars(config).items() if k not in ("threads", "device")}
    files = [Path(tiny_model) / "model.safetensors", Path(tiny_model) / "config.json", Path(NLI)]
    record["fingerprint"] = fingerprint(settings, content_identity(content_digests(files)))
    record_path.write_text(json.dumps(record), encoding="utf-8")
    (out / "results.json").write_text(json.dumps({"results": [{"stale": True}]}), encoding="utf-8")
    assert "stale" not in finetune(config)


def test_model_learns_its_training_set(tiny_model, tmp_path):
    """Training and scoring on the same 16 NLI pairs: a working loop memorises them far above chance."""
    subset = tmp_path / "nli16.json"
    subset.write_text(
        json.dumps(json.loads(NLI.read_text(encoding="utf-8"))[:16], ensure_ascii=False), "utf-8"
    )
    result = finetune(
        FinetuneConfig(
            model=tiny_model,
            task="klue-nli",
            output=tmp_path / "mem",
            train_file=subset,
            eval_file=subset,
            epochs=60,
            lr=1e-3,
            batch_size=4,
            warmup_ratio=0.0,
            threads=1,
        )
    )
    assert result["training"]["last_loss"] < result["training"]["first_loss"]
    assert result["metrics"]["accuracy"] >= 75.0, result


def test_sts_regression_and_ynat_fixture(tiny_model, tmp_path):
    sts = finetune(
        FinetuneConfig(
            model=tiny_model,
            task="klue-sts",
            output=tmp_path / "sts",
            split_of=STS,
            max_train_examples=48,
            max_eval_examples=32,
            epochs=1,
            batch_size=16,
            threads=1,
        )
    )
    assert set(sts["metrics"]) == {"pearsonr", "f1"}
    titles = {
        "IT과학": ["구글 새 인공지능 칩 공개", "스마트폰 배터리 기술 발전"],
        "경제": ["코스피 하락 마감", "한국은행 기준금리 동결"],
        "사회": ["서울 지하철 파업 예고", "폭우로 도로 통제"],
        "생활문화": ["올해 가을 단풍 절정 시기", "국립박물관 특별전 개막"],
        "세계": ["미국 대선 후보 토론", "일본 총리 사임 발표"],
        "스포츠": ["류현진 시즌 10승", "축구 대표팀 월드컵 예선 승리"],
        "정치": ["국회 예산안 통과", "대통령 지지율 조사 결과"],
    }
    records = [
        {"guid": f"ynat-v1_train_{i:05d}", "title": t, "label": label, "url": "", "date": ""}
        for i, (label, ts) in enumerate(titles.items())
        for t in ts
    ]
    path = tmp_path / "ynat-v1.1_train.json"
    path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    ynat = finetune(
        FinetuneConfig(
            model=tiny_model,
            task="ynat",
            output=tmp_path / "ynat",
            train_file=path,
            eval_file=path,
            epochs=1,
            batch_size=4,
            threads=1,
        )
    )
    assert ynat["train_split"] == ynat["eval_split"] == "ynat-v1.1_train"
    assert 0.0 <= ynat["metrics"]["macro_f1"] <= 100.0


def test_ner_character_alignment_and_run(tiny_model, tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model))
    sentences = data.load_task_file("klue-ner", NER)[:120]
    features = encode_ner(tokenizer, sentences, 510)
    decoded = [
        decode_ner(
            f["spans"], [max(label, 0) if label != -100 else 0 for label in f["labels"]], len(s["chars"])
        )
        for f, s in zip(features, sentences, strict=True)
    ]
    gold = [s["tags"] for s in sentences]
    # gold token labels decoded back to characters recover ~98% (misses: an entity ending inside a token)
    assert metrics.ner_entity_macro_f1(gold, decoded) > 95.0
    result = finetune(
        FinetuneConfig(
            model=tiny_model,
            task="klue-ner",
            output=tmp_path / "ner",
            split_of=NER,
            max_train_examples=40,
            max_eval_examples=20,
            epochs=1,
            batch_size=8,
            threads=1,
        )
    )
    assert set(result["metrics"]) == {"entity_macro_f1", "char_macro_f1"}
    assert result["hyperparameters"]["max_length"] == 510


def test_config_validation_and_bad_model(tmp_path):
    with pytest.raises(KplmError, match="split_of"):
        build(FinetuneConfig, {"model": "m", "task": "klue-nli", "output": "o"}, where="finetune")
    with pytest.raises(KplmError, match="task"):
        build(
            FinetuneConfig,
            {"model": "m", "task": "klue-xx", "output": "o", "split_of": "f"},
            where="finetune",
        )
    with pytest.raises(KplmError, match="lr"):
        build(FinetuneConfig, {"model": "m", "task": "ynat", "output": "o", "split_of": "f", "lr": -1.0})
    config = FinetuneConfig(model=tmp_path / "none", task="klue-nli", output=tmp_path / "o", split_of=NLI)
    with pytest.raises(KplmError, match="model folder not found"):
        finetune(config)
    assert config.hyperparameters()["epochs"] == 5
    large = FinetuneConfig(
        model=tmp_path, task="klue-nli", output=tmp_path, split_of=NLI, large_preset=True, lr=1e-5
    )
    assert large.hyperparameters() == {
        "lr": 1e-5,
        "batch_size": 32,
        "epochs": 5,
        "warmup_ratio": 0.2,
        "weight_decay": 0.0,
        "max_length": 128,
    }


def test_evaluate_suite_writes_one_klue_ordered_table(tiny_model, tmp_path):
    from kplm.finetune.suite import EvaluateConfig, evaluate

    config = EvaluateConfig(
        model=tiny_model,
        output=tmp_path / "suite",
        data_dir=DATA,
        tasks=["korsts", "klue-sts"],
        epochs=1,
        max_train_examples=24,
        max_eval_examples=16,
        threads=1,
    )
    summary = evaluate(config)
    assert [r["task"] for r in summary["results"]] == ["korsts", "klue-sts"]
    assert summary["results"][0]["train_split"] == "sts-train first 24"
    assert summary["results"][0]["eval_split"] == "sts-dev first 16"
    md = (tmp_path / "suite" / "results.md").read_text(encoding="utf-8")
    header = md.splitlines()[0]
    assert header.index("KLUE-STS R") < header.index("KLUE-NLI ACC") < header.index("KorSTS R")
    assert (tmp_path / "suite" / "klue-sts" / "results.json").is_file()
    assert (tmp_path / "suite" / "kplm_record.json").is_file()


def test_evaluate_checks_tasks_and_files_first(tmp_path):
    from kplm.finetune.suite import EvaluateConfig, evaluate

    with pytest.raises(KplmError, match="unknown task 'klue-foo'"):
        build(EvaluateConfig, {"model": "m", "output": "o", "data_dir": "d", "tasks": ["klue-foo"]})
    config = EvaluateConfig(model=tmp_path, output=tmp_path / "o", data_dir=DATA, tasks=["klue-nli", "ynat"])
    with pytest.raises(KplmError, match="ynat: data file not found: .*ynat-v1.1_train.json"):
        evaluate(config)
    config = EvaluateConfig(
        model=tmp_path, output=tmp_path / "o", data_dir=DATA, tasks=["klue-dp", "klue-mrc"]
    )
    with pytest.raises(KplmError, match="klue-mrc: data file not found: .*klue-mrc-v1.1_train.json"):
        evaluate(config)
    assert not (tmp_path / "o").exists()


def test_evaluate_overrides_reach_every_task_and_are_checked(tmp_path):
    from kplm.finetune.suite import EvaluateConfig, task_config

    config = EvaluateConfig(
        model=tmp_path,
        output=tmp_path / "o",
        data_dir=DATA,
        tasks=["korsts", "klue-nli"],
        lr=3e-4,
        batch_size=8,
    )
    for task in config.tasks:
        assert (task_config(config, task).lr, task_config(config, task).batch_size) == (3e-4, 8)
    assert task_config(EvaluateConfig(model=tmp_path, output=tmp_path, data_dir=DATA), "korsts").lr is None
    for field, value, message in (
        ("lr", 0, "lr: must be positive"),
        ("batch_size", 0, "batch_size: must be at"),
    ):
        with pytest.raises(KplmError, match=message):
            build(EvaluateConfig, {"model": "m", "output": "o", "data_dir": "d", field: value})
