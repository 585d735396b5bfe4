#!/bin/bash
# KLUE-NLI on the premise-grouped split for the study's four pretrained/random models, with the study's own
# fine-tuning settings (study-cpu.yaml: finetune). Run from the repository root after
# `kplm study pipeline/configs/study-cpu.yaml` (it reads that run's models and data); session 5, 05:10-05:23 UTC.
set -euo pipefail
for arm in morpheme random_init plain_bpe pii_off; do for s in 1 2; do
  kplm evaluate --model runs/study-cpu/$arm/model --output runs/study-cpu-nli-grouped/$arm/seed-$s \
    --data-dir runs/study-cpu/data --tasks klue-nli --epochs 5 --lr 1e-4 --max-train-examples 2000 \
    --split-ratio 0.8 --select last --seed $s --threads 2 --no-save-models
done; done
