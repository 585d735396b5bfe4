"""End to end: `kplm run` on the embedded demo config, exactly as the README's first command runs it."""

import json
import re
import subprocess
import sys

import pytest
import yaml

from kplm.pipeline.run import DEMO_CONFIG, STAGES, load_run_config, plan
from kplm.records import read_record

STAGE_DIRS = {
    "corpus": "corpus",
    "pii": "pii",
    "tokenizer": "tokenizer",
    "pack": "packed",
    "pretrain": "pretrain",
    "export": "model",
}


def kplm(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kplm.cli", *args], capture_output=True, text=True, timeout=1500, cwd=cwd
    )


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """One full demo run (the shipped config, only the output folder moved), and its console output."""
    out = tmp_path_factory.mktemp("demo") / "run"
    result = kplm("run", "--output", str(out))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out, result.stdout


def test_demo_runs_every_stage_and_prints_the_model(demo_run):
    out, stdout = demo_run
    assert f"exported model: {out / 'model'}" in stdout
    assert "fill-mask:" in stdout
    assert len(re.findall(r"^\[kplm\]\s+\d\.\d{3}\s+\S+", stdout, flags=re.M)) == 3
    summary = json.loads((out / "run_summary.json").read_text())
    assert list(summary["stages"]) == [s for s in STAGES if s != "finetune"]
    for stage, folder in STAGE_DIRS.items():
        record = read_record(out / folder)
        assert record is not None, f"{stage} wrote no kplm_record.json"
        assert record["versions"]["torch"].startswith("2.13")


def test_demo_outputs_are_consistent(demo_run):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    out, _ = demo_run
    corpus = json.loads((out / "corpus" / "clean_report.json").read_text())
    assert (
        corpus["input"] == 626
        and corpus["input"] == corpus["kept"] + corpus["dropped"] + corpus["quarantined"]
    )
    assert corpus["dropped_by_rule"]["exact_dedup_v1"] >= 20
    pii = json.loads((out / "pii" / "pii_report.json").read_text())
    assert pii["documents_with_pii"] >= 40 and pii["pii_by_type"]["PHONE"] >= 10
    tokenizer = AutoTokenizer.from_pretrained(out / "model")
    model = AutoModelForMaskedLM.from_pretrained(out / "model")
    assert model.get_input_embeddings().weight.shape[0] == len(tokenizer)
    assert tokenizer.tokenize("연락처는 [PHONE] 입니다").count("[PHONE]") == 1
    assert (out / "model" / "model.safetensors").is_file()
    card = (out / "model" / "README.md").read_text()
    assert "010-" not in card and "@example" not in card


def test_rerun_skips_every_finished_stage(demo_run):
    out, _ = demo_run
    weights = out / "model" / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    result = kplm("run", "--output", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((out / "run_summary.json").read_text())
    assert all(stage["seconds"] < 30 for stage in summary["stages"].values()), summary["stages"]
    assert "already complete" in result.stdout
    assert weights.stat().st_mtime_ns == stamp


def test_changed_model_settings_do_not_resume_old_checkpoints(demo_run, tmp_path):
    out, _ = demo_run
    config = yaml.safe_load(DEMO_CONFIG.read_text())
    config["sources"] = [str((DEMO_CONFIG.parent / s).resolve()) for s in config["sources"]]
    config["pretrain"]["model"]["hidden"] = 64
    path = tmp_path / "changed.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True))
    result = kplm("run", str(path), "--output", str(out))
    assert result.returncode == 2
    assert "holds checkpoints of a run with other settings" in result.stderr
    assert "Traceback" not in result.stderr


def test_demo_config_plans_all_stages():
    config, _ = load_run_config(None, output=None)
    assert [s.name for s in plan(config, "demo.yaml")] == [s for s in STAGES if s != "finetune"]


def test_model_card_is_written_from_the_run_records(demo_run):
    out, _ = demo_run
    card = (out / "model" / "README.md").read_text()
    corpus = json.loads((out / "corpus" / "clean_report.json").read_text())
    assert f"{corpus['input']:,} input documents → {corpus['kept']:,} kept" in card
    assert "`exact_dedup_v1`" in card and "policy `tag`" in card
    assert "tokens per eojeol" in card and "DeepSpeed ZeRO 1" in card
    config = json.loads((out / "model" / "config.json").read_text())
    assert config["tokenizer_class"] == "BertTokenizer"
    sample = (DEMO_CONFIG.parent / "../../corpus/sample/kplm_sample_ko.jsonl").resolve().read_text()
    texts = [json.loads(line)["text"] for line in sample.splitlines()]
    assert not any(len(t) > 30 and t[:30] in card for t in texts), "document text leaked into the model card"


def test_push_to_hub_dry_run_and_recorded_upload(demo_run, monkeypatch):
    from kplm.export.hub import push_to_hub

    out, _ = demo_run
    result = kplm(
        "export",
        str(out / "pretrain"),
        "--output",
        str(out / "model"),
        "--push-to-hub",
        "me/kplm-demo",
        "--dry-run",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    plan = json.loads(result.stdout)["hub"]
    assert (
        plan["dry_run"] and "model.safetensors" in plan["files"] and "kplm_record.json" not in plan["files"]
    )

    class RecordingApi:
        calls: list = []

        def create_repo(self, **kwargs):
            self.calls.append(("create_repo", kwargs))
            return "https://huggingface.co/me/kplm-demo"

        def upload_folder(self, **kwargs):
            self.calls.append(("upload_folder", kwargs))
            return type("Commit", (), {"oid": "abc123"})()

    api = RecordingApi()
    monkeypatch.delenv("HF_TOKEN", raising=False)
    sent = push_to_hub(out / "model", "me/kplm-demo", private=True, dry_run=False, api=api)
    assert [c[0] for c in api.calls] == ["create_repo", "upload_folder"]
    assert api.calls[0][1] == {
        "repo_id": "me/kplm-demo",
        "repo_type": "model",
        "private": True,
        "exist_ok": True,
    }
    assert api.calls[1][1]["allow_patterns"] == plan["files"] and sent["commit"] == "abc123"
    bad = kplm("export", str(out / "pretrain"), "--output", str(out / "model"), "--push-to-hub", "not a repo")
    assert bad.returncode == 2 and "--push-to-hub" in bad.stderr


def test_changed_upstream_data_does_not_resume_old_checkpoints(demo_run, tmp_path):
    """Rerunning with a stricter corpus rule redoes corpus → pack, then refuses the stale checkpoints.

    Runs last in this module: it replaces the demo run's corpus, PII, tokenizer and pack outputs.
    """
    out, _ = demo_run
    config = yaml.safe_load(DEMO_CONFIG.read_text())
    config["sources"] = [str((DEMO_CONFIG.parent / s).resolve()) for s in config["sources"]]
    config["corpus"]["min_chars"] = 40
    path = tmp_path / "stricter.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True))
    result = kplm("run", str(path), "--output", str(out))
    assert result.returncode == 2
    assert "holds checkpoints trained on another" in result.stderr and "data" in result.stderr
    assert "Traceback" not in result.stderr
