"""Pretrain a Korean BERT/RoBERTa masked LM with DeepSpeed: the entry point every rank runs.

    deepspeed --num_gpus 8 launch/pretrain.py --config pretrain.yaml          # one machine
    deepspeed --hostfile launch/hostfile.example launch/pretrain.py --config pretrain.yaml
    sbatch launch/slurm_pretrain.sbatch pretrain.yaml                         # Slurm, several nodes

The YAML is one ``kplm.training.config.PretrainConfig`` mapping. All the logic lives in
``kplm.training``; this file only shows the order of things. Re-running the same command resumes from the
newest checkpoint in ``<output>/checkpoints``. SIGTERM or SIGINT (Ctrl-C) makes every rank finish the
current step, checkpoint it and exit with status 128 + the signal number.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kplm.errors import KplmError
from kplm.training.config import load_pretrain_config
from kplm.training.pretrain import Trainer
from kplm.training.signals import Interrupted


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, type=Path, help="pretraining YAML (PretrainConfig)")
    parser.add_argument("--local_rank", "--local-rank", type=int, default=None, help="set by deepspeed")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    trainer = None
    try:
        config = load_pretrain_config(args.config)  # 1. validated config (errors name the field)
        trainer = Trainer(config)  # 2. tokenizer and packed data checked against each other
        trainer.setup(args.local_rank)  # 3. launcher env, torch.distributed, model, DeepSpeed engine, data
        trainer.fit()  # 4. resume, train, evaluate, checkpoint, write the record
    except KplmError as e:
        print(f"kplm: error: {e}", file=sys.stderr, flush=True)
        return 2
    except Interrupted as e:  # SIGTERM/SIGINT: the current step was checkpointed; rerun to resume
        return e.exit_status
    finally:
        if trainer is not None:
            trainer.close()
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()  # 5. clean exit of every rank
    return 0


if __name__ == "__main__":
    sys.exit(main())
