"""KorSTS without fine-tuning: Pearson of the cosine between mean-pooled token states of the two sentences.

A reference point for the study's fine-tuned KorSTS scores: how much of KorSTS a model's token embeddings
(layer 0) and last hidden states give with no training on the task at all. With random weights the layer-0
cosine is a bag-of-tokens overlap measure, so it tells how far plain lexical overlap goes on the split.
Prints one JSON object.

    python bench/bench_sts_zero_shot.py --model runs/study-cpu/morpheme/model runs/study-cpu/random_init/model
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np
import torch

KORSTS = Path(__file__).resolve().parents[2] / "shared" / "data" / "korsts"


def read_pairs(path: Path) -> tuple[list[str], list[str], np.ndarray]:
    """Sentence pairs and gold scores of a KorSTS TSV file (columns sentence1, sentence2, score)."""
    with path.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return (
        [r["sentence1"] for r in rows],
        [r["sentence2"] for r in rows],
        np.array([float(r["score"]) for r in rows]),
    )


def mean_pooled(model: torch.nn.Module, tokenizer, texts: list[str], layer: int) -> torch.Tensor:  # noqa: ANN001
    """Mean of the non-padding token states of ``layer`` (0 = embeddings output) for each text."""
    pooled = []
    for start in range(0, len(texts), 64):
        enc = tokenizer(
            texts[start : start + 64], padding=True, truncation=True, max_length=128, return_tensors="pt"
        )
        with torch.no_grad():
            states = model(
                input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], output_hidden_states=True
            ).hidden_states[layer]
        mask = enc["attention_mask"].unsqueeze(-1).float()
        pooled.append((states * mask).sum(1) / mask.sum(1))
    return torch.cat(pooled)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", required=True, help="Hugging Face model folders")
    parser.add_argument("--split", type=Path, default=KORSTS / "sts-dev.tsv", help="KorSTS TSV file")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    from transformers import AutoModel, AutoTokenizer

    torch.set_num_threads(args.threads)
    first, second, gold = read_pairs(args.split)
    results = {}
    for folder in args.model:
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModel.from_pretrained(folder).eval()
        scores = {}
        for name, layer in (("embeddings", 0), ("last_layer", -1)):
            cosine = torch.nn.functional.cosine_similarity(
                mean_pooled(model, tokenizer, first, layer), mean_pooled(model, tokenizer, second, layer)
            ).numpy()
            scores[name] = round(float(np.corrcoef(cosine, gold)[0, 1]) * 100, 2)
        results[folder] = scores
    print(json.dumps({"benchmark": "korsts_zero_shot", "split": str(args.split), "pairs": len(gold),
                      "pearson_x100": results}, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
