"""Stopping and resuming: SIGTERM checkpoints the current step and a rerun continues the exact loss
sequence; ZeRO 0 and 2 on two CPU ranks agree; whole-eojeol masking never splits an eojeol."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _training_fixtures import REPO, SPECIALS, metrics, nsmc_texts, pretrain_yaml, run_command, workspace
from safetensors.torch import load_file

from kplm.errors import KplmError
from kplm.training.config import load_pretrain_config
from kplm.training.data import IGNORE_INDEX, Masker, continuation_ids
from kplm.training.engine import free_port
from kplm.training.pack import load_tokenizer, read_meta
from kplm.training.pretrain import check_resumable, resume_settings
from kplm.training.safe_load import safe_torch_load


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return workspace(tmp_path_factory.getbasetemp() / "kplm_training")


def _eojeol_spans(tokens: list[str], specials: set[str]) -> list[tuple[int, int]]:
    """Spans [start, end) of word-initial pieces with their ``##`` pieces, read from the token strings."""
    spans: list[tuple[int, int]] = []
    for i, token in enumerate(tokens):
        if token in specials:
            continue
        if token.startswith("##") and spans and spans[-1][1] == i and tokens[i - 1] not in specials:
            spans[-1] = (spans[-1][0], i + 1)
        else:
            spans.append((i, i + 1))
    return spans


def test_whole_eojeol_masking_statistics(ws: dict[str, Path]) -> None:
    meta = read_meta(ws["packed"])
    ids = meta["special_ids"]
    tokenizer = load_tokenizer(ws["tokenizer"])
    rows = np.asarray(np.load(ws["packed"] / "train.npy"), dtype=np.int64)[:600]
    common = {"mask_id": ids["mask"], "special_ids": ids["all"], "vocab_size": meta["vocab_size"]}
    cont = continuation_ids(tokenizer)
    eojeol = Masker(**common, prob=0.15, whole_eojeol=True, continuation_ids=cont)
    inputs, labels = eojeol(rows, np.random.default_rng(1))
    chosen = labels != IGNORE_INDEX
    special = np.isin(rows, ids["all"])
    assert not (chosen & special).any() and (labels[chosen] == rows[chosen]).all()
    assert (inputs[~chosen] == rows[~chosen]).all()
    share = chosen.sum() / (~special).sum()
    assert abs(share - 0.15) < 0.01, share
    masked, kept = (inputs[chosen] == ids["mask"]).mean(), (inputs[chosen] == rows[chosen]).mean()
    assert abs(masked - 0.8) < 0.015 and abs(kept - 0.1) < 0.015, (masked, kept)
    # every eojeol is chosen whole or not at all, and many chosen eojeols have several pieces
    token_mode = Masker(**common, prob=0.15)(rows, np.random.default_rng(1))[1] != IGNORE_INDEX
    specials = set(tokenizer.all_special_tokens)
    multi = split_by_token_mode = 0
    for r, row in enumerate(rows.tolist()):
        for start, end in _eojeol_spans(tokenizer.convert_ids_to_tokens(row), specials):
            span = chosen[r, start:end]
            assert span.all() or not span.any(), (r, start, end)
            multi += int(span.all() and end - start > 1)
            split_by_token_mode += int(0 < token_mode[r, start:end].sum() < end - start)
    assert multi > 200 and split_by_token_mode > 200, (multi, split_by_token_mode)
    with pytest.raises(KplmError, match="masking: eojeol needs a vocabulary"):
        Masker(**common, whole_eojeol=True, continuation_ids=[])


def test_eojeols_of_a_metaspace_bpe_vocabulary_are_its_words() -> None:
    """BPE with ``▁`` word starts (kplm's ``--model bpe``): the masker's eojeols are the whitespace words."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    texts = nsmc_texts(2000)
    bpe = Tokenizer(models.BPE(unk_token="[UNK]"))
    bpe.pre_tokenizer = pre_tokenizers.Metaspace()
    bpe.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=1500, special_tokens=SPECIALS))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, unk_token="[UNK]", pad_token="[PAD]",
                                        cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")  # fmt: skip
    masker = Masker(mask_id=tokenizer.mask_token_id, special_ids=tokenizer.all_special_ids,
                    vocab_size=len(tokenizer), whole_eojeol=True, continuation_ids=continuation_ids(tokenizer))  # fmt: skip
    for text in texts[:300]:
        text = " ".join(text.split())  # a run of spaces would add a bare "▁" token
        encoding = tokenizer(text, add_special_tokens=False)
        ours = masker.word_ids(np.asarray(encoding["input_ids"]))
        theirs = encoding.word_ids()
        assert len(set(ours)) == len(text.split()) and (np.diff(ours) > 0).tolist() == [
            b != a for a, b in zip(theirs, theirs[1:], strict=False)
        ], text


def test_resume_accepts_settings_added_later_only_at_their_default(
    ws: dict[str, Path], tmp_path: Path
) -> None:
    """A checkpoint written before ``masking`` existed resumes with masking: token, not with eojeol."""
    ckpts = tmp_path / "out" / "checkpoints"
    (ckpts / "step_00000002").mkdir(parents=True)
    (ckpts / "step_00000002" / "trainer_state.json").write_text('{"step": 2}')
    config = load_pretrain_config(pretrain_yaml(tmp_path / "c.yaml", ws, tmp_path / "out"))
    before = json.loads(json.dumps(resume_settings(config), default=str))
    del before["masking"]
    (ckpts / "resolved_config.json").write_text(json.dumps({"resume_settings": before}))
    check_resumable(config, ckpts)
    eojeol = dataclasses.replace(config, masking="eojeol")
    with pytest.raises(KplmError, match=r"other settings \(masking: None → eojeol\)"):
        check_resumable(eojeol, ckpts)


def _env(**extra: str) -> dict[str, str]:
    # one thread for every run: float sums then do not depend on how many threads a run got
    return {**os.environ, "DS_ACCELERATOR": "cpu", "PYTHONUNBUFFERED": "1", "WANDB_MODE": "disabled",
            "OMP_NUM_THREADS": "1", **extra}  # fmt: skip


def test_sigterm_checkpoints_the_current_step_and_resume_is_exact(
    ws: dict[str, Path], tmp_path: Path
) -> None:
    """Run B is stopped by SIGTERM after step 3 and rerun; its losses equal uninterrupted run A's."""
    settings = {
        "masking": "eojeol",
        "max_steps": 40,
        "warmup_steps": 4,
        "save_every": 100,
        "eval_every": 100,
        "keep_last": 1,
    }
    cmd = [sys.executable, "-m", "kplm.training.pretrain", "--config"]
    config_a = pretrain_yaml(tmp_path / "a.yaml", ws, tmp_path / "a", **settings)
    config_b = pretrain_yaml(tmp_path / "b.yaml", ws, tmp_path / "b", **settings)
    run_a = subprocess.Popen([*cmd, str(config_a)], cwd=REPO, env=_env(), stdout=subprocess.DEVNULL)
    run_b = subprocess.Popen([*cmd, str(config_b)], cwd=REPO, env=_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert run_b.stdout is not None
        for line in run_b.stdout:
            if line.startswith("[kplm] step 3/"):
                run_b.send_signal(signal.SIGTERM)
                break
        rest = run_b.stdout.read()
        assert run_b.wait(timeout=120) == 128 + signal.SIGTERM, rest
        assert run_a.wait(timeout=300) == 0
    finally:
        for proc in (run_a, run_b):
            if proc.poll() is None:
                proc.kill()
    stopped = int(re.search(r"stopped by SIGTERM at step (\d+)", rest).group(1))
    assert 3 <= stopped < 40
    tag = tmp_path / "b" / "checkpoints" / f"step_{stopped:08d}"
    assert json.loads((tag / "trainer_state.json").read_text())["step"] == stopped
    assert not (tmp_path / "b" / "kplm_record.json").exists()  # the run is not finished
    resolved = json.loads((tmp_path / "b" / "checkpoints" / "resolved_config.json").read_text())
    assert resolved["config"]["masking"] == "eojeol"
    assert "kplm_git" in resolved["versions"] or not (REPO / ".git").exists()
    result = run_command([*cmd, str(config_b)], env={"OMP_NUM_THREADS": "1"})
    assert f"resumed from {tag} at step {stopped}" in result.stdout
    a, b = metrics(tmp_path / "a"), metrics(tmp_path / "b")
    assert sorted(a) == sorted(b) == list(range(1, 41))
    assert [(b[s]["loss"], b[s]["grad_norm"]) for s in b] == [(a[s]["loss"], a[s]["grad_norm"]) for s in b]
    wa = load_file(tmp_path / "a" / "checkpoints" / "step_00000040" / "model.safetensors")
    wb = load_file(tmp_path / "b" / "checkpoints" / "step_00000040" / "model.safetensors")
    assert all((wa[k] == wb[k]).all() for k in wa)


def test_two_ranks_zero0_and_zero2_agree(ws: dict[str, Path], tmp_path: Path) -> None:
    """Both stages on two CPU ranks (gloo) through the launcher, started side by side to save time."""
    deepspeed = str(Path(sys.executable).with_name("deepspeed"))
    runs = {}
    for stage in (0, 2):
        config = pretrain_yaml(
            tmp_path / f"z{stage}.yaml",
            ws,
            tmp_path / f"zero{stage}",
            zero_stage=stage,
            grad_accum=1,
            max_steps=2,
            eval_every=2,
        )
        command = [deepspeed, "--num_gpus", "2", "--master_port", str(free_port()), "launch/pretrain.py",
                   "--config", str(config)]  # fmt: skip
        runs[stage] = subprocess.Popen(
            command, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    losses, weights = {}, {}
    for stage, proc in runs.items():
        output = proc.communicate(timeout=600)[0]
        assert proc.returncode == 0, output[-6000:]
        out = tmp_path / f"zero{stage}"
        tag = out / "checkpoints" / "step_00000002"
        assert json.loads((tag / "trainer_state.json").read_text())["world_size"] == 2
        assert f"ZeRO {stage}," in output
        losses[stage] = [metrics(out)[s]["loss"] for s in (1, 2)]
        weights[stage] = load_file(tag / "model.safetensors")
        files = list(tag.glob("*.pt"))  # ZeRO 2: optimizer partitions with fragment addresses
        assert len(files) == (1 if stage == 0 else 3) and all(safe_torch_load(str(f)) for f in files)
    assert losses[0][0] == pytest.approx(losses[2][0], rel=1e-6)
    assert losses[0][1] == pytest.approx(losses[2][1], rel=1e-4)
    assert all(np.allclose(weights[0][k].numpy(), weights[2][k].numpy(), atol=1e-5) for k in weights[0])
