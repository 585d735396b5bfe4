"""Real DeepSpeed pretraining on CPU with a tiny model: one rank, resume, two ranks under ZeRO-3."""

from __future__ import annotations

import json
import math
import re
import shutil
import sys
from pathlib import Path

import pytest
import torch
from _training_fixtures import REPO, metrics, pretrain_yaml, run_command, trained_run
from safetensors.torch import load_file

from kplm.errors import KplmError
from kplm.training import launch_pretraining
from kplm.training.engine import free_port
from kplm.training.pretrain import main as pretrain_main
from kplm.training.safe_load import safe_torch_load

LINE = re.compile(
    r"^\[kplm\] step (\d+)/(\d+) \| loss \d+\.\d{4} \| lr \d\.\d{3}e[-+]\d\d \| grad_norm \d+\.\d{3} "
    r"\| tok/s [\d,]+ \| (rss|mem) \d+\.\d\dGiB$"
)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return trained_run(tmp_path_factory.getbasetemp() / "kplm_training")


def test_single_rank_run_logs_evaluates_and_checkpoints(run: dict[str, Path]) -> None:
    out = run["run"]
    train, evals = metrics(out), metrics(out, "eval")
    assert sorted(train) == [1, 2, 3, 4, 5, 6] and sorted(evals) == [3, 6]
    assert all(math.isfinite(e["loss"]) and e["grad_norm"] > 0 for e in train.values())
    assert evals[6]["valid_loss"] < evals[3]["valid_loss"] < math.log(3000) + 0.5  # it learns
    assert [round(train[s]["lr"], 6) for s in (1, 3, 6)] == [round(1e-3 / 3, 6), 1e-3, 2.5e-4]
    ckpts = out / "checkpoints"
    assert sorted(p.name for p in ckpts.glob("step_*")) == ["step_00000004", "step_00000006"]  # keep_last 2
    assert (ckpts / "latest").read_text().strip() == "step_00000006"
    tag = ckpts / "step_00000006"
    for name in ("model.safetensors", "config.json", "trainer_state.json", "mp_rank_00_model_states.pt"):
        assert (tag / name).is_file(), name
    state = json.loads((tag / "trainer_state.json").read_text())
    assert (
        state["step"] == 6
        and state["tokens_seen"] == 6 * 16 * 64
        and state["valid_loss"] == evals[6]["valid_loss"]
    )
    resolved = json.loads((ckpts / "resolved_config.json").read_text())
    assert resolved["deepspeed"]["gradient_accumulation_steps"] == 2 and "torch" in resolved["versions"]
    assert Path(resolved["config"]["tokenizer"]).is_absolute()
    record = json.loads((out / "kplm_record.json").read_text())
    assert record["stage"] == "pretrain" and record["counts"]["steps"] == 6
    # the consolidated weights are the trained module's weights (DeepSpeed's own ZeRO-0 state)
    module = torch.load(tag / "mp_rank_00_model_states.pt", map_location="cpu", weights_only=True)["module"]
    weights = load_file(tag / "model.safetensors")
    assert weights and all(torch.equal(w, module["mlm." + k]) for k, w in weights.items())


def test_resume_reproduces_the_uninterrupted_run(run: dict[str, Path], tmp_path: Path) -> None:
    """Resume from step 4 through the deepspeed launcher; steps 5-6 must match the uninterrupted run."""
    out = tmp_path / "resumed"
    (out / "checkpoints").mkdir(parents=True)
    shutil.copytree(run["run"] / "checkpoints" / "step_00000004", out / "checkpoints" / "step_00000004")
    config = pretrain_yaml(tmp_path / "resume.yaml", run, out)
    launch_pretraining(config, nproc=1)
    first, again = metrics(run["run"]), metrics(out)
    assert sorted(again) == [5, 6]
    for step in (5, 6):
        assert (
            again[step]["loss"] == first[step]["loss"]
            and again[step]["grad_norm"] == first[step]["grad_norm"]
        )
    assert metrics(out, "eval")[6]["valid_loss"] == metrics(run["run"], "eval")[6]["valid_loss"]
    a = load_file(run["run"] / "checkpoints" / "step_00000006" / "model.safetensors")
    b = load_file(out / "checkpoints" / "step_00000006" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    launch_pretraining(config, nproc=1)  # complete for the same settings: skipped without starting ranks
    assert sorted(metrics(out)) == [5, 6]


def test_two_ranks_zero3_through_launch_script(run: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "zero3"
    config = pretrain_yaml(
        tmp_path / "z3.yaml",
        run,
        out,
        model={"arch": "roberta"},
        zero_stage=3,
        grad_accum=1,
        max_steps=3,
        wandb={"mode": "offline", "project": "kplm-test"},
    )
    deepspeed = str(Path(sys.executable).with_name("deepspeed"))
    port = str(free_port())
    result = run_command(
        [deepspeed, "--num_gpus", "2", "--master_port", port, "launch/pretrain.py", "--config", str(config)],
        env={"WANDB_MODE": None, "WANDB_SILENT": "true"},
    )
    lines = [
        ln for ln in result.stdout.splitlines() if ln.startswith("[kplm] step") and "valid_loss" not in ln
    ]
    assert len(lines) == 3 and all(LINE.match(ln) for ln in lines), lines  # rank 0 only, fixed format
    # DeepSpeed's CPU all-reduce created a shared-memory segment per rank; none outlives the run
    assert not list(Path("/dev/shm").glob(f"deepspeed_allreduce_buffer_*_{port}_*"))
    tag = out / "checkpoints" / "step_00000003"
    assert {p.name for p in tag.glob("zero_pp_rank_*_optim_states.pt")} == {
        "zero_pp_rank_0_mp_rank_00_optim_states.pt",
        "zero_pp_rank_1_mp_rank_00_optim_states.pt",
    }
    state = json.loads((tag / "trainer_state.json").read_text())
    assert state["world_size"] == 2 and state["global_batch"] == 16 and math.isfinite(state["valid_loss"])
    # rank 0's consolidated fp32 weights equal DeepSpeed's own reconstruction from the ZeRO-3 partitions
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

    reference = get_fp32_state_dict_from_zero_checkpoint(str(out / "checkpoints"), tag=tag.name)
    weights = load_file(tag / "model.safetensors")
    assert weights["roberta.embeddings.word_embeddings.weight"].shape == (3000, 64)
    assert all(torch.equal(w, reference["mlm." + k]) for k, w in weights.items())
    # wandb offline: one run, from rank 0 only, with metrics but no captured console text
    runs = list((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("*.wandb"))
    assert not (runs[0] / "files" / "output.log").exists()
    # every DeepSpeed file of the ZeRO-3 checkpoint passes the weights_only loader, and two ranks resume
    # from it (DeepSpeed's load_checkpoint through that loader) to train one more step
    for path in tag.glob("*.pt"):
        assert safe_torch_load(str(path), map_location="cpu"), path
    longer = pretrain_yaml(tmp_path / "z3b.yaml", run, out, model={"arch": "roberta"}, zero_stage=3,
                           grad_accum=1, max_steps=4)  # fmt: skip
    result = run_command(
        [
            deepspeed,
            "--num_gpus",
            "2",
            "--master_port",
            str(free_port()),
            "launch/pretrain.py",
            "--config",
            str(longer),
        ]
    )
    assert f"resumed from {tag} at step 3" in result.stdout
    assert sorted(metrics(out)) == [1, 2, 3, 4] and math.isfinite(metrics(out)[4]["loss"])


def test_bad_input_is_one_line_and_status_2(run: dict[str, Path], tmp_path: Path, capsys) -> None:
    bad = pretrain_yaml(tmp_path / "bad.yaml", run, tmp_path / "out", seq_len=128)
    assert pretrain_main(["--config", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("kplm: error: seq_len: 128, but") and "\n" not in err
    with pytest.raises(KplmError, match=r"max_steps: must be at least 1"):
        launch_pretraining(pretrain_yaml(tmp_path / "bad2.yaml", run, tmp_path / "o", max_steps=0), nproc=1)
    assert REPO.joinpath("launch", "pretrain.py").is_file()
