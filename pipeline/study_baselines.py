"""Reference losses for a study's pretraining: what a masked LM scores without using context (unigram) and
what one neighbour of context already gives (left bigram), computed from a ``kplm pack`` folder."""

from __future__ import annotations

import json
from pathlib import Path


def context_free_baselines(packed: Path, bigram_weight: float = 0.9) -> dict[str, float] | None:
    """Two reference cross-entropies (nats) of a pack's held-out real tokens, from training-split counts.

    ``unigram``: token frequencies (add-one smoothed), what a masked LM that ignores its input scores.
    ``bigram``: the left neighbour's next-token frequencies mixed with the unigram (weight ``bigram_weight``,
    fixed, not tuned), a floor that one-neighbour context already reaches. Held-out MLM loss between the
    two means the model has learned frequencies but little context. Special tokens and padding are left
    out of both sides. None without the pack's arrays.
    """
    import numpy as np

    meta_path, train_path, valid_path = (packed / n for n in ("pack_meta.json", "train.npy", "valid.npy"))
    if not (meta_path.is_file() and train_path.is_file() and valid_path.is_file()):
        return None
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    vocab = int(meta["vocab_size"])
    is_special = np.zeros(vocab, dtype=bool)
    is_special[[i for i in meta["special_ids"]["all"] if 0 <= i < vocab]] = True

    def neighbours(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        left, right = rows[:, :-1].ravel(), rows[:, 1:].ravel()
        keep = ~is_special[left] & ~is_special[right]
        return left[keep], right[keep]

    unigram = np.ones(vocab, dtype=np.float64)
    left_counts = np.zeros(vocab, dtype=np.float64)
    pair_keys: list[np.ndarray] = []
    train = np.load(train_path, mmap_mode="r")
    for start in range(0, len(train), 65536):
        rows = np.asarray(train[start : start + 65536]).astype(np.int64)
        unigram += np.bincount(rows.ravel(), minlength=vocab)[:vocab]
        left, right = neighbours(rows)
        left_counts += np.bincount(left, minlength=vocab)[:vocab]
        pair_keys.append(left * vocab + right)
    unigram[is_special] = 0.0
    p_unigram = unigram / unigram.sum()
    pairs, pair_counts = np.unique(np.concatenate(pair_keys), return_counts=True)
    valid = np.asarray(np.load(valid_path)).astype(np.int64)
    tokens = valid.ravel()[~is_special[valid.ravel()]]
    left, right = neighbours(valid)
    if not tokens.size or not left.size:
        return None
    key = left * vocab + right
    where = np.minimum(np.searchsorted(pairs, key), len(pairs) - 1)
    seen = np.where(pairs[where] == key, pair_counts[where], 0)
    p_bigram = (
        bigram_weight * seen / np.maximum(left_counts[left], 1) + (1 - bigram_weight) * p_unigram[right]
    )
    return {"unigram": float(-np.log(p_unigram[tokens]).mean()), "bigram": float(-np.log(p_bigram).mean())}
