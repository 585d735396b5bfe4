"""arch: modernbert — a real tiny DeepSpeed run of ModernBERT (pre-LN, rotary positions, GeGLU), exported and
reloaded with stock transformers classes, and the sparse masked-LM loss checked against HF's own loss."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from _training_fixtures import metrics, pretrain_yaml, single_rank, workspace

from kplm.export.hf import ExportConfig, export
from kplm.training.config import ModelConfig
from kplm.training.data import Masker
from kplm.training.model import SparseMLMLoss, build_mlm, count_params, flops_per_token, hf_config
from kplm.training.pack import read_meta


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.getbasetemp() / "kplm_training"
    ws = workspace(base)
    output = base / "run_modernbert"
    if not (output / "kplm_record.json").exists():
        config = pretrain_yaml(
            base / "run_modernbert.yaml", ws, output, model={"arch": "modernbert"}, zero_stage=1
        )
        single_rank(config)
    return {**ws, "run": output}


def _tiny_config(ids: dict[str, int], vocab: int = 3000) -> object:
    return hf_config(
        ModelConfig(arch="modernbert", size="tiny", dropout=0.0), vocab_size=vocab, seq_len=64, ids=ids
    )


def test_config_is_stock_modernbert_with_global_attention() -> None:
    ids = {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
    config = _tiny_config(ids)
    assert config.model_type == "modernbert" and config.num_hidden_layers == 2 and config.hidden_size == 64
    assert config.layer_types == ["full_attention", "full_attention"]
    assert (config.pad_token_id, config.cls_token_id, config.sep_token_id) == (0, 2, 3)
    model = build_mlm(config)
    assert type(model).__name__ == "ModernBertForMaskedLM"
    params = count_params(model)
    # no position table: 6 × (all parameters − token embeddings + masked share of the tied projection) + attention
    expected = 6.0 * (params - 3000 * 64 + 0.15 * 3000 * 64) + 12.0 * 2 * 64 * 64
    assert flops_per_token(config, params, 64, 0.15) == pytest.approx(expected)


def test_sparse_loss_equals_hf_masked_lm_loss() -> None:
    ids = {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
    torch.manual_seed(0)
    mlm = build_mlm(_tiny_config(ids)).eval()
    masker = Masker(mask_id=4, special_ids=[0, 1, 2, 3, 4], vocab_size=3000, prob=0.15)
    rows = np.random.default_rng(0).integers(5, 3000, size=(4, 64))
    rows[:, 0], rows[3, 40:] = 2, 0  # [CLS] starts each row; the last row is padded
    inputs, labels = masker(rows, np.random.default_rng(1))
    batch = {
        "input_ids": torch.from_numpy(inputs),
        "attention_mask": torch.from_numpy((rows != 0).astype(np.int64)),
        "labels": torch.from_numpy(labels),
    }
    with torch.no_grad():
        ours = SparseMLMLoss(mlm)(**batch)
        theirs = mlm(**batch).loss
    assert (labels != -100).sum() > 10
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-5)


def test_deepspeed_run_trains_exports_and_reloads(run: dict[str, Path], tmp_path: Path) -> None:
    from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification

    train = metrics(run["run"])
    assert sorted(train) == [1, 2, 3, 4, 5, 6]
    assert train[6]["loss"] < train[1]["loss"]
    out = tmp_path / "model"
    counts = export(ExportConfig(checkpoint=run["run"], output=out))
    assert counts["step"] == 6
    model = AutoModelForMaskedLM.from_pretrained(str(out), local_files_only=True).eval()
    assert type(model).__name__ == "ModernBertForMaskedLM"
    assert "ModernBERT" in (out / "README.md").read_text(encoding="utf-8")
    # the export holds exactly the checkpoint's consolidated weights
    from safetensors.torch import load_file

    tag = run["run"] / "checkpoints" / "step_00000006"
    saved = load_file(str(tag / "model.safetensors"))
    exported = model.state_dict()
    assert all(torch.equal(exported[k], v) for k, v in saved.items() if k in exported)
    rows = np.asarray(np.load(run["packed"] / "valid.npy")[:2], dtype=np.int64)
    pad = read_meta(run["packed"])["special_ids"]["pad"]
    batch = {
        "input_ids": torch.from_numpy(rows),
        "attention_mask": torch.from_numpy((rows != pad).astype(np.int64)),
    }
    with torch.no_grad():
        assert model(**batch).logits.shape == (2, 64, 3000)
    classifier = AutoModelForSequenceClassification.from_pretrained(
        str(out), num_labels=3, local_files_only=True
    )
    with torch.no_grad():
        assert classifier(**batch).logits.shape == (2, 3)
    record = json.loads((run["run"] / "kplm_record.json").read_text(encoding="utf-8"))
    assert record["config"]["config"]["model"]["arch"] == "modernbert"
    assert record["config"]["hf_config"]["model_type"] == "modernbert"
