"""BPE vocabularies with Metaspace word starts (``--model bpe``), learned from MeCab-ko morphemes or whole eojeols.

The trainer reads the unit file of :func:`kplm.tokenizer.units.training_lines`: every eojeol cut at
morpheme starts and around every punctuation character, its first piece prefixed with ``▁``
(``"아버지가방에" → "▁아버지 가 방 에"``), one unit a token of the trainer, so merges never cross a morpheme
boundary. In plain mode each unit is a whole eojeol, with punctuation cut off as in morpheme mode (and as
BERT's pre-tokenizer does for WordPiece in both modes). Algorithm version 2 glued punctuation to words in
plain mode: that vocabulary spent about 3,200 of 32,000 entries on pieces such as ``다.`` or ``요..``,
which a morpheme vocabulary can never learn because MeCab-ko makes punctuation a morpheme of its own, and
its tokens/eojeol ratio against the plain baseline (1.15× on KLUE dev) measured that gluing rather than
the cost of morpheme boundaries (1.11× once both cut punctuation; WordPiece: 1.11×).

**Continuation in raw-text mode.** A Metaspace tokenizer marks the *start* of an eojeol (``▁``) instead of
the continuation (``##``): every piece without ``▁`` is a continuation, so the bare morpheme pieces that
training produced (``가``, ``습니다``) are exactly the continuation forms raw text needs. At inference the
saved tokenizer replaces spaces by ``▁``, splits there and applies the morpheme-learned merges to the whole
eojeol, in merge order: no MeCab, and a character outside the alphabet is the only source of [UNK].
Morpheme mode (:func:`kplm.tokenizer.morphemes.tokenize_morphemes`) applies the same merges per morpheme.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from kplm.tokenizer.config import SPECIAL_TOKENS, TokenizerConfig
from kplm.tokenizer.morphemes import SPACE, bpe_normalizer

MAX_PIECE_CHARS = 16  # as for WordPiece: no learned piece longer than this (plus the "▁")


def train_bpe(
    config: TokenizerConfig, units_path: Path, alphabet: list[str]
) -> tuple[dict[str, int], list[tuple[str, str]], int]:
    """Train the BPE on the unit file; return its vocabulary (specials, unused and extra tokens first), its
    merges and the number of ``[unused]`` entries appended to reach a multiple of ``pad_to_multiple_of``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    m = config.pad_to_multiple_of
    target = math.ceil(config.vocab_size / m) * m
    fixed = [*SPECIAL_TOKENS, *(f"[unused{i}]" for i in range(config.unused_tokens)), *config.extra_tokens]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.BpeTrainer(
        vocab_size=target,
        min_frequency=config.min_frequency,
        # Registering the alphabet up front gives each character a fixed id: the trainer otherwise numbers
        # them in hash-map order, and ids break ties between equally frequent merges (tokenizers#1794).
        special_tokens=[*fixed, SPACE, *(c for c in alphabet if c not in fixed)],
        limit_alphabet=len(alphabet) + 1,
        initial_alphabet=[SPACE, *alphabet],
        max_token_length=MAX_PIECE_CHARS + 1,
        show_progress=True,
    )
    tok.train([str(units_path)], trainer)
    model = json.loads(tok.to_str())["model"]
    vocab: dict[str, int] = model["vocab"]
    merges = [tuple(x) if isinstance(x, list) else tuple(x.split(" ", 1)) for x in model["merges"]]
    padded, k = 0, config.unused_tokens
    while len(vocab) % m:  # the trainer ran out of pairs above min_frequency
        if f"[unused{k}]" not in vocab:
            vocab[f"[unused{k}]"] = len(vocab)
            padded += 1
        k += 1
    return vocab, merges, padded


def build_bpe_tokenizer(vocab: dict[str, int], merges: list[tuple[str, str]], extra_tokens: list[str]) -> Any:
    """The raw-text ``tokenizers.Tokenizer``: BPE + normaliser + Metaspace + BERT-style ``[CLS] A [SEP]``."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="[UNK]"))
    tok.normalizer = bpe_normalizer()
    # "first": text right after an added token ("[PHONE]이고") continues the word, as it does in training
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="first", split=True)
    tok.decoder = decoders.Metaspace(replacement=SPACE, prepend_scheme="first", split=True)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    if extra_tokens:
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in extra_tokens])
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    return tok


def save_bpe_tokenizer(
    folder: Path, vocab: dict[str, int], merges: list[tuple[str, str]], config: TokenizerConfig
) -> Any:
    """Write ``tokenizer.json``, ``tokenizer_config.json`` and ``vocab.txt`` (entries in id order); return the
    folder loaded with ``AutoTokenizer``."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    backend = build_bpe_tokenizer(vocab, merges, list(config.extra_tokens))
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=config.model_max_length,
        clean_up_tokenization_spaces=False,
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
    )
    tok.save_pretrained(str(folder))
    entries = sorted(vocab, key=vocab.__getitem__)
    (folder / "vocab.txt").write_text("".join(t + "\n" for t in entries), encoding="utf-8")
    loaded = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    if len(loaded) != len(vocab) or loaded.convert_ids_to_tokens(len(vocab) - 1) != entries[-1]:
        raise RuntimeError(f"saved tokenizer does not reload with the same vocabulary: {folder}")
    return loaded
