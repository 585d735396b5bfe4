"""Morpheme-span masking: the pack records MeCab-ko morpheme starts per token, and ``masking: morpheme``
chooses whole morphemes (15% of tokens in expectation, 80/10/10, never a split morpheme)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from _training_fixtures import (
    SPECIALS,
    metrics,
    nsmc_texts,
    pretrain_yaml,
    single_rank,
    workspace,
    write_corpus,
)

from kplm.errors import KplmError
from kplm.training.checks import check_inputs
from kplm.training.config import load_pretrain_config
from kplm.training.data import IGNORE_INDEX, Masker, PackedData
from kplm.training.pack import STARTS_SUFFIX, PackConfig, load_tokenizer, pack, read_meta

SENTENCE = "아버지가방에 들어가신다."


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    paths = workspace(tmp_path_factory.getbasetemp() / "kplm_training")
    morph = paths["packed"].with_name("packed_morpheme")
    config = PackConfig(
        corpus=paths["corpus"],
        tokenizer=paths["tokenizer"],
        output=morph,
        seq_len=64,
        morpheme_boundaries=True,
    )
    pack(config)
    return {**paths, "morph": morph}


def _mecab_starts(text: str) -> set[int]:
    """Morpheme start offsets found independently: MeCab's surfaces searched for in order in ``text``."""
    import mecab_ko as MeCab

    starts, pos = set(), 0
    for line in MeCab.Tagger().parse(text).splitlines():
        if line == "EOS" or not line.strip():
            continue
        surface = line.split("\t")[0]
        pos = text.index(surface, pos)
        starts.add(pos)
        pos += len(surface)
    return starts


def test_pack_records_morpheme_starts_that_agree_with_mecab(ws: dict[str, Path], tmp_path: Path) -> None:
    tokenizer = load_tokenizer(ws["tokenizer"])
    texts = [SENTENCE, "이 영화 정말 재밌었어요ㅋㅋ 배우들 연기가 최고!!", "20년이 지났지만 또 보고 싶다."]
    corpus = write_corpus(tmp_path / "corpus", texts * 4, shards=1)
    out = tmp_path / "packed"
    counts = pack(
        PackConfig(
            corpus=corpus, tokenizer=ws["tokenizer"], output=out, seq_len=256, morpheme_boundaries=True
        )
    )
    assert counts["morpheme_fallback_documents"] == 0 and read_meta(out)["morpheme_boundaries"] is True
    ids = np.concatenate([np.load(out / "train.npy"), np.load(out / "valid.npy")])
    starts = np.concatenate([np.load(out / f"train{STARTS_SUFFIX}"), np.load(out / f"valid{STARTS_SUFFIX}")])
    assert starts.dtype == np.uint8 and starts.shape == ids.shape
    # the literal sentence: 아버지|가|방|에 들어가|신다|. (MeCab) over 아버지 ##가 ##방 ##에 들어 ##가 ##신 ##다 .
    encoding = tokenizer(SENTENCE, add_special_tokens=False, return_offsets_mapping=True)
    n = len(encoding["input_ids"])
    row = 0 if ids[0, 1 : 1 + n].tolist() == encoding["input_ids"] else 1
    assert ids[row, 1 : 1 + n].tolist() == encoding["input_ids"]
    assert tokenizer.convert_ids_to_tokens(encoding["input_ids"]) == [
        "아버지", "##가", "##방", "##에", "들어", "##가", "##신", "##다", ".",
    ]  # fmt: skip
    assert starts[row, 1 : 1 + n].tolist() == [1, 1, 1, 1, 1, 0, 1, 0, 1]
    # every document: flags equal "token begins where an independently found MeCab morpheme begins"
    specials = set(tokenizer.all_special_ids)
    checked = 0
    for row_ids, row_starts in zip(ids.tolist(), starts.tolist(), strict=True):
        assert all(f == 1 for i, f in zip(row_ids, row_starts, strict=True) if i in specials)
        body = [i for i in row_ids if i not in specials]
        for text in texts:
            enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
            if body[: len(enc["input_ids"])] == enc["input_ids"]:
                mecab = _mecab_starts(text)
                expected = [int(a in mecab) for a, _ in enc["offset_mapping"]]
                got = [f for i, f in zip(row_ids, row_starts, strict=True) if i not in specials]
                assert got[: len(expected)] == expected, text
                checked += 1
    assert checked >= 1


def test_morpheme_masking_statistics_on_packed_korean(ws: dict[str, Path]) -> None:
    meta = read_meta(ws["morph"])
    ids = meta["special_ids"]
    rows = np.asarray(np.load(ws["morph"] / "train.npy"), dtype=np.int64)[:800]
    starts = np.load(ws["morph"] / f"train{STARTS_SUFFIX}")[:800]
    common = {"mask_id": ids["mask"], "special_ids": ids["all"], "vocab_size": meta["vocab_size"]}
    masker = Masker(**common, prob=0.15, whole_morpheme=True)
    inputs, labels = masker(rows, np.random.default_rng(5), starts)
    chosen = labels != IGNORE_INDEX
    special = np.isin(rows, ids["all"])
    assert not (chosen & special).any() and (labels[chosen] == rows[chosen]).all()
    assert (inputs[~chosen] == rows[~chosen]).all()
    share = chosen.sum() / (~special).sum()
    assert abs(share - 0.15) < 0.01, share
    masked, kept = (inputs[chosen] == ids["mask"]).mean(), (inputs[chosen] == rows[chosen]).mean()
    swapped = 1.0 - masked - kept
    assert abs(masked - 0.8) < 0.015 and abs(kept - 0.1) < 0.015 and abs(swapped - 0.1) < 0.015
    # a morpheme (a flagged token and the unflagged ones after it) is chosen whole or not at all
    token_chosen = Masker(**common, prob=0.15)(rows, np.random.default_rng(5))[1] != IGNORE_INDEX
    multi = split_by_token_mode = 0
    for r in range(len(rows)):
        bounds = [c for c in range(1, 64) if starts[r, c] or special[r, c]] + [64]
        for a, b in zip(bounds, bounds[1:], strict=False):
            if special[r, a]:
                continue
            span = chosen[r, a:b]
            assert span.all() or not span.any(), (r, a, b)
            multi += int(span.all() and b - a > 1)
            split_by_token_mode += int(0 < token_chosen[r, a:b].sum() < b - a)
    assert multi > 100 and split_by_token_mode > 100, (multi, split_by_token_mode)


def test_morpheme_batches_are_deterministic_and_need_boundaries(ws: dict[str, Path], tmp_path: Path) -> None:
    meta = read_meta(ws["morph"])
    ids = meta["special_ids"]
    masker = Masker(
        mask_id=ids["mask"], special_ids=ids["all"], vocab_size=meta["vocab_size"], whole_morpheme=True
    )
    kwargs = {"seq_len": 64, "micro_batch_size": 8, "grad_accum": 1, "world_size": 1, "rank": 0, "seed": 3}
    data = PackedData(ws["morph"], masker=masker, pad_id=ids["pad"], **kwargs)
    a, seed_a = data.train_batch(4, 0)
    b, seed_b = PackedData(ws["morph"], masker=masker, pad_id=ids["pad"], **kwargs).train_batch(4, 0)
    assert seed_a == seed_b and all(np.array_equal(a[k], b[k]) for k in a)
    assert (data.eval_batch(0)["labels"] != IGNORE_INDEX).any()
    with pytest.raises(KplmError, match="masking: morpheme needs morpheme boundaries, but .*packed without"):
        PackedData(ws["packed"], masker=masker, pad_id=ids["pad"], **kwargs)
    with pytest.raises(KplmError, match="masking: morpheme needs the pack's morpheme starts"):
        masker(np.asarray(data.train[:2], dtype=np.int64), np.random.default_rng(0))
    config = load_pretrain_config(pretrain_yaml(tmp_path / "c.yaml", ws, tmp_path / "o", masking="morpheme"))
    with pytest.raises(
        KplmError, match=r"masking: morpheme needs morpheme boundaries.*morpheme_boundaries: true"
    ):
        check_inputs(config)
    morph = load_pretrain_config(
        pretrain_yaml(tmp_path / "m.yaml", {**ws, "packed": ws["morph"]}, tmp_path / "o", masking="morpheme")
    )
    assert check_inputs(morph)[1]["morpheme_boundaries"] is True
    # recording boundaries is part of the pack's fingerprint (a rerun with the option on packs again)
    record = json.loads((ws["morph"] / "kplm_record.json").read_text())
    plain = json.loads((ws["packed"] / "kplm_record.json").read_text())
    assert record["fingerprint"] != plain["fingerprint"]
    assert np.array_equal(np.load(ws["morph"] / "train.npy"), np.load(ws["packed"] / "train.npy"))


def test_a_real_run_trains_with_morpheme_masking(ws: dict[str, Path], tmp_path: Path) -> None:
    """Two steps of the tiny model on the morpheme pack, one rank: the masking option is wired through."""
    out = tmp_path / "run"
    config = pretrain_yaml(
        tmp_path / "run.yaml", {**ws, "packed": ws["morph"]}, out, masking="morpheme", max_steps=2,
        save_every=2, eval_every=2, grad_accum=1,
    )  # fmt: skip
    single_rank(config)
    train, evals = metrics(out), metrics(out, "eval")
    assert sorted(train) == [1, 2] and all(math.isfinite(e["loss"]) for e in train.values())
    assert math.isfinite(evals[2]["valid_loss"])
    resolved = json.loads((out / "checkpoints" / "resolved_config.json").read_text())
    assert resolved["config"]["masking"] == "morpheme"


def test_metaspace_bpe_tokens_start_morphemes_after_their_space() -> None:
    """Metaspace BPE pieces (``▁들``) carry the space before the eojeol in their offsets: it is skipped."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from kplm.training.pack import token_morpheme_starts

    bpe = Tokenizer(models.BPE(unk_token="[UNK]"))
    bpe.pre_tokenizer = pre_tokenizers.Metaspace()
    bpe.train_from_iterator(nsmc_texts(2000), trainers.BpeTrainer(vocab_size=1500, special_tokens=SPECIALS))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, unk_token="[UNK]")
    for text in (SENTENCE, "이 영화 정말 재밌었어요ㅋㅋ 배우들 연기가 최고!!"):
        encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        flags, failed = token_morpheme_starts(text, encoding["offset_mapping"], encoding.word_ids())
        mecab = _mecab_starts(text)
        expected = [int(a + (text[a] == " ") in mecab) for a, _ in encoding["offset_mapping"]]
        assert not failed and flags == expected and flags[0] == 1, text
        pieces = tokenizer.convert_ids_to_tokens(encoding["input_ids"])
        assert any(p.startswith("\u2581") and f and a > 0 for p, f, (a, _) in
                   zip(pieces, flags, encoding["offset_mapping"], strict=True))  # fmt: skip
