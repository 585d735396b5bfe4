"""Encode a corpus folder with a Hugging Face tokenizer and pack it into fixed-length training sequences.

Packing is RoBERTa's "full-sentences" scheme: the token ids of consecutive documents are laid end to end,
separated by ``[SEP]``, and cut into bodies of ``seq_len - 2`` tokens; each sequence is
``[CLS] body [SEP]``. A document longer than a body continues in the next sequence; only the last
sequence of each split is padded with ``[PAD]`` (which the model never attends to). A small share of
documents, chosen by a seeded hash of their position, goes to the held-out split instead.

Output folder: ``train.npy`` and ``valid.npy`` (2-D ``(n, seq_len)`` arrays, ``uint16`` when the vocabulary
fits, memory-mapped by training), ``pack_meta.json`` and ``kplm_record.json``.

With ``morpheme_boundaries`` each document is also analysed with MeCab-ko and a parallel ``uint8`` array per
split (``train_morpheme_starts.npy``, same shape as ``train.npy``) records 1 where a token starts a MeCab
morpheme (its first character, from the fast tokenizer's offset mapping, is a morpheme start) and 0 where it
continues one; special tokens and padding are 1. Morpheme-span masking (``masking: morpheme``) reads it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
from numpy.lib.format import open_memmap

from kplm.config import fingerprint
from kplm.corpus.shards import iter_texts, shard_files
from kplm.errors import KplmError
from kplm.records import is_complete, read_record, write_json_atomic, write_record

META_NAME = "pack_meta.json"
STARTS_SUFFIX = "_morpheme_starts.npy"
_COPY_ROWS = 65536


@dataclass(kw_only=True)
class PackConfig:
    """Sequence packing of one corpus folder with one tokenizer."""

    corpus: Path = field(metadata={"help": "corpus folder of Parquet shards (kplm corpus clean / pii scrub)"})
    tokenizer: Path = field(metadata={"help": "Hugging Face tokenizer folder with [CLS] [SEP] [PAD] [MASK]"})
    output: Path = field(metadata={"help": "output folder for train.npy, valid.npy and pack_meta.json"})
    seq_len: int = field(default=128, metadata={"help": "tokens per sequence, [CLS] and [SEP] included"})
    valid_fraction: float = field(
        default=0.01, metadata={"help": "share of documents held out for validation (at least 1 sequence)"}
    )
    batch_size: int = field(default=1000, metadata={"help": "documents per tokenizer batch call"})
    seed: int = field(default=42, metadata={"help": "seed of the train/valid document split"})
    morpheme_boundaries: bool = field(
        default=False,
        metadata={"help": "record MeCab-ko morpheme starts per token (for masking: morpheme)"},
    )

    def __post_init__(self) -> None:
        if self.seq_len < 8:
            raise ValueError(f"seq_len: must be at least 8, got {self.seq_len}")
        if not 0.0 < self.valid_fraction < 1.0:
            raise ValueError(f"valid_fraction: must be between 0 and 1, got {self.valid_fraction}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size: must be at least 1, got {self.batch_size}")


_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
)


def tokenizer_fingerprint(folder: Path) -> str:
    """A hash of the files that define a tokenizer (vocabulary, merges, settings); reports and records
    in the same folder do not count."""
    folder = Path(folder)
    digest = hashlib.sha256()
    for path in sorted(folder.iterdir()):
        if path.is_file() and (path.name in _TOKENIZER_FILES or path.suffix == ".model"):
            digest.update(path.name.encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def load_tokenizer(folder: Path) -> Any:
    """Load a fast Hugging Face tokenizer folder offline; error unless it has the special tokens we need."""
    folder = Path(folder)
    if not folder.is_dir():
        raise KplmError(f"tokenizer folder not found: {folder}")
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as e:
        raise KplmError(f"{folder}: not a loadable Hugging Face tokenizer folder ({e})") from None
    if not getattr(tokenizer, "is_fast", False):
        raise KplmError(f"{folder}: needs a fast (tokenizers-backed) tokenizer with a tokenizer.json")
    for role in ("cls", "sep", "pad", "mask"):
        if getattr(tokenizer, f"{role}_token_id") is None:
            raise KplmError(
                f"{folder}: the tokenizer has no {role} token ({role}_token in tokenizer_config.json)"
            )
    return tokenizer


def special_ids(tokenizer: Any) -> dict[str, Any]:
    """The ids of the special tokens packing and masking rely on."""
    return {
        "cls": tokenizer.cls_token_id,
        "sep": tokenizer.sep_token_id,
        "pad": tokenizer.pad_token_id,
        "mask": tokenizer.mask_token_id,
        "unk": tokenizer.unk_token_id,
        "all": sorted(set(tokenizer.all_special_ids)),
    }


def corpus_fingerprint(folder: Path) -> str:
    """Identify a corpus folder by its upstream record (when present) and its shards' names and sizes."""
    folder = Path(folder)
    record = read_record(folder) if folder.is_dir() else None
    files = shard_files(folder)
    listing = [[p.name, p.stat().st_size] + ([] if record else [p.stat().st_mtime_ns]) for p in files]
    return fingerprint(record.get("fingerprint") if record else None, listing)


def is_valid_doc(position: int, seed: int, fraction: float) -> bool:
    """Whether document number ``position`` belongs to the held-out split (a seeded hash, not a random draw)."""
    digest = hashlib.blake2b(f"{seed}:{position}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") < fraction * 2.0**64


class _Packer:
    """Turns a stream of documents' token ids into ``[CLS] body [SEP]`` rows appended to a raw file."""

    def __init__(self, path: Path, seq_len: int, ids: dict[str, Any], dtype: np.dtype, starts: bool = False):
        self.path, self.seq_len, self.dtype = path, seq_len, dtype
        self.cls, self.sep, self.pad = ids["cls"], ids["sep"], ids["pad"]
        self.body = seq_len - 2
        self.buffer: list[int] = []
        self.sequences = self.docs = self.tokens = self.padding = 0
        self._file = open(path, "wb")  # noqa: SIM115 - closed in finish()
        # morpheme-start flags, packed exactly like the ids (special tokens and padding are starts)
        self.starts_path = path.with_name(path.name + ".starts") if starts else None
        self.flags: list[int] = []
        self._starts_file = open(self.starts_path, "wb") if self.starts_path else None  # noqa: SIM115

    def add(self, ids: list[int], flags: list[int] | None = None) -> None:
        if not ids:
            return
        self.docs += 1
        self.tokens += len(ids)
        if self.buffer:
            self.buffer.append(self.sep)
            self.flags.append(1)
        self.buffer.extend(ids)
        if self._starts_file is not None:
            assert flags is not None and len(flags) == len(ids)
            self.flags.extend(flags)
        if len(self.buffer) >= self.body:
            full = len(self.buffer) // self.body * self.body
            self._emit(np.asarray(self.buffer[:full]).reshape(-1, self.body))
            self.buffer = self.buffer[full:]
            if self._starts_file is not None:
                self._emit_flags(np.asarray(self.flags[:full]).reshape(-1, self.body))
                self.flags = self.flags[full:]

    def _emit(self, bodies: np.ndarray) -> None:
        n = len(bodies)
        rows = np.empty((n, self.seq_len), dtype=self.dtype)
        rows[:, 0] = self.cls
        rows[:, 1:-1] = bodies
        rows[:, -1] = self.sep
        self._file.write(rows.tobytes())
        self.sequences += n

    def _emit_flags(self, bodies: np.ndarray) -> None:
        rows = np.ones((len(bodies), self.seq_len), dtype=np.uint8)
        rows[:, 1:-1] = bodies
        assert self._starts_file is not None
        self._starts_file.write(rows.tobytes())

    def finish(self) -> int:
        """Pad and write the last partial sequence; returns the number of rows written."""
        if self.buffer:
            row = np.full((1, self.seq_len), self.pad, dtype=self.dtype)
            row[0, 0] = self.cls
            row[0, 1 : 1 + len(self.buffer)] = self.buffer
            row[0, 1 + len(self.buffer)] = self.sep
            self.padding += self.seq_len - len(self.buffer) - 2
            self._file.write(row.tobytes())
            self.sequences += 1
            self.buffer = []
            if self._starts_file is not None:
                flags = np.ones((1, self.seq_len), dtype=np.uint8)
                flags[0, 1 : 1 + len(self.flags)] = self.flags
                self._starts_file.write(flags.tobytes())
                self.flags = []
        self._file.close()
        if self._starts_file is not None:
            self._starts_file.close()
        return self.sequences

    def counts(self) -> dict[str, int]:
        return {
            "sequences": self.sequences,
            "documents": self.docs,
            "tokens": self.tokens,
            "padding": self.padding,
        }


def token_morpheme_starts(
    text: str, offsets: list[tuple[int, int]], word_ids: list[int | None]
) -> tuple[list[int], bool]:
    """Per token of ``text``: 1 if it starts a MeCab-ko morpheme, else 0; and whether MeCab failed.

    A token starts a morpheme when its first character (from the fast tokenizer's ``offsets``, leading
    whitespace such as Metaspace's ``▁`` skipped) is where :func:`kplm.tokenizer.morphemes.morpheme_starts`
    puts a morpheme start. The first token is always a start. When MeCab's offsets do not line up with the
    text (rare), the tokenizer's pre-token words (``word_ids``) stand in for morphemes.
    """
    from kplm.tokenizer.morphemes import morpheme_starts

    starts = set(morpheme_starts(text))
    if not starts:
        flags = [int(i == 0 or w != word_ids[i - 1]) for i, w in enumerate(word_ids)]
        return flags, True
    flags = []
    for begin, end in offsets:
        while begin < end and text[begin].isspace():
            begin += 1
        flags.append(int(begin in starts))
    if flags:
        flags[0] = 1
    return flags, False


def _to_npy(raw: Path, final: Path, rows: int, seq_len: int, dtype: np.dtype) -> None:
    """Copy a raw row file into an ``.npy`` array (written under a temporary name, then renamed)."""
    tmp = final.with_name(f".{final.name}.tmp")
    out = open_memmap(tmp, mode="w+", dtype=dtype, shape=(rows, seq_len))
    if rows:
        src = np.memmap(raw, dtype=dtype, mode="r", shape=(rows, seq_len))
        for start in range(0, rows, _COPY_ROWS):
            out[start : start + _COPY_ROWS] = src[start : start + _COPY_ROWS]
        del src
    out.flush()
    del out
    os.replace(tmp, final)
    raw.unlink()


def pack(config: PackConfig) -> dict[str, Any]:
    """Encode and pack ``config.corpus``; returns counts. Skips the work when the output is already complete."""
    from tqdm import tqdm

    started = time.time()
    tokenizer = load_tokenizer(config.tokenizer)
    tok_fp = tokenizer_fingerprint(config.tokenizer)
    settings = {
        k: v for k, v in vars(config).items() if k not in ("output", "batch_size", "corpus", "tokenizer")
    }
    if (
        config.morpheme_boundaries
    ):  # (left out when off, so packs made before the option keep their fingerprint)
        from importlib.metadata import version

        settings["mecab_ko"] = version("mecab-ko")
    else:
        del settings["morpheme_boundaries"]
    fp = fingerprint(settings, corpus_fingerprint(config.corpus), tok_fp)
    output = Path(config.output)
    if is_complete(output, fp):
        return dict(read_record(output)["counts"], skipped=True)
    output.mkdir(parents=True, exist_ok=True)
    tokenizer.model_max_length = 2**62  # whole documents are encoded; packing cuts them, not the tokenizer
    vocab_size = len(tokenizer)
    dtype = np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)
    ids = special_ids(tokenizer)
    with_starts = config.morpheme_boundaries
    packers = {
        split: _Packer(output / f".{split}.raw", config.seq_len, ids, dtype, starts=with_starts)
        for split in ("train", "valid")
    }
    position = 0
    empty = 0
    fallback = 0

    def flush(batch: list[str], first: int) -> int:
        nonlocal fallback
        if with_starts:
            encoding = tokenizer(
                batch,
                add_special_tokens=False,
                return_attention_mask=False,
                return_token_type_ids=False,
                return_offsets_mapping=True,
            )
            all_ids = encoding["input_ids"]
        else:  # the same ids without offsets: the backend's batch API ~1.4x faster
            fast = tokenizer.backend_tokenizer.encode_batch_fast(batch, add_special_tokens=False)
            all_ids = [e.ids for e in fast]
        blank = 0
        for offset, token_ids in enumerate(all_ids):
            if not token_ids:
                blank += 1
                continue
            flags = None
            if with_starts:
                text, spans = batch[offset], encoding["offset_mapping"][offset]
                flags, failed = token_morpheme_starts(text, spans, encoding.word_ids(offset))
                fallback += failed
            split = "valid" if is_valid_doc(first + offset, config.seed, config.valid_fraction) else "train"
            packers[split].add(token_ids, flags)
        return blank

    batch: list[str] = []
    total = sum(pq.ParquetFile(p).metadata.num_rows for p in shard_files(config.corpus))
    with tqdm(total=total, desc="pack", unit=" docs", mininterval=2.0) as progress:
        for text in iter_texts(config.corpus):
            batch.append(text)
            if len(batch) >= config.batch_size:
                empty += flush(batch, position)
                position += len(batch)
                progress.update(len(batch))
                batch = []
        if batch:
            empty += flush(batch, position)
            position += len(batch)
            progress.update(len(batch))
    rows = {split: packer.finish() for split, packer in packers.items()}
    if rows["valid"] == 0 and rows["train"] > 1:
        # Too few documents for the hashed split: hold out the last training sequence instead.
        _move_last_row(packers, config.seq_len, dtype)
        rows = {split: packer.sequences for split, packer in packers.items()}
    if rows["train"] == 0:
        raise KplmError(
            f"{config.corpus}: too little text to pack ({position} documents, {rows['valid']} sequences)"
        )
    for split in ("train", "valid"):
        _to_npy(packers[split].path, output / f"{split}.npy", rows[split], config.seq_len, dtype)
        starts_raw = packers[split].starts_path
        if starts_raw is not None:
            target = output / f"{split}{STARTS_SUFFIX}"
            _to_npy(starts_raw, target, rows[split], config.seq_len, np.dtype(np.uint8))
    counts: dict[str, Any] = {
        "documents": position,
        "empty_documents": empty,
        "train_sequences": rows["train"],
        "valid_sequences": rows["valid"],
        "train_documents": packers["train"].docs,
        "valid_documents": packers["valid"].docs,
        "train_tokens": packers["train"].tokens,
        "valid_tokens": packers["valid"].tokens,
        "padding_tokens": packers["train"].padding + packers["valid"].padding,
    }
    if with_starts:
        counts["morpheme_fallback_documents"] = fallback
    meta = {
        "seq_len": config.seq_len,
        "dtype": dtype.name,
        "vocab_size": vocab_size,
        "special_ids": ids,
        "tokenizer": str(Path(config.tokenizer).resolve()),
        "tokenizer_fingerprint": tok_fp,
        "fingerprint": fp,
        "seed": config.seed,
        "valid_fraction": config.valid_fraction,
        "morpheme_boundaries": with_starts,
        **counts,
    }
    write_json_atomic(output / META_NAME, meta)
    write_record(output, stage="pack", config=config, fingerprint=fp, counts=counts, started=started)
    return counts


def _move_last_row(packers: dict[str, _Packer], seq_len: int, dtype: np.dtype) -> None:
    """Move the last row of the train raw file to the (empty) valid raw file."""
    train, valid = packers["train"], packers["valid"]
    moves = [(train.path, valid.path, seq_len * dtype.itemsize)]
    if train.starts_path is not None and valid.starts_path is not None:
        moves.append((train.starts_path, valid.starts_path, seq_len))
    for source, target, row_bytes in moves:
        with open(source, "r+b") as f:
            f.seek(-row_bytes, os.SEEK_END)
            row = f.read(row_bytes)
            f.seek(-row_bytes, os.SEEK_END)
            f.truncate()
        target.write_bytes(row)
    train.sequences -= 1
    valid.sequences = 1


def read_meta(folder: Path) -> dict[str, Any]:
    """The ``pack_meta.json`` of a packed folder, with a clear error when the folder is not one."""
    path = Path(folder) / META_NAME
    if not path.is_file():
        raise KplmError(f"{folder}: not a packed data folder (no {META_NAME}; run kplm pack first)")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise KplmError(f"{path}: unreadable ({e})") from None
