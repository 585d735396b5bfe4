"""kplm export: a real checkpoint of a tiny DeepSpeed run → a Hugging Face folder that loads offline."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from _training_fixtures import build_tokenizer, nsmc_texts, trained_run

from kplm.config import build
from kplm.errors import KplmError
from kplm.export.hf import ExportConfig, export
from kplm.training.pack import read_meta


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return trained_run(tmp_path_factory.getbasetemp() / "kplm_training")


@pytest.fixture(scope="module")
def exported(run: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "model"
    counts = export(ExportConfig(checkpoint=run["run"], output=out))  # tokenizer: the run's own
    assert counts["step"] == 6 and counts["vocab_size"] == 3000
    return out


def _batch(run: dict[str, Path]) -> dict[str, torch.Tensor]:
    rows = np.asarray(np.load(run["packed"] / "valid.npy")[:4], dtype=np.int64)
    pad = read_meta(run["packed"])["special_ids"]["pad"]
    return {
        "input_ids": torch.from_numpy(rows),
        "attention_mask": torch.from_numpy((rows != pad).astype(np.int64)),
    }


def test_exported_logits_equal_the_deepspeed_checkpoint(run: dict[str, Path], exported: Path) -> None:
    from transformers import AutoConfig, AutoModelForMaskedLM, AutoTokenizer, BertForMaskedLM

    model = AutoModelForMaskedLM.from_pretrained(str(exported), local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(exported), local_files_only=True)
    assert type(model).__name__ == "BertForMaskedLM" and len(tokenizer) == 3000
    assert tokenizer.model_max_length == 64
    # an independent rebuild: HF config + DeepSpeed's own module state of the same step
    tag = run["run"] / "checkpoints" / "step_00000006"
    module = torch.load(tag / "mp_rank_00_model_states.pt", map_location="cpu", weights_only=True)["module"]
    rebuilt = BertForMaskedLM(AutoConfig.from_pretrained(str(tag), local_files_only=True))
    rebuilt.load_state_dict({k.removeprefix("mlm."): v for k, v in module.items()}, strict=True)
    rebuilt.eval()
    batch = _batch(run)
    with torch.no_grad():
        a, b = model(**batch).logits, rebuilt(**batch).logits
    assert a.shape == (4, 64, 3000) and torch.equal(a, b)
    card = (exported / "README.md").read_text(encoding="utf-8")
    state = json.loads((tag / "trainer_state.json").read_text())
    assert "| steps | 6 of 6 |" in card and f"{state['valid_loss']:.4f}" in card and "6,144" in card
    assert (exported / "model.safetensors").is_file() and not list(exported.glob("*.bin"))


def test_fill_mask_pipeline_runs(exported: Path) -> None:
    from transformers import pipeline

    fill = pipeline("fill-mask", model=str(exported), tokenizer=str(exported), device="cpu")
    predictions = fill("이 영화 정말 [MASK] 있어요", top_k=3)
    assert len(predictions) == 3 and all(p["token_str"] and 0 < p["score"] <= 1 for p in predictions)


def test_export_skips_when_complete_and_bf16(run: dict[str, Path], exported: Path, tmp_path: Path) -> None:
    assert export(ExportConfig(checkpoint=run["run"], output=exported))["skipped"] is True
    from transformers import AutoModelForMaskedLM

    tag = run["run"] / "checkpoints" / "step_00000004"
    out = tmp_path / "bf16"
    counts = export(ExportConfig(checkpoint=tag, tokenizer=run["tokenizer"], output=out, dtype="bf16"))
    assert counts["step"] == 4
    model = AutoModelForMaskedLM.from_pretrained(str(out), local_files_only=True)
    assert next(model.parameters()).dtype == torch.bfloat16


def test_vocabulary_mismatch_is_a_clear_error(run: dict[str, Path], tmp_path: Path) -> None:
    other = build_tokenizer(tmp_path / "small_tok", nsmc_texts(2000), vocab_size=2500)
    with pytest.raises(KplmError, match=r"has 2500 tokens but the model's embedding has 3000 rows"):
        export(ExportConfig(checkpoint=run["run"], tokenizer=other, output=tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_bad_export_inputs(run: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(KplmError, match=r"export\.dtype: must be one of 'fp32', 'bf16'"):
        build(ExportConfig, {"checkpoint": "c", "output": "o", "dtype": "fp8"}, where="export")
    with pytest.raises(KplmError, match="checkpoint not found"):
        export(ExportConfig(checkpoint=tmp_path / "missing", output=tmp_path / "o"))
    with pytest.raises(KplmError, match="no finished checkpoint"):
        export(ExportConfig(checkpoint=tmp_path, output=tmp_path / "o"))
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(KplmError, match="exists and is not a kplm export"):
        export(ExportConfig(checkpoint=run["run"], output=busy))
