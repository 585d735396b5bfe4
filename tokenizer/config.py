"""Configuration of the tokenizer stage: `kplm tokenizer train` (TokenizerConfig) and `report` (TokenizerReportConfig)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
MIN_VOCAB_SIZE = 500


@dataclass(kw_only=True)
class TokenizerConfig:
    """What ``train_tokenizer`` reads, how it learns the WordPiece vocabulary and where it writes it."""

    input: list[Path] = field(
        metadata={
            "help": "corpus folders of Parquet shards, .txt files (one document a line) or "
            ".jsonl/.jsonl.gz files with a 'text' field"
        }
    )
    output: Path = field(metadata={"help": "folder to write the Hugging Face tokenizer to"})
    vocab_size: int = field(
        default=32000,
        metadata={"help": "vocabulary size, special, unused and extra tokens included"},
    )
    mode: Literal["morpheme", "plain"] = field(
        default="morpheme",
        metadata={
            "help": "morpheme: learn pieces inside MeCab-ko morphemes (KLUE style); "
            "plain: same trainer on whole words (baseline)"
        },
    )
    model: Literal["wordpiece", "bpe"] = field(
        default="wordpiece",
        metadata={
            "help": "wordpiece: BERT WordPiece with ## continuations (KLUE-BERT compatible); "
            "bpe: byte-pair merges with Metaspace '\u2581' word starts (SentencePiece style)"
        },
    )
    min_frequency: int = field(default=2, metadata={"help": "minimum count of a pair to be merged"})
    character_coverage: float = field(
        default=0.9999,
        metadata={
            "help": "share of character occurrences the base alphabet must cover "
            "(rarer characters become [UNK]; capped at half the vocabulary)"
        },
    )
    required_characters: Literal["ksx1001_all", "ksx1001_hanja", "ksx1001", "jamo", "none"] = field(
        default="ksx1001_hanja",
        metadata={
            "help": "characters always in the alphabet, seen in training or not: ksx1001 = the 2,350 common "
            "Hangul syllables + jamo + ASCII; ksx1001_hanja (default) = also the 4,622 KS X 1001 Hanja "
            "(after NFC) and its 56 punctuation marks, one WordPiece entry each; ksx1001_all = also its "
            "other symbols, kana, Greek and Cyrillic; jamo = jamo + ASCII (smaller sets are used if it "
            "does not fit)"
        },
    )
    unused_tokens: int = field(
        default=0, metadata={"help": "number of [unused0]... placeholder entries to reserve"}
    )
    extra_tokens: list[str] = field(
        default_factory=list,
        metadata={"help": "whole tokens that are never split, e.g. PII placeholders [PHONE] [EMAIL]"},
    )
    max_docs: int | None = field(
        default=None, metadata={"help": "read at most this many documents (held-out ones included)"}
    )
    report_docs: int = field(
        default=5000,
        metadata={
            "help": "documents held out from training (1 in 100 of the input, drawn with --seed) and "
            "measured in tokenizer_report; 0 trains on everything"
        },
    )
    num_proc: int = field(default=1, metadata={"help": "processes for MeCab pre-tokenization"})
    pad_to_multiple_of: int = field(
        default=1, metadata={"help": "round the vocabulary size up to a multiple of this"}
    )
    model_max_length: int = field(
        default=512, metadata={"help": "model_max_length written to tokenizer_config.json"}
    )
    seed: int = field(default=0, metadata={"help": "seed of the held-out document draw"})

    def __post_init__(self) -> None:
        if isinstance(self.input, str | Path):
            self.input = [self.input]
        self.input = [Path(p) for p in self.input]
        self.output = Path(self.output)
        if not self.input:
            raise ValueError("input: give at least one corpus folder or text file")
        reserved = len(SPECIAL_TOKENS) + self.unused_tokens + len(self.extra_tokens)
        if self.vocab_size < MIN_VOCAB_SIZE:
            raise ValueError(f"vocab_size: must be at least {MIN_VOCAB_SIZE}, got {self.vocab_size}")
        if self.vocab_size < reserved + MIN_VOCAB_SIZE:
            raise ValueError(
                f"vocab_size: {self.vocab_size} leaves fewer than {MIN_VOCAB_SIZE} learned entries "
                f"after {reserved} special/unused/extra tokens"
            )
        if self.min_frequency < 1:
            raise ValueError(f"min_frequency: must be at least 1, got {self.min_frequency}")
        if not 0.5 <= self.character_coverage <= 1.0:
            raise ValueError(f"character_coverage: must be in [0.5, 1], got {self.character_coverage}")
        if self.unused_tokens < 0:
            raise ValueError(f"unused_tokens: must be 0 or more, got {self.unused_tokens}")
        seen: set[str] = set(SPECIAL_TOKENS)
        for token in self.extra_tokens:
            if not token or token != token.strip() or any(c.isspace() for c in token):
                raise ValueError(f"extra_tokens: {token!r} must be non-empty and contain no whitespace")
            if token in seen or token.startswith("[unused"):
                raise ValueError(f"extra_tokens: {token!r} is given twice or clashes with a special token")
            seen.add(token)
        if self.max_docs is not None and self.max_docs < 1:
            raise ValueError(f"max_docs: must be at least 1 (or unset), got {self.max_docs}")
        if self.report_docs < 0:
            raise ValueError(f"report_docs: must be 0 or more, got {self.report_docs}")
        if self.num_proc < 1:
            raise ValueError(f"num_proc: must be at least 1, got {self.num_proc}")
        if self.pad_to_multiple_of < 1:
            raise ValueError(f"pad_to_multiple_of: must be at least 1, got {self.pad_to_multiple_of}")
        if self.model_max_length < 8:
            raise ValueError(f"model_max_length: must be at least 8, got {self.model_max_length}")


@dataclass(kw_only=True)
class TokenizerReportConfig:
    """What ``report`` measures: one tokenizer folder on the user's text, optionally next to other vocabularies."""

    tokenizer: Path = field(
        metadata={"help": "the kplm tokenizer folder to measure (kplm tokenizer train output)"}
    )
    text: list[Path] = field(
        metadata={
            "help": "evaluation text: .txt (one document a line), .jsonl/.jsonl.gz ('text' field), "
            "a corpus folder, or a KLUE .json/.tsv dev file"
        }
    )
    compare: list[Path] = field(
        default_factory=list,
        metadata={
            "help": "other vocabularies to measure side by side: a BERT vocab.txt or a HF tokenizer folder"
        },
    )
    output: Path | None = field(
        default=None,
        metadata={
            "help": "report path without suffix (default: <tokenizer>/report_<first text file's stem>)"
        },
    )
    max_lines: int | None = field(default=20000, metadata={"help": "measure at most this many documents"})
    morphemes: bool = field(
        default=True,
        metadata={"help": "also measure morpheme mode and MeCab boundary agreement (needs MeCab)"},
    )

    def __post_init__(self) -> None:
        if isinstance(self.text, str | Path):
            self.text = [self.text]
        if isinstance(self.compare, str | Path):
            self.compare = [self.compare]
        self.tokenizer = Path(self.tokenizer)
        self.text = [Path(p) for p in self.text]
        self.compare = [Path(p) for p in self.compare]
        self.output = Path(self.output) if self.output is not None else None
        if not self.text:
            raise ValueError("text: give at least one evaluation text file")
        if self.max_lines is not None and self.max_lines < 1:
            raise ValueError(f"max_lines: must be at least 1 (or unset), got {self.max_lines}")
