"""Packing, masking, batch order and config validation of kplm.training (no DeepSpeed engine here)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from _training_fixtures import nsmc_texts, pretrain_yaml, workspace, write_corpus

from kplm.config import build
from kplm.errors import KplmError
from kplm.training.config import PretrainConfig, load_pretrain_config
from kplm.training.data import IGNORE_INDEX, Masker, PackedData
from kplm.training.engine import deepspeed_config, lr_lambda
from kplm.training.pack import PackConfig, is_valid_doc, load_tokenizer, pack, read_meta


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return workspace(tmp_path_factory.getbasetemp() / "kplm_training")


def _bodies(rows: np.ndarray, ids: dict) -> list[int]:
    """Undo packing: drop [CLS], the closing [SEP] and padding of each row, concatenate the bodies."""
    stream: list[int] = []
    for row in rows.tolist():
        assert row[0] == ids["cls"]
        while row[-1] == ids["pad"]:
            row.pop()
        assert row[-1] == ids["sep"]
        stream.extend(row[1:-1])
    return stream


def test_pack_layout_and_exact_token_stream(ws: dict[str, Path]) -> None:
    meta = read_meta(ws["packed"])
    ids = meta["special_ids"]
    train = np.load(ws["packed"] / "train.npy", mmap_mode="r")
    valid = np.load(ws["packed"] / "valid.npy", mmap_mode="r")
    assert train.dtype == np.uint16 and valid.dtype == np.uint16
    assert train.shape == (meta["train_sequences"], 64) and valid.shape == (meta["valid_sequences"], 64)
    assert meta["vocab_size"] == 3000 and meta["seq_len"] == 64
    assert (train[:, 0] == ids["cls"]).all() and (valid[:, 0] == ids["cls"]).all()
    # padding only at the end of the last row of each split
    assert not (train[:-1] == ids["pad"]).any() and not (valid[:-1] == ids["pad"]).any()
    # the packed rows hold exactly the documents' token ids, in order, separated by [SEP]
    tokenizer = load_tokenizer(ws["tokenizer"])
    texts = nsmc_texts()
    encoded = tokenizer(texts, add_special_tokens=False)["input_ids"]
    for split, rows in (("train", train), ("valid", valid)):
        docs = [e for i, e in enumerate(encoded) if e and is_valid_doc(i, 42, 0.01) == (split == "valid")]
        expected: list[int] = []
        for doc in docs:
            if expected and len(expected) % 62:
                expected.append(ids["sep"])
            expected.extend(doc)
        assert _bodies(np.asarray(rows), ids) == expected, split
        assert meta[f"{split}_documents"] == len(docs)
        assert meta[f"{split}_tokens"] == sum(map(len, docs))
    assert 20 <= meta["valid_documents"] <= 90  # ~1% of 5,000 documents


def test_pack_is_deterministic_and_skips_when_complete(ws: dict[str, Path], tmp_path: Path) -> None:
    config = PackConfig(
        corpus=ws["corpus"], tokenizer=ws["tokenizer"], output=tmp_path / "again", seq_len=64, batch_size=333
    )
    counts = pack(config)
    assert "skipped" not in counts
    for split in ("train", "valid"):
        assert np.array_equal(
            np.load(tmp_path / "again" / f"{split}.npy"), np.load(ws["packed"] / f"{split}.npy")
        )
    assert pack(config)["skipped"] is True
    other = pack(
        PackConfig(
            corpus=ws["corpus"], tokenizer=ws["tokenizer"], output=tmp_path / "seed", seq_len=64, seed=1
        )
    )
    assert other["valid_documents"] != counts["valid_documents"] or not np.array_equal(
        np.load(tmp_path / "seed" / "valid.npy"), np.load(ws["packed"] / "valid.npy")
    )
    record = json.loads((tmp_path / "again" / "kplm_record.json").read_text())
    assert record["stage"] == "pack" and record["counts"]["train_sequences"] == counts["train_sequences"]


def test_pack_tiny_corpus_still_has_a_valid_sequence(ws: dict[str, Path], tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus", nsmc_texts(12), shards=1)
    counts = pack(PackConfig(corpus=corpus, tokenizer=ws["tokenizer"], output=tmp_path / "out", seq_len=16))
    assert counts["valid_sequences"] >= 1 and counts["train_sequences"] >= 1
    assert np.load(tmp_path / "out" / "valid.npy").shape[0] == counts["valid_sequences"]


def test_pack_errors_name_the_problem(ws: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(KplmError, match=r"pack\.seq_len: must be at least 8"):
        build(PackConfig, {"corpus": "c", "tokenizer": "t", "output": "o", "seq_len": 4}, where="pack")
    with pytest.raises(KplmError, match="corpus folder not found"):
        pack(PackConfig(corpus=tmp_path / "missing", tokenizer=ws["tokenizer"], output=tmp_path / "o"))
    with pytest.raises(KplmError, match="tokenizer folder not found"):
        pack(PackConfig(corpus=ws["corpus"], tokenizer=tmp_path / "nope", output=tmp_path / "o"))


def test_masking_statistics_on_real_sequences(ws: dict[str, Path]) -> None:
    meta = read_meta(ws["packed"])
    ids = meta["special_ids"]
    masker = Masker(mask_id=ids["mask"], special_ids=ids["all"], vocab_size=meta["vocab_size"], prob=0.15)
    rows = np.asarray(np.load(ws["packed"] / "train.npy"), dtype=np.int64)
    inputs, labels = masker(rows, np.random.default_rng(0))
    special = np.isin(rows, ids["all"])
    chosen = labels != IGNORE_INDEX
    assert not (chosen & special).any()  # never [CLS]/[SEP]/[PAD]/[MASK]/[UNK]
    assert (labels[chosen] == rows[chosen]).all()
    assert (inputs[~chosen] == rows[~chosen]).all()
    share = chosen.sum() / (~special).sum()
    assert abs(share - 0.15) < 0.005, share
    masked = (inputs[chosen] == ids["mask"]).mean()
    kept = (inputs[chosen] == rows[chosen]).mean()
    swapped = 1.0 - masked - kept
    assert abs(masked - 0.8) < 0.01 and abs(swapped - 0.1) < 0.01 and abs(kept - 0.1) < 0.01, (
        masked,
        swapped,
        kept,
    )
    assert not np.isin(inputs[chosen & (inputs != ids["mask"])], [ids["pad"], ids["cls"], ids["sep"]]).any()


def test_batches_are_a_pure_function_of_step_and_ranks_are_disjoint(ws: dict[str, Path]) -> None:
    meta = read_meta(ws["packed"])
    ids = meta["special_ids"]
    masker = Masker(mask_id=ids["mask"], special_ids=ids["all"], vocab_size=meta["vocab_size"])

    def data(rank: int, world: int = 2) -> PackedData:
        return PackedData(
            ws["packed"],
            seq_len=64,
            micro_batch_size=8,
            grad_accum=2,
            world_size=world,
            rank=rank,
            seed=3,
            masker=masker,
            pad_id=ids["pad"],
        )

    r0, r1 = data(0), data(1)
    a, seed_a = r0.train_batch(5, 1)
    b, seed_b = data(0).train_batch(5, 1)
    assert seed_a == seed_b and all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["input_ids"], r0.train_batch(6, 1)[0]["input_ids"])
    assert r1.train_batch(5, 1)[1] != seed_a
    n = len(r0.train)
    steps = n // r0.global_batch
    seen = np.concatenate([d.train_rows(s, m) for s in range(steps) for m in range(2) for d in (r0, r1)])
    assert len(np.unique(seen)) == len(seen) == steps * 32  # one epoch: no row twice, across both ranks
    assert a["attention_mask"].dtype.is_floating_point is False
    passes, mine = r0.eval_batches(max_batches=50)
    assert passes == len(mine) and passes == math.ceil(math.ceil(len(r0.valid) / 8) / 2)


def test_pretrain_config_errors_name_the_field(ws: dict[str, Path], tmp_path: Path) -> None:
    good = pretrain_yaml(tmp_path / "good.yaml", ws, tmp_path / "out")
    config = load_pretrain_config(good)
    assert config.model.shape() == (2, 64, 2, 128)
    assert build(
        PretrainConfig, {"data": "d", "tokenizer": "t", "output": "o", "model": {"size": "large"}}
    ).model.shape() == (24, 1024, 16, 4096)
    cases = [
        ({"max_steps": 0}, r"max_steps: must be at least 1"),
        ({"zero_stage": 4}, r"zero_stage: must be 0, 1, 2 or 3"),
        ({"precision": "fp8"}, r"precision: must be one of"),
        ({"mask_prob": 1.5}, r"mask_prob: must be between 0 and 1"),
        ({"model": {"size": "huge"}}, r"model\.size: must be one of"),
        ({"model": {"hidden": 100, "heads": 3}}, r"model\.heads: hidden size 100 is not divisible by 3"),
        ({"warmup_steps": 100}, r"warmup_steps: must be between 0 and max_steps"),
        ({"max_step": 3}, r"max_step: unknown key \(did you mean 'max_steps'\?\)"),
        ({"lr": "fast"}, r"lr: expected a number"),
    ]
    for change, pattern in cases:
        data = {**yaml.safe_load(good.read_text(encoding="utf-8")), **change}
        bad = tmp_path / "bad.yaml"
        bad.write_text(yaml.safe_dump(data), encoding="utf-8")
        with pytest.raises(KplmError, match=r"bad\.yaml\." + pattern):
            load_pretrain_config(bad)
    with pytest.raises(KplmError, match="precision: fp16 needs a GPU"):
        deepspeed_config(
            build(PretrainConfig, {"data": "d", "tokenizer": "t", "output": "o", "precision": "fp16"}),
            on_gpu=False,
        )


def test_deepspeed_json_and_schedule(tmp_path: Path) -> None:
    user = tmp_path / "ds.json"
    user.write_text(json.dumps({"zero_optimization": {"overlap_comm": False}, "gradient_clipping": 0.5}))
    base = {
        "data": "d",
        "tokenizer": "t",
        "output": "o",
        "micro_batch_size": 4,
        "grad_accum": 3,
        "zero_stage": 2,
    }
    ds = deepspeed_config(build(PretrainConfig, {**base, "deepspeed_config": str(user)}), on_gpu=True)
    assert ds["train_micro_batch_size_per_gpu"] == 4 and ds["gradient_accumulation_steps"] == 3
    assert ds["zero_optimization"] == {"stage": 2, "contiguous_gradients": True, "overlap_comm": False}
    assert ds["gradient_clipping"] == 0.5 and ds["bf16"] == {"enabled": True}
    with pytest.raises(KplmError, match="deepspeed_config: file not found"):
        deepspeed_config(
            build(PretrainConfig, {**base, "deepspeed_config": str(tmp_path / "no.json")}), on_gpu=True
        )
    linear = lr_lambda(build(PretrainConfig, {**base, "max_steps": 10, "warmup_steps": 4}))
    assert [round(linear(n), 4) for n in range(10)] == [
        0.2,
        0.4,
        0.6,
        0.8,
        1.0,
        0.8333,
        0.6667,
        0.5,
        0.3333,
        0.1667,
    ]
    cosine = lr_lambda(
        build(PretrainConfig, {**base, "max_steps": 10, "warmup_steps": 0, "schedule": "cosine"})
    )
    assert cosine(0) == 1.0 and abs(cosine(5) - 0.5) < 1e-9 and cosine(9) > 0
