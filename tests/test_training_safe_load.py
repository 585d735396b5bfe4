"""Resume reads DeepSpeed's checkpoint files with ``torch.load(weights_only=True)``: DeepSpeed's own plain
classes load, any other pickled object is refused with a one-line error before it can run."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _training_fixtures import REPO, pretrain_yaml, trained_run

from kplm.errors import KplmError


class Planted:
    """A pickled object whose unpickling runs code (here: creates a marker file)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_deepspeed_classes_load_and_other_objects_are_refused(tmp_path: Path) -> None:
    from deepspeed.runtime.fp16.loss_scaler import CreateLossScaler, DynamicLossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum
    from deepspeed.utils.tensor_fragment import fragment_address

    from kplm.training.safe_load import SafeTorchCheckpointEngine, safe_torch_load

    # what DeepSpeed's ZeRO 1-3 optimizer states pickle besides tensors (fp16 runs: the dynamic scaler)
    state = {
        "optimizer_state_dict": {
            "loss_scaler": CreateLossScaler(torch.float32, 1.0, False, None),
            "dynamic_loss_scaler": DynamicLossScaler(2.0**16, 1000, 1.0, 2, False),
            "zero_stage": ZeroStageEnum.gradients,
        },
        "param_slice_mappings": [{"mlm.weight": fragment_address(numel=12, start=4)}],
        "exp_avg": torch.arange(6.0),
    }
    good = tmp_path / "good.pt"
    torch.save(state, good)
    loaded = SafeTorchCheckpointEngine().load(str(good), map_location="cpu")
    opt = loaded["optimizer_state_dict"]
    assert opt["zero_stage"] is ZeroStageEnum.gradients and opt["loss_scaler"].cur_scale == 1.0
    assert opt["dynamic_loss_scaler"].dynamic and opt["dynamic_loss_scaler"].dtype == torch.float16
    assert loaded["param_slice_mappings"][0]["mlm.weight"] == fragment_address(numel=12, start=4)
    assert torch.equal(loaded["exp_avg"], torch.arange(6.0))

    marker = tmp_path / "ran"
    bad = tmp_path / "bad.pt"
    torch.save({"module": {"w": torch.zeros(2)}, "extra": Planted(marker)}, bad)
    with pytest.raises(
        KplmError, match=r"bad\.pt: refused to load this checkpoint file.*\(not allowed: getattr\)"
    ):
        safe_torch_load(str(bad))
    assert not marker.exists()
    torch.load(bad, weights_only=False)  # what DeepSpeed itself would do: the planted code runs
    assert marker.exists()

    cut = tmp_path / "cut.pt"
    cut.write_bytes(good.read_bytes()[:100])
    with pytest.raises(KplmError, match=r"cut\.pt: unreadable checkpoint file"):
        safe_torch_load(str(cut))
    with pytest.raises(pickle.UnpicklingError):  # the plain loader refuses too, but with a long message
        torch.load(bad, weights_only=True)


def test_resume_refuses_a_checkpoint_with_a_planted_object(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """A real run's DeepSpeed model-state file with one object added: the resumed run stops with status 2
    and one line naming the file, and the object's code never runs."""
    run = trained_run(tmp_path_factory.getbasetemp() / "kplm_training")
    out = tmp_path / "resumed"
    tag = out / "checkpoints" / "step_00000004"
    shutil.copytree(run["run"] / "checkpoints" / "step_00000004", tag)
    states = tag / "mp_rank_00_model_states.pt"
    content = torch.load(states, map_location="cpu", weights_only=True)
    marker = tmp_path / "ran"
    content["planted"] = Planted(marker)
    torch.save(content, states)
    config = pretrain_yaml(tmp_path / "resume.yaml", run, out)
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "kplm.training.pretrain", "--config", str(config)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr[-3000:]
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("kplm: error: ") and "refused to load this checkpoint file" in error, error
    assert str(states) in error
    assert not marker.exists()
