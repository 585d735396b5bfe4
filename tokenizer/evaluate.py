"""``kplm tokenizer report``: quality of a kplm tokenizer on the user's text, side by side with other vocabularies.

Every tokenizer is measured on the same documents (NFC-normalised; an eojeol is a whitespace-separated word):
tokens per eojeol and per character, [UNK] rate, share of eojeols split into >= 3 pieces, round-trip
failures (``decode(encode(x))`` against the normalised ``x``, modulo spaces at punctuation), and
**morpheme-boundary agreement**: the subword boundaries inside eojeols against MeCab-ko's morpheme boundaries
inside eojeols (precision = share of subword boundaries that are morpheme boundaries, recall = share of
morpheme boundaries that are subword boundaries). The kplm tokenizer is measured in raw-text mode (what
``AutoTokenizer`` does) and in morpheme mode (:func:`kplm.tokenizer.morphemes.tokenize_morphemes`); each
``compare`` entry (a BERT ``vocab.txt``, loaded as a cased WordPiece with BERT's normaliser and
pre-tokenizer, or any Hugging Face tokenizer folder, e.g. a ``--mode plain`` kplm tokenizer) in raw mode.
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
from pathlib import Path
from typing import Any

from kplm.errors import KplmError
from kplm.records import write_json_atomic
from kplm.tokenizer.config import TokenizerReportConfig
from kplm.tokenizer.morphemes import morpheme_starts, segment_tokens
from kplm.tokenizer.report import measure, roundtrip_key

_NER_SPAN = re.compile(r"<([^<>:]+):[A-Z]{2}>")
_KLUE_FIELDS = ("premise", "hypothesis", "sentence1", "sentence2", "sentence", "text")
MAX_EXAMPLES = 10
EXAMPLE_WINDOW = 15


def read_eval_texts(paths: list[Path], max_lines: int | None) -> list[str]:
    """Distinct non-empty documents of ``paths`` in order, NFC-normalised, at most ``max_lines``.

    KLUE dev files are read by their structure: ``.json`` lists (premise/hypothesis, sentence1/sentence2)
    and ``.tsv`` files with ``## <id>\\t<sentence>`` header lines (NER span marks ``<text:TAG>`` removed).
    Anything else goes through :func:`kplm.tokenizer.train.iter_input_texts` (.txt, .jsonl(.gz), corpus).
    """
    from kplm.tokenizer.train import iter_input_texts

    seen: dict[str, None] = {}
    for path in paths:
        for text in _klue_texts(path) if path.suffix in (".json", ".tsv") else iter_input_texts([path]):
            text = unicodedata.normalize("NFC", text).strip()
            if text:
                seen.setdefault(text, None)
            if max_lines is not None and len(seen) >= max_lines:
                return list(seen)
    return list(seen)


def _klue_texts(path: Path) -> list[str]:
    if not path.is_file():
        raise KplmError(f"text file not found: {path}")
    try:
        raw = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise KplmError(f"{path}: not valid UTF-8 (byte {e.start})") from None
    if path.suffix == ".tsv":
        heads = (
            line[3:].split("\t", 1) for line in raw.splitlines() if line.startswith("## ") and "\t" in line
        )
        out = [text for ident, text in heads if ident and " " not in ident]  # not "## 컬럼명 : CHAR\tNE_TAG"
        if not out:
            raise KplmError(f"{path}: no '## <id>\\t<sentence>' lines (a KLUE NER/DP .tsv file expected)")
        return [_NER_SPAN.sub(r"\1", t) for t in out]
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise KplmError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, list):
        raise KplmError(f"{path}: expected a JSON list of KLUE examples")
    return [d[k] for d in data if isinstance(d, dict) for k in _KLUE_FIELDS if isinstance(d.get(k), str)]


def load_compare(path: Path) -> tuple[str, Any]:
    """(name, ``tokenizers.Tokenizer``) of a BERT ``vocab.txt`` or a Hugging Face tokenizer folder."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    if path.is_dir():
        from transformers import AutoTokenizer

        try:
            tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        except Exception as e:  # noqa: BLE001 - transformers raises many types for a bad folder
            raise KplmError(
                f"{path}: not a loadable Hugging Face tokenizer folder ({type(e).__name__})"
            ) from None
        if not getattr(tok, "is_fast", False):
            raise KplmError(f"{path}: needs a fast tokenizer (tokenizer.json)")
        return path.name, tok.backend_tokenizer
    if not path.is_file():
        raise KplmError(f"compare: not found: {path}")
    vocab: dict[str, int] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            vocab.setdefault(line.rstrip("\n"), len(vocab))
    if "[UNK]" not in vocab:
        raise KplmError(f"{path}: not a BERT vocab.txt (no [UNK] entry)")
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=False, lowercase=False
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    return path.parent.name if path.name == "vocab.txt" else path.stem, tok


def _eojeol_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(r"\S+", text)]


def _internal(starts: list[int], spans: list[tuple[int, int]]) -> set[int]:
    """The positions in ``starts`` that lie strictly inside an eojeol (not at its first character)."""
    inside = set()
    for s, e in spans:
        inside.update(range(s + 1, e))
    return {p for p in starts if p in inside}


class _Agreement:
    """Counts of subword boundaries (S), MeCab morpheme boundaries (M) and both, over eojeol interiors."""

    def __init__(self) -> None:
        self.sub = self.mor = self.both = 0

    def add(self, subword: set[int], morpheme: set[int]) -> None:
        self.sub += len(subword)
        self.mor += len(morpheme)
        self.both += len(subword & morpheme)

    def result(self) -> dict[str, float]:
        p = self.both / max(self.sub, 1)
        r = self.both / max(self.mor, 1)
        return {
            "boundary_precision": round(p, 4),
            "boundary_recall": round(r, 4),
            "boundary_f1": round(2 * p * r / max(p + r, 1e-12), 4),
        }


def raw_agreement(backend: Any, texts: list[str], mecab: list[set[int]]) -> dict[str, float]:
    """Morpheme-boundary agreement of raw-text segmentation (token start offsets inside eojeols)."""
    agreement = _Agreement()
    for text, enc, bounds in zip(
        texts, backend.encode_batch(texts, add_special_tokens=False), mecab, strict=True
    ):
        starts = [s for s, e in enc.offsets if e > s]
        agreement.add(_internal(starts, _eojeol_spans(text)), bounds)
    return agreement.result()


def measure_morpheme_mode(tokenizer: Any, texts: list[str], mecab: list[set[int]]) -> dict[str, Any]:
    """The report's figures for morpheme mode (tokens from :func:`segment_tokens`, one document at a time)."""
    unk = tokenizer.unk_token
    backend = tokenizer.backend_tokenizer
    agreement, n_tokens, n_unk, pieces, skipped, failed = _Agreement(), 0, 0, [], 0, []
    for i, (text, bounds) in enumerate(zip(texts, mecab, strict=True)):
        tokens = segment_tokens(tokenizer, text)
        n_tokens += len(tokens)
        n_unk += sum(t == unk for t, _ in tokens)
        ids = [backend.token_to_id(t) for t, _ in tokens]
        normalized = backend.normalizer.normalize_str(text) if backend.normalizer else text
        if roundtrip_key(backend.decode(ids, skip_special_tokens=False)) != roundtrip_key(normalized):
            failed.append(i)
        positions = [j for j, ch in enumerate(text) if not ch.isspace()]
        if sum(n for _, n in tokens) != len(positions):
            skipped += 1  # normalisation changed the characters: offsets cannot be mapped back
            continue
        starts, k = [], 0
        for _, n in tokens:
            if n:
                starts.append(positions[k])
            k += n
        spans = _eojeol_spans(text)
        agreement.add(_internal(starts, spans), bounds)
        owner = {p: w for w, (s, e) in enumerate(spans) for p in range(s, e)}
        per_eojeol = [0] * len(spans)
        for p in starts:
            per_eojeol[owner[p]] += 1
        pieces.extend(per_eojeol)
    eojeols = sum(len(t.split()) for t in texts)
    return {
        "docs": len(texts),
        "tokens": n_tokens,
        "tokens_per_eojeol": round(n_tokens / max(eojeols, 1), 4),
        "tokens_per_char": round(n_tokens / max(sum(len(t) - t.count(" ") for t in texts), 1), 4),
        "unk_rate": round(n_unk / max(n_tokens, 1), 6),
        "eojeols_3plus_pieces_share": round(sum(p >= 3 for p in pieces) / max(len(pieces), 1), 4),
        "roundtrip_failure_share": round(len(failed) / max(len(texts), 1), 6),
        "roundtrip_failed": failed,
        "boundary_docs_skipped": skipped,
        **agreement.result(),
    }


def _examples(backend: Any, texts: list[str], failed: list[int]) -> list[dict[str, Any]]:
    """Where the first few round trips go wrong: document index, position and short windows of both sides."""
    out = []
    for i in failed[:MAX_EXAMPLES]:
        norm = backend.normalizer.normalize_str(texts[i]) if backend.normalizer else texts[i]
        want = roundtrip_key(norm)
        got = roundtrip_key(
            backend.decode(backend.encode(texts[i], add_special_tokens=False).ids, skip_special_tokens=False)
        )
        at = next(
            (k for k, (a, b) in enumerate(zip(want, got, strict=False)) if a != b), min(len(want), len(got))
        )
        lo = max(at - EXAMPLE_WINDOW, 0)
        out.append(
            {
                "doc": i,
                "at": at,
                "expected": want[lo : at + EXAMPLE_WINDOW],
                "decoded": got[lo : at + EXAMPLE_WINDOW],
            }
        )
    return out


def _row(name: str, backend: Any, texts: list[str], mecab: list[set[int]] | None) -> dict[str, Any]:
    started = time.time()
    row = measure(backend, texts)
    failed = row.pop("roundtrip_failed")
    row["roundtrip_examples"] = _examples(backend, texts, failed)
    if mecab is not None:
        row.update(raw_agreement(backend, texts, mecab))
    row["vocab_size"] = backend.get_vocab_size(with_added_tokens=True)
    row["seconds"] = round(time.time() - started, 2)
    return {"name": name, **row}


def report_tokenizer(config: TokenizerReportConfig) -> dict[str, Any]:
    """Measure ``config.tokenizer`` (raw and morpheme mode) and each ``compare`` vocabulary on ``config.text``;
    write ``<output>.json`` and ``<output>.md`` and return the report."""
    from transformers import AutoTokenizer

    if not (config.tokenizer / "tokenizer.json").is_file():
        raise KplmError(f"{config.tokenizer}: not a tokenizer folder (no tokenizer.json)")
    tok = AutoTokenizer.from_pretrained(str(config.tokenizer), local_files_only=True)
    compare = [load_compare(p) for p in config.compare]
    texts = read_eval_texts(config.text, config.max_lines)
    if not texts:
        raise KplmError(f"no text to measure in {', '.join(map(str, config.text))}")
    mecab = None
    if config.morphemes:
        mecab = [_internal(morpheme_starts(t), _eojeol_spans(t)) for t in texts]
    rows = [_row(f"{config.tokenizer.name} (raw text)", tok.backend_tokenizer, texts, mecab)]
    if config.morphemes:
        morph = measure_morpheme_mode(tok, texts, mecab)
        morph["roundtrip_examples"] = [{"doc": i} for i in morph.pop("roundtrip_failed")[:MAX_EXAMPLES]]
        rows.append({"name": f"{config.tokenizer.name} (morpheme mode)", **morph})
    rows += [_row(name, backend, texts, mecab) for name, backend in compare]
    base = rows[0]["tokens_per_eojeol"]
    for row in rows:
        row["tokens_per_eojeol_vs_first"] = round(base / max(row["tokens_per_eojeol"], 1e-9), 4)
    result = {
        "tokenizer": str(config.tokenizer),
        "text": [str(p) for p in config.text],
        "docs": len(texts),
        "eojeols": sum(len(t.split()) for t in texts),
        "chars": sum(len(t) - t.count(" ") for t in texts),
        "rows": rows,
    }
    output = config.output or config.tokenizer / f"report_{config.text[0].name.split('.')[0]}"
    output.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(output.with_name(output.name + ".json"), result)
    md = output.with_name(output.name + ".md")
    tmp = md.with_name(f".{md.name}.tmp")
    tmp.write_text(render_markdown(result), encoding="utf-8")
    tmp.replace(md)
    return {**result, "output": str(output)}


def render_markdown(result: dict[str, Any]) -> str:
    """The report as a Markdown table (one row per tokenizer/mode)."""
    cols = [
        ("vocab", "vocab_size"),
        ("tokens/eojeol", "tokens_per_eojeol"),
        ("first ÷ this", "tokens_per_eojeol_vs_first"),
        ("tokens/char", "tokens_per_char"),
        ("[UNK] rate", "unk_rate"),
        ("≥3 pieces", "eojeols_3plus_pieces_share"),
        ("boundary P", "boundary_precision"),
        ("boundary R", "boundary_recall"),
        ("boundary F1", "boundary_f1"),
        ("round-trip failures", "roundtrip_failure_share"),
    ]
    lines = [
        "# Tokenizer report",
        "",
        f"Text: {', '.join(f'`{t}`' for t in result['text'])}: {result['docs']:,} documents, "
        f"{result['eojeols']:,} eojeols, {result['chars']:,} characters (NFC, spaces not counted).",
        "",
        "| tokenizer | " + " | ".join(c for c, _ in cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for row in result["rows"]:
        lines.append(f"| {row['name']} | " + " | ".join(str(row.get(k, "")) for _, k in cols) + " |")
    lines += [
        "",
        "Boundary P/R: subword boundaries inside eojeols against MeCab-ko morpheme boundaries inside eojeols "
        "(P: share of subword boundaries that are morpheme boundaries; R: share of morpheme boundaries "
        "that are subword boundaries). [UNK] rate: share of tokens. Round trip: `decode(encode(x))` against "
        "the tokenizer's normalisation of `x`, modulo spaces next to punctuation; the JSON lists the first "
        "failures.",
        "",
    ]
    return "\n".join(lines)
