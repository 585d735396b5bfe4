"""Quality figures of a tokenizer on raw text, for ``tokenizer_report.json`` / ``.md`` and for comparisons.

All figures are measured with the saved tokenizer on raw text (no MeCab): what a model will see.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kplm.records import write_json_atomic

_SPACES = re.compile(r"\s+")


def is_bert_punctuation(ch: str) -> bool:
    """BERT's punctuation test (ASCII symbols and Unicode P* categories): such characters are own words."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_cjk_ideograph(ch: str) -> bool:
    """CJK ideographs (Hanja), which the BERT normaliser surrounds with spaces (one word each)."""
    cp = ord(ch)
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def roundtrip_key(text: str) -> str:
    """``text`` modulo BERT's decoding conventions: whitespace runs collapsed, none next to punctuation."""
    words = _SPACES.split(text.strip())
    out: list[str] = []
    for word in words:
        if out and word and not (is_bert_punctuation(word[0]) or is_bert_punctuation(out[-1][-1])):
            out.append(" ")
        out.append(word)
    return "".join(out)


def measure(tokenizer: Any, texts: Sequence[str]) -> dict[str, Any]:
    """Tokens per eojeol/char, [UNK] rate, share of eojeols in >= 3 pieces and round-trip failures.

    An eojeol is a whitespace-separated word of the raw text. ``tokenizer`` is a transformers tokenizer or a
    ``tokenizers.Tokenizer`` with an ``[UNK]`` entry. Round trip: ``decode(encode(x))`` equals the normalised
    ``x`` modulo :func:`roundtrip_key`; ``roundtrip_failed`` lists the indexes (into ``texts``) that do not.
    """
    texts = [t for t in texts if t.strip()]
    if not texts:
        return {"docs": 0}
    backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
    unk_id = backend.token_to_id(getattr(tokenizer, "unk_token", None) or "[UNK]")
    docs = backend.encode_batch(texts, add_special_tokens=False)
    n_tokens = sum(len(e.ids) for e in docs)
    n_unk = sum(e.ids.count(unk_id) for e in docs)
    n_chars = sum(len(t) - t.count(" ") for t in texts)
    eojeols = [w for t in texts for w in t.split()]
    encoded = backend.encode_batch(eojeols, add_special_tokens=False)
    pieces = [len(e.ids) for e in encoded]
    unk_eojeols = sum(unk_id in e.ids for e in encoded)
    decoded = backend.decode_batch([e.ids for e in docs], skip_special_tokens=False)
    normalizer = backend.normalizer
    failed = [
        i
        for i, (d, t) in enumerate(zip(decoded, texts, strict=True))
        if roundtrip_key(d) != roundtrip_key(normalizer.normalize_str(t) if normalizer else t)
    ]
    return {
        "docs": len(texts),
        "eojeols": len(eojeols),
        "chars": n_chars,
        "tokens": n_tokens,
        "tokens_per_eojeol": round(n_tokens / max(len(eojeols), 1), 4),
        "tokens_per_char": round(n_tokens / max(n_chars, 1), 4),
        "unk_rate": round(n_unk / max(n_tokens, 1), 6),
        "unk_eojeol_share": round(unk_eojeols / max(len(eojeols), 1), 6),
        "eojeols_3plus_pieces_share": round(sum(p >= 3 for p in pieces) / max(len(pieces), 1), 4),
        "roundtrip_failure_share": round(len(failed) / len(texts), 6),
        "roundtrip_failed": failed,
    }


def write_report(folder: Path, report: dict[str, Any]) -> None:
    """Write ``tokenizer_report.json`` and a short ``tokenizer_report.md`` into ``folder``."""
    write_json_atomic(folder / "tokenizer_report.json", report)
    held = report.get("heldout", {})
    lines = [
        "# Tokenizer report",
        "",
        f"- mode: `{report['mode']}`, vocabulary: {report['vocab_size']} entries "
        f"({report['alphabet_chars']} characters as {report['alphabet_entries']} single-character entries, "
        f"{report['learned_entries']} learned pieces)",
        f"- trained on {report['docs_trained']:,} documents ({report['chars_trained']:,} characters); "
        f"measured on {held.get('docs', 0):,} held-out documents never trained on",
        "",
    ]
    if held.get("docs"):
        rows = [
            ("tokens per eojeol", "tokens_per_eojeol"),
            ("tokens per character", "tokens_per_char"),
            ("[UNK] rate (share of tokens)", "unk_rate"),
            ("eojeols containing [UNK]", "unk_eojeol_share"),
            ("eojeols split into >= 3 pieces", "eojeols_3plus_pieces_share"),
            ("round-trip failures (decode(encode(x)) != x)", "roundtrip_failure_share"),
        ]
        lines += ["| measure | held-out value |", "|---|---|"]
        lines += [f"| {label} | {held[key]} |" for label, key in rows]
        lines.append("")
    lines.append("Example: `" + " ".join(report.get("example", [])) + "`")
    path = folder / "tokenizer_report.md"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)
