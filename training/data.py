"""Batches for pretraining: memory-mapped packed sequences, a seeded order and dynamic masking.

Every batch is a pure function of ``(seed, step, micro-step, rank)``: the order of the training sequences
is a fixed permutation per epoch, each optimizer step takes the next global batch from it and each
data-parallel rank a disjoint slice of that batch; masking draws from a generator seeded by the same key.
So a resumed run sees exactly the batches an uninterrupted one would, without saving any data-loader state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kplm.errors import KplmError
from kplm.training.pack import STARTS_SUFFIX, read_meta

IGNORE_INDEX = -100
_TRAIN, _EVAL = 0, 1


def seed_sequence(*key: int) -> np.random.SeedSequence:
    """The seed sequence of one batch key, e.g. ``(seed, 0, step, rank, micro)``."""
    return np.random.SeedSequence([int(k) for k in key])


def torch_seed(ss: np.random.SeedSequence) -> int:
    """A 63-bit integer for ``torch.manual_seed`` (dropout) derived from a batch's seed sequence."""
    hi, lo = (int(x) for x in ss.spawn(1)[0].generate_state(2))
    return ((hi << 32) | lo) & (2**63 - 1)


def continuation_ids(tokenizer: Any) -> list[int]:
    """Ids of the vocabulary pieces that continue the eojeol of the piece before them.

    WordPiece vocabularies (kplm's plain and morpheme-aware ones) mark continuations with ``##``: every
    ``##`` piece belongs to the eojeol of the word-initial piece before it. Metaspace BPE vocabularies
    (``--model bpe``) mark eojeol starts with ``▁`` instead, so there every ordinary piece without ``▁`` is
    a continuation. Either way eojeol spans follow from the ids alone; empty if neither scheme is found.
    """
    vocab = tokenizer.get_vocab()
    if any(piece.startswith("##") for piece in vocab):
        return sorted(i for piece, i in vocab.items() if piece.startswith("##"))
    if any(piece.startswith("\u2581") for piece in vocab):
        special = set(tokenizer.all_special_ids)
        return sorted(i for piece, i in vocab.items() if not piece.startswith("\u2581") and i not in special)
    return []


@dataclass
class Masker:
    """BERT's dynamic masking: choose ``prob`` of the non-special tokens; 80% → [MASK], 10% random, 10% kept.

    With ``whole_eojeol`` the choice is made per eojeol (a word-initial piece and the continuation pieces
    after it, from :func:`continuation_ids`): each eojeol is chosen with probability ``prob``, so the expected
    share of chosen tokens stays ``prob`` and a chosen eojeol is never split; the 80/10/10 rule then applies
    per token. ``whole_morpheme`` does the same per MeCab-ko morpheme (a token that starts a morpheme and
    the tokens up to the next start), read from the pack's morpheme-start flags passed as ``starts``.
    """

    mask_id: int
    special_ids: list[int]
    vocab_size: int
    prob: float = 0.15
    whole_eojeol: bool = False
    continuation_ids: list[int] = field(default_factory=list)
    whole_morpheme: bool = False

    def __post_init__(self) -> None:
        self._special = np.asarray(sorted(set(self.special_ids)), dtype=np.int64)
        candidates = np.setdiff1d(np.arange(self.vocab_size, dtype=np.int64), self._special)
        if not len(candidates):
            raise KplmError("the tokenizer has no ordinary tokens to use for random replacement")
        self._candidates = candidates
        self._is_special = np.zeros(self.vocab_size, dtype=bool)
        self._is_special[self._special[self._special < self.vocab_size]] = True
        self._is_continuation = np.zeros(self.vocab_size, dtype=bool)
        cont = np.asarray(self.continuation_ids, dtype=np.int64)
        self._is_continuation[cont[(cont >= 0) & (cont < self.vocab_size)]] = True
        if self.whole_eojeol and not self._is_continuation.any():
            raise KplmError("masking: eojeol needs a vocabulary with ## continuations or ▁ word starts")
        if self.whole_eojeol and self.whole_morpheme:
            raise KplmError("masking: choose whole eojeols or whole morphemes, not both")

    def word_ids(self, ids: np.ndarray) -> np.ndarray:
        """A running eojeol number per token (row-major over ``ids``): a new one at every word-initial piece,
        special token, ``##`` piece after a special token and row start."""
        ids = np.asarray(ids, dtype=np.int64)
        return self._span_ids(ids, ~self._is_continuation[ids])

    def morpheme_ids(self, ids: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """A running morpheme number per token: a new one at every token flagged in ``starts`` (the pack's
        morpheme starts), special token, token after a special token and row start."""
        ids = np.asarray(ids, dtype=np.int64)
        starts = np.asarray(starts)
        if starts.shape != ids.shape:
            raise KplmError(f"morpheme starts of shape {starts.shape} do not match the ids' {ids.shape}")
        return self._span_ids(ids, starts.astype(bool))

    def _span_ids(self, ids: np.ndarray, start: np.ndarray) -> np.ndarray:
        special = self._is_special[ids]
        start = start | special
        start[..., 0] = True
        start[..., 1:] |= special[..., :-1]
        return np.cumsum(start.ravel()).reshape(ids.shape) - 1

    def __call__(
        self, ids: np.ndarray, rng: np.random.Generator, starts: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(input_ids, labels)``; labels are the original ids at chosen positions, -100 elsewhere.

        ``starts`` (morpheme-start flags, same shape as ``ids``) is needed with ``whole_morpheme`` only.
        """
        ids = np.asarray(ids, dtype=np.int64)
        special = self._is_special[ids]
        if self.whole_eojeol or self.whole_morpheme:
            if self.whole_morpheme:
                if starts is None:
                    raise KplmError("masking: morpheme needs the pack's morpheme starts")
                spans = self.morpheme_ids(ids, starts)
            else:
                spans = self.word_ids(ids)
            chosen = (rng.random(int(spans.max()) + 1) < self.prob)[spans] & ~special
        else:
            chosen = (rng.random(ids.shape) < self.prob) & ~special
        labels = np.where(chosen, ids, IGNORE_INDEX)
        roll = rng.random(ids.shape)
        inputs = ids.copy()
        inputs[chosen & (roll < 0.8)] = self.mask_id
        swap = chosen & (roll >= 0.8) & (roll < 0.9)
        inputs[swap] = self._candidates[rng.integers(0, len(self._candidates), size=int(swap.sum()))]
        return inputs, labels


class PackedData:
    """The ``train.npy`` / ``valid.npy`` arrays of a ``kplm pack`` folder, memory-mapped, with batch helpers."""

    def __init__(
        self,
        folder: Path,
        *,
        seq_len: int,
        micro_batch_size: int,
        grad_accum: int,
        world_size: int,
        rank: int,
        seed: int,
        masker: Masker,
        pad_id: int,
    ):
        folder = Path(folder)
        self.meta = read_meta(folder)
        if self.meta["seq_len"] != seq_len:
            raise KplmError(
                f"seq_len: {seq_len}, but {folder} was packed with seq_len {self.meta['seq_len']}"
            )
        self.train = self._open(folder / "train.npy", seq_len)
        self.valid = self._open(folder / "valid.npy", seq_len)
        self.train_starts = self.valid_starts = None
        if masker.whole_morpheme:
            if not self.meta.get("morpheme_boundaries"):
                raise KplmError(
                    f"masking: morpheme needs morpheme boundaries, but {folder} was packed without them "
                    "(pack again with morpheme_boundaries: true)"
                )
            self.train_starts = self._open(folder / f"train{STARTS_SUFFIX}", seq_len, len(self.train))
            self.valid_starts = self._open(folder / f"valid{STARTS_SUFFIX}", seq_len, len(self.valid))
        self.micro, self.accum, self.world, self.rank = micro_batch_size, grad_accum, world_size, rank
        self.seed, self.masker, self.pad_id = seed, masker, pad_id
        self.global_batch = micro_batch_size * grad_accum * world_size
        self._perms: dict[int, np.ndarray] = {}

    @staticmethod
    def _open(path: Path, seq_len: int, rows: int | None = None) -> np.ndarray:
        try:
            array = np.load(path, mmap_mode="r")
        except (OSError, ValueError) as e:
            raise KplmError(f"{path}: cannot memory-map the packed array ({e})") from None
        if array.ndim != 2 or array.shape[1] != seq_len or rows not in (None, len(array)):
            raise KplmError(f"{path}: expected shape ({rows or 'n'}, {seq_len}), got {array.shape}")
        if len(array) == 0:
            raise KplmError(f"{path}: holds no sequences")
        return array

    def _order(self, positions: np.ndarray) -> np.ndarray:
        """Map global sample positions to rows of ``train``: a fresh seeded permutation every epoch."""
        n = len(self.train)
        epochs, offsets = np.divmod(positions, n)
        rows = np.empty_like(positions)
        for epoch in np.unique(epochs):
            perm = self._perms.get(int(epoch))
            if perm is None:
                perm = np.random.default_rng(seed_sequence(self.seed, _TRAIN, 2**31, int(epoch))).permutation(
                    n
                )
                self._perms = {k: v for k, v in self._perms.items() if k >= epoch - 1}
                self._perms[int(epoch)] = perm
            where = epochs == epoch
            rows[where] = perm[offsets[where]]
        return rows

    def train_rows(self, step: int, micro: int) -> np.ndarray:
        """Row indices of this rank's micro-batch ``micro`` of optimizer step ``step`` (0-based)."""
        start = step * self.global_batch + (micro * self.world + self.rank) * self.micro
        return self._order(np.arange(start, start + self.micro, dtype=np.int64))

    def train_batch(self, step: int, micro: int) -> tuple[dict[str, Any], int]:
        """This rank's masked micro-batch for ``(step, micro)`` and the torch seed for its dropout."""
        ss = seed_sequence(self.seed, _TRAIN, step, self.rank, micro)
        rows = np.sort(self.train_rows(step, micro))
        starts = None if self.train_starts is None else np.asarray(self.train_starts[rows])
        return self._masked(np.asarray(self.train[rows]), np.random.default_rng(ss), starts), torch_seed(ss)

    def eval_batches(self, max_batches: int) -> tuple[int, list[int | None]]:
        """Plan an evaluation: the number of forward passes every rank makes and this rank's batch numbers.

        Held-out micro-batches are dealt round-robin to ranks; a rank with fewer real batches than the
        others gets ``None`` entries (it runs a discarded forward pass so collective ops stay in step).
        """
        total = min(-(-len(self.valid) // self.micro), max_batches * self.world)
        per_rank = -(-total // self.world)
        mine = [j if j < total else None for j in range(self.rank, per_rank * self.world, self.world)]
        return per_rank, mine

    def eval_batch(self, j: int) -> dict[str, Any]:
        """Held-out micro-batch ``j`` with a fixed masking, identical in every evaluation."""
        part = slice(j * self.micro, (j + 1) * self.micro)
        starts = None if self.valid_starts is None else np.asarray(self.valid_starts[part])
        rng = np.random.default_rng(seed_sequence(self.seed, _EVAL, j))
        return self._masked(np.asarray(self.valid[part]), rng, starts)

    def _masked(self, ids: np.ndarray, rng: np.random.Generator, starts: np.ndarray | None) -> dict[str, Any]:
        import torch

        inputs, labels = self.masker(ids, rng, starts)
        return {
            "input_ids": torch.from_numpy(inputs),
            "attention_mask": torch.from_numpy((ids != self.pad_id).astype(np.int64)),
            "labels": torch.from_numpy(labels),
        }
