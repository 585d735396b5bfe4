"""``kplm tokenizer train``: learn a KLUE-style morpheme-based vocabulary and save a HF tokenizer.

``model="wordpiece"`` (default) is described below; ``model="bpe"`` (Metaspace ``▁`` BPE) shares the reading,
pre-tokenization and alphabet steps and is trained and saved by :mod:`kplm.tokenizer.bpe`. ``mode="plain"``
skips MeCab (whole words as units): the baseline of the same size from the same command.

Steps: read documents (1 in 100, drawn with ``seed``, held out for the report, up to ``report_docs``);
pre-tokenize them in ``num_proc`` processes (:func:`kplm.tokenizer.units.training_lines`: BERT-normalised,
BERT pre-tokens cut at MeCab-ko morpheme starts, continuation morphemes glued to a marker) into a unit file;
pick the base alphabet by ``character_coverage``; train a BPE with ``##`` continuation prefix on the unit file;
turn marker pieces (``\\ue000습니다``) into continuation pieces (``##습니다``); keep specials, unused and extra
tokens, every alphabet character (word-initial and ``##`` form) and the learned pieces in the order they were
learned (most frequent first) up to ``vocab_size``. The trainer gets some slack because converted marker
pieces often duplicate ``##`` pieces.

The result is a ``BertTokenizer`` (transformers 5) that runs on raw text with no MeCab: greedy longest-match
WordPiece finds morpheme-sized pieces because only morpheme-internal merges exist. Normaliser: BERT's
(``clean_text``, Hanja split, no lowercasing, no accent stripping); not NFC, because transformers rebuilds a
``BertTokenizer``'s normaliser from its arguments and would drop an NFC step. Training text is NFC-normalised
and ``kplm corpus clean`` NFC-normalises the corpus; feed NFC text.
"""

from __future__ import annotations

import gzip
import json
import math
import multiprocessing
import os
import random
import shutil
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from tqdm import tqdm

from kplm.config import fingerprint
from kplm.errors import KplmError
from kplm.records import (
    content_digests,
    content_identity,
    is_complete,
    previous_inputs,
    read_record,
    write_record,
)
from kplm.tokenizer.alphabet import choose_alphabet, needs_continuation_form
from kplm.tokenizer.config import SPECIAL_TOKENS, TokenizerConfig
from kplm.tokenizer.morphemes import MARKER, NORMALIZER_SETTINGS
from kplm.tokenizer.report import measure, write_report
from kplm.tokenizer.units import init_worker, training_lines

STAGE = "tokenizer"
ALGORITHM_VERSION = 3  # bump when the same config would give a different vocabulary
TOKENIZER_FILES = (  # written for both models (vocab.txt: entries in id order)
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
)
HELDOUT_RATE = 0.01
BATCH_DOCS = 256
MAX_PIECE_CHARS = 16  # no learned piece longer than this (stops "ㅋㅋㅋㅋㅋㅋ…" pieces)
ALPHABET_SHARE = 0.5  # at most this share of the vocabulary goes to single characters
EXAMPLE = "아버지가방에들어가신다"


def input_kind(path: Path) -> str:
    """``corpus`` (Parquet folder or file), ``txt``, ``jsonl`` or ``jsonl.gz``; KplmError otherwise."""
    if not path.exists():
        raise KplmError(f"input not found: {path}")
    name = path.name.lower()
    if path.is_dir() or name.endswith(".parquet"):
        return "corpus"
    for kind in ("jsonl.gz", "jsonl", "txt"):
        if name.endswith("." + kind):
            return kind
    raise KplmError(f"{path}: unsupported input (give a corpus folder, .parquet, .txt, .jsonl or .jsonl.gz)")


def input_files(paths: list[Path]) -> list[Path]:
    """Every file the inputs consist of (a folder's files in sorted order)."""
    files = []
    for path in paths:
        input_kind(path)
        files += (
            sorted(p.resolve() for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path.resolve()]
        )
    return files


def iter_input_texts(paths: list[Path]) -> Iterator[str]:
    """The texts of all inputs in order; empty documents are skipped."""
    from kplm.corpus.shards import iter_texts

    for path in paths:
        kind = input_kind(path)
        if kind == "corpus":
            yield from (t for t in iter_texts(path) if t and t.strip())
            continue
        opener = gzip.open if kind == "jsonl.gz" else open
        try:
            with opener(path, "rt", encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    if kind == "txt":
                        yield line.rstrip("\r\n")
                        continue
                    try:
                        text = json.loads(line).get("text")
                    except (ValueError, AttributeError):
                        raise KplmError(f"{path}:{lineno}: not a JSON object") from None
                    if not isinstance(text, str):
                        raise KplmError(f"{path}:{lineno}: no string field 'text'")
                    if text.strip():
                        yield text
        except (UnicodeDecodeError, gzip.BadGzipFile, EOFError) as e:
            raise KplmError(f"{path}: unreadable ({type(e).__name__}: {e})") from None


def stage_fingerprint(config: TokenizerConfig) -> tuple[str, dict[str, list]]:
    """Fingerprint of everything that decides the output: config (not num_proc), the input files' paths, sizes
    and contents, algorithm; and the files' digests (reused from the output's record where unchanged)."""
    settings = {k: v for k, v in vars(config).items() if k not in ("num_proc", "output")}
    digests = content_digests(input_files(config.input), previous_inputs(config.output))
    return fingerprint(STAGE, ALGORITHM_VERSION, settings, content_identity(digests)), digests


def _batches(config: TokenizerConfig, heldout: list[str]) -> Iterator[list[str]]:
    rng = random.Random(config.seed)
    batch: list[str] = []
    for n, text in enumerate(iter_input_texts(config.input)):
        if config.max_docs is not None and n >= config.max_docs:
            break
        if len(heldout) < config.report_docs and rng.random() < HELDOUT_RATE:
            heldout.append(text)
            continue
        batch.append(text)
        if len(batch) >= BATCH_DOCS:
            yield batch
            batch = []
    if batch:
        yield batch


def pretokenize(config: TokenizerConfig, units_path: Path, heldout: list[str]) -> dict[str, Any]:
    """Write the training units of all non-held-out documents to ``units_path``; return counts.

    With ``num_proc`` > 1 the batches go through ``num_proc`` worker processes, in order (the unit file is
    the same for any ``num_proc``) and with at most ``4 * num_proc`` batches in flight, so memory stays flat
    on any corpus size; each worker builds its own MeCab tagger on first use. Workers are *spawned* (forking
    a parent whose tokenizers/Rust threads already ran risks deadlocks), so a script that calls this with
    ``num_proc`` > 1 needs the usual ``if __name__ == "__main__":`` guard. A ``ProcessPoolExecutor`` is used
    rather than ``multiprocessing.Pool``: ``Pool.imap`` drains its whole input at once, and a ``Pool`` waits
    forever for a task whose worker died, where the executor raises.
    """
    counts: dict[str, int] = {}
    docs = chars = 0
    worker_cpu = 0.0
    started, cpu_started = time.time(), time.process_time()
    initargs = (config.mode, list(config.extra_tokens), config.model)
    pool = None
    if config.num_proc > 1:
        pool = ProcessPoolExecutor(
            config.num_proc,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=init_worker,
            initargs=initargs,
        )
        results = _ordered_map(pool, _batches(config, heldout), window=4 * config.num_proc)
    else:
        init_worker(*initargs)
        results = map(training_lines, _batches(config, heldout))
    bar = tqdm(
        desc=f"pre-tokenizing ({config.mode}, {config.model})", unit="doc", unit_scale=True, mininterval=2
    )
    try:
        with open(units_path, "w", encoding="utf-8") as out:
            for lines, batch_counts, n_chars, n_docs, batch_cpu in results:
                out.write(lines)
                for ch, c in batch_counts.items():
                    counts[ch] = counts.get(ch, 0) + c
                docs += n_docs
                chars += n_chars
                worker_cpu += batch_cpu
                bar.update(n_docs)
    except BrokenProcessPool:
        raise KplmError(
            "a pre-tokenization worker process died (out of memory? or, when calling train_tokenizer from "
            "a script with num_proc > 1, the script lacks an `if __name__ == '__main__':` guard)"
        ) from None
    finally:
        bar.close()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    # CPU seconds: this process (reading, writing; all the work when num_proc == 1) plus the workers' batches
    cpu = time.process_time() - cpu_started + (worker_cpu if pool is not None else 0.0)
    return {
        "docs": docs,
        "chars": chars,
        "char_counts": counts,
        "seconds": time.time() - started,
        "cpu_seconds": cpu,
    }


def _ordered_map(pool: ProcessPoolExecutor, batches: Iterator[list[str]], window: int) -> Iterator[Any]:
    """``training_lines`` over ``batches`` in the pool, in order, reading ahead at most ``window`` batches."""
    pending: deque[Any] = deque()
    for batch in batches:
        pending.append(pool.submit(training_lines, batch))
        if len(pending) >= window:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def train_pieces(units_path: Path, alphabet: list[str], size: int, min_frequency: int) -> list[str]:
    """Train the ``##``-prefix BPE on the unit file; its vocabulary in the order entries were created."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(continuing_subword_prefix="##"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.BpeTrainer(
        vocab_size=size,
        min_frequency=min_frequency,
        # Registering every "##c" up front gives them fixed ids: the trainer otherwise creates them in hash-map
        # order, and their ids break ties between equally frequent merges (huggingface/tokenizers#1794).
        special_tokens=["##" + c for c in alphabet],
        limit_alphabet=len(alphabet) + 1,
        initial_alphabet=[*alphabet, MARKER],
        continuing_subword_prefix="##",
        max_token_length=MAX_PIECE_CHARS,
        show_progress=True,
    )
    tok.train([str(units_path)], trainer)
    vocab = tok.get_vocab()
    return sorted(vocab, key=vocab.__getitem__)


def learned_pieces(trained: list[str]) -> list[str]:
    """Trainer entries as vocabulary pieces: ``\\ue000X`` becomes ``##X``, the bare marker is dropped."""
    out = []
    for piece in trained:
        if piece.startswith(MARKER):
            piece = "##" + piece[1:] if len(piece) > 1 else ""
        if piece and MARKER not in piece:
            out.append(piece)
    return out


def assemble_vocab(
    config: TokenizerConfig, alphabet: list[str], pieces: list[str]
) -> tuple[list[str], int, int]:
    """Final entries (specials, unused, extra, alphabet, learned), the number of learned ones kept and the
    number of [unused] entries added because the learned pieces ran out before ``vocab_size``."""
    fixed = [*SPECIAL_TOKENS, *(f"[unused{i}]" for i in range(config.unused_tokens)), *config.extra_tokens]
    vocab = list(dict.fromkeys(fixed))
    for ch in alphabet:
        vocab.append(ch)
        if needs_continuation_form(ch):
            vocab.append("##" + ch)
    vocab = list(dict.fromkeys(vocab))
    m = config.pad_to_multiple_of
    target = math.ceil(config.vocab_size / m) * m
    seen = set(vocab)
    learned = 0
    for piece in pieces:
        if len(vocab) >= target:
            break
        if piece not in seen:
            seen.add(piece)
            vocab.append(piece)
            learned += 1
    padded, k = 0, config.unused_tokens
    while len(vocab) % m:  # learned pieces ran out: pad with further [unused] entries
        if f"[unused{k}]" not in seen:
            vocab.append(f"[unused{k}]")
            padded += 1
        k += 1
    return vocab, learned, padded


def save_tokenizer(folder: Path, vocab: list[str], config: TokenizerConfig) -> Any:
    """Write the transformers ``BertTokenizer`` files plus ``vocab.txt`` into ``folder``; return it loaded."""
    from tokenizers import AddedToken
    from transformers import AutoTokenizer, BertTokenizer

    tok = BertTokenizer(
        vocab={t: i for i, t in enumerate(vocab)},
        do_lower_case=False,
        strip_accents=NORMALIZER_SETTINGS["strip_accents"],
        tokenize_chinese_chars=NORMALIZER_SETTINGS["handle_chinese_chars"],
        model_max_length=config.model_max_length,
        clean_up_tokenization_spaces=False,  # the WordPiece decoder already attaches punctuation
    )
    if config.extra_tokens:
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in config.extra_tokens])
    tok.save_pretrained(str(folder))
    (folder / "vocab.txt").write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
    loaded = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    if len(loaded) != len(vocab) or loaded.convert_ids_to_tokens(len(vocab) - 1) != vocab[-1]:
        raise RuntimeError(f"saved tokenizer does not reload with the same vocabulary: {folder}")
    return loaded


def train_tokenizer(config: TokenizerConfig) -> dict[str, Any]:
    """Train the vocabulary described by ``config`` and write the tokenizer folder; returns its counts."""
    started = time.time()
    fp, digests = stage_fingerprint(config)
    output = config.output
    if is_complete(output, fp) and all((output / f).is_file() for f in TOKENIZER_FILES):
        record = read_record(output) or {}
        return {**record.get("counts", {}), "skipped": True}
    output.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(output)
    tmp = output.parent / f".{output.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        counts = _train_into(config, tmp)
        write_record(
            tmp, stage=STAGE, config=config, fingerprint=fp, counts=counts, started=started, inputs=digests
        )
        old = output.parent / f".{output.name}.old-{os.getpid()}"
        if output.exists():
            output.rename(old)
        tmp.rename(output)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {**counts, "skipped": False}


def _remove_stale_temporaries(output: Path) -> None:
    """Delete temporary folders left next to ``output`` by killed runs (their process no longer exists)."""
    for path in output.parent.glob(f".{output.name}.tmp-*"):
        pid = path.name.rsplit("-", 1)[-1]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except PermissionError:
            continue


def _train_into(config: TokenizerConfig, folder: Path) -> dict[str, Any]:
    heldout: list[str] = []
    units = folder / "units.tmp"
    pre = pretokenize(config, units, heldout)
    if pre["docs"] == 0:
        raise KplmError(f"no text to train on in {', '.join(map(str, config.input))}")
    fixed = len(SPECIAL_TOKENS) + config.unused_tokens + len(config.extra_tokens)
    alphabet = choose_alphabet(
        pre["char_counts"],
        config.character_coverage,
        int(config.vocab_size * ALPHABET_SHARE),
        config.required_characters,
        wordpiece=config.model == "wordpiece",
    )
    m = config.pad_to_multiple_of
    needed = math.ceil(config.vocab_size / m) * m - fixed
    t0, cpu0 = time.time(), time.process_time()
    attempts = 1
    if config.model == "bpe":
        from kplm.tokenizer.bpe import save_bpe_tokenizer, train_bpe

        base = len(alphabet) + 1  # characters and the bare "▁"
        vocab_map, merges, padded = train_bpe(config, units, alphabet)
        train_seconds, train_cpu = time.time() - t0, time.process_time() - cpu0
        learned = len(merges)
        needed -= base
        units.unlink()
        tok = save_bpe_tokenizer(folder, vocab_map, merges, config)
        vocab_len = len(vocab_map)
    else:
        base = len(alphabet) + sum(map(needs_continuation_form, alphabet))
        needed -= base
        slack = 1.5
        while True:
            size = 2 * len(alphabet) + 1 + int(needed * slack)  # the trainer also holds "##" of punctuation
            trained = train_pieces(units, alphabet, size, config.min_frequency)
            pieces = learned_pieces(trained)
            distinct = len(set(pieces) - set(alphabet) - {"##" + c for c in alphabet})
            if distinct >= needed or len(trained) < size or attempts == 3:
                break  # enough pieces, or the trainer ran out of pairs above min_frequency
            attempts += 1
            slack *= 1.15 * needed / max(distinct, 1)
        train_seconds, train_cpu = time.time() - t0, time.process_time() - cpu0
        units.unlink()
        vocab, learned, padded = assemble_vocab(config, alphabet, pieces)
        tok = save_tokenizer(folder, vocab, config)
        vocab_len = len(vocab)
    held = measure(tok, heldout)
    held.pop("roundtrip_failed", None)
    report = {
        "mode": config.mode,
        "model": config.model,
        "vocab_size": vocab_len,
        "alphabet_chars": len(alphabet),
        "alphabet_entries": base,
        "learned_entries": learned,
        "docs_trained": pre["docs"],
        "chars_trained": pre["chars"],
        "pretokenize_seconds": round(pre["seconds"], 2),
        "pretokenize_chars_per_second": round(pre["chars"] / max(pre["seconds"], 1e-9)),
        "pretokenize_cpu_seconds": round(pre["cpu_seconds"], 2),
        "train_seconds": round(train_seconds, 2),
        "train_cpu_seconds": round(train_cpu, 2),
        "train_attempts": attempts,
        "vocab_exhausted": learned < needed,
        "padding_unused_entries": padded,
        "heldout": held,
        "example": tok.tokenize(EXAMPLE),
    }
    write_report(folder, report)
    return {k: v for k, v in report.items() if k != "example"}
