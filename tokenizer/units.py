"""Training units for the vocabulary trainers, built with string operations instead of per-morpheme objects.

:func:`training_lines` turns a batch of documents into the unit file described in
:mod:`kplm.tokenizer.morphemes` (WordPiece: BERT pre-tokens cut at morpheme starts, continuation morphemes
glued to :data:`~kplm.tokenizer.morphemes.MARKER`; BPE: eojeols cut at morpheme starts and around
punctuation, first piece after ``▁``). It is the hot loop of ``kplm tokenizer train``, so it avoids Python
work per morpheme (about 1.3x the CPU time of MeCab-ko's analysis alone, where the per-morpheme version
took 2.2x):

1. MeCab-ko writes each morpheme's surface *with the whitespace before it* (node format ``%M``) followed by
   a tab, one call per document (:func:`mark_morphemes`); replacing the tabs that are not next to
   whitespace by the marker gives the text with a marker at every eojeol-internal morpheme start
   (``"아버지\\ue000가\\ue000방\\ue000에 들어가\\ue000신다\\ue000."``). MeCab's node objects (``parseToNode``)
   cost more than the analysis itself.
2. BERT's pre-tokenization is one ``str.translate``: every BERT punctuation character becomes a word of its
   own, and a marker next to it is dropped (a punctuation mark always starts a new word).
3. Character counts for the alphabet come from one ``collections.Counter`` per batch.

The result is checked against the text (markers removed, it must be the normalised text); a document
where MeCab's surfaces do not add up falls back to the byte-offset path of
:func:`kplm.tokenizer.morphemes.morpheme_starts`. The WordPiece unit file is identical to the per-morpheme
implementation it replaced (checked on 20,000 NSMC reviews, both modes).
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections import Counter
from typing import Any

from kplm.tokenizer.morphemes import MARKER, SPACE, bert_normalize, bpe_normalizer, morpheme_starts

_CHUNK_CHARS = 20000  # as in morpheme_starts: MeCab is given at most this many characters at once
_TAGGER: Any = None
_PUNCT: tuple[dict[int, str], dict[int, str]] | None = None
_WORKER: dict[str, Any] = {}


def surface_tagger() -> Any:
    """This process's MeCab-ko tagger: ``<whitespace><surface>\\t`` per morpheme, ``\\n`` at the end."""
    global _TAGGER
    if _TAGGER is None:
        import mecab_ko as MeCab

        _TAGGER = MeCab.Tagger(r"-F%M\\t -U%M\\t -E\\n")
    return _TAGGER


def punctuation_tables() -> tuple[dict[int, str], dict[int, str]]:
    """``str.translate`` tables that isolate every BERT punctuation character (ASCII symbols and Unicode
    ``P*``): with spaces (WordPiece pre-tokens) and with markers (BPE unit cuts)."""
    global _PUNCT
    if _PUNCT is None:
        # planes 4-13 and 15-16 hold no punctuation (unassigned or private use): skipping them is exact
        chars = [
            chr(cp)
            for cp in (*range(0x40000), *range(0xE0000, 0xF0000))
            if (33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126)
            or unicodedata.category(chr(cp)).startswith("P")
        ]
        _PUNCT = ({ord(c): f" {c} " for c in chars}, {ord(c): f"{MARKER}{c}{MARKER}" for c in chars})
    return _PUNCT


def mark_morphemes(text: str) -> str:
    """``text`` with :data:`MARKER` before every morpheme that starts inside a whitespace-separated word.

    ``text`` must not contain the marker. ``"아버지가방에 들어가신다."`` → ``"아버지◆가◆방◆에 들어가◆신다◆."``
    (◆ = marker). Removing the markers always gives ``text`` back.
    """
    if len(text) > _CHUNK_CHARS or "\t" in text or "\n" in text or "\r" in text:
        return _mark_by_offsets(text)
    out = surface_tagger().parse(text)
    body = out[:-2] if out.endswith("\t\n") else out.rstrip("\n")
    marked = body.replace("\t ", " ").replace(" \t", " ").replace("\t", MARKER)
    if marked.replace(MARKER, "") != text:
        return _mark_by_offsets(text)
    return marked


def _mark_by_offsets(text: str) -> str:
    """:func:`mark_morphemes` through MeCab's byte offsets (long texts, tabs or newlines, odd surfaces)."""
    parts, prev = [], 0
    for start in morpheme_starts(text):
        if 0 < start < len(text) and not text[start - 1].isspace() and not text[start].isspace():
            parts.append(text[prev:start])
            prev = start
    parts.append(text[prev:])
    return MARKER.join(parts)


def wordpiece_units(marked: str) -> str:
    """WordPiece units of marked text: BERT pre-tokens, continuation morphemes as ``MARKER`` + piece.

    Punctuation gets spaces around it; a marker next to a space then came from next to punctuation (a
    marker always sits between two non-space characters) and is dropped: punctuation starts a new word.
    """
    split = marked.translate(punctuation_tables()[0])
    split = split.replace(MARKER + " ", " ").replace(" " + MARKER, " ")
    return " ".join(split.replace(MARKER, " " + MARKER).split())


def bpe_units(marked: str) -> str:
    """BPE units of marked (or plain) text: eojeols cut at the markers and around every punctuation
    character, each eojeol's first piece after ``▁``, its later pieces bare (continuations).

    Punctuation is cut in both modes, as BERT's pre-tokenizer does for WordPiece: MeCab-ko already makes
    nearly every punctuation mark a morpheme of its own, and without the cut a plain-mode baseline spends
    vocabulary on pieces such as ``다.`` or ``요..`` that a morpheme vocabulary can never learn, so the two
    would not be compared on the same terms.
    """
    cut = marked.translate(punctuation_tables()[1])
    line = " ".join(SPACE + word.strip(MARKER) for word in cut.split())
    return " ".join(line.replace(MARKER, " ").split())


def init_worker(mode: str, extra_tokens: list[str], model: str = "wordpiece") -> None:
    """Set up a pre-tokenization process (Pool initializer); the tagger itself is created lazily."""
    _WORKER["mode"] = mode
    _WORKER["model"] = model
    _WORKER["bpe_norm"] = bpe_normalizer() if model == "bpe" else None
    _WORKER["extra"] = (
        re.compile("|".join(re.escape(t) for t in sorted(extra_tokens, key=len, reverse=True)))
        if extra_tokens
        else None
    )


def normalize_for_training(text: str) -> str:
    """The worker's normalisation of one document (extra tokens removed, saved tokenizer's normaliser)."""
    extra, bpe_norm = _WORKER["extra"], _WORKER["bpe_norm"]
    if extra is not None:
        text = extra.sub(" ", text)
    if bpe_norm is not None:
        return bpe_norm.normalize_str(text).replace(SPACE, " ").replace(MARKER, " ")
    return bert_normalize(unicodedata.normalize("NFC", text)).replace(MARKER, " ")


def training_lines(texts: list[str]) -> tuple[str, dict[str, int], int, int, float]:
    """Pre-tokenize a batch of documents for the trainer (runs in a worker after :func:`init_worker`).

    Returns the documents' units as lines, the character counts of the normalised text, the numbers of
    characters and documents read, and the CPU seconds this call took (``time.process_time``). Extra tokens
    (placeholders such as ``[PHONE]``) are removed first: they are whole vocabulary entries and must not
    shape the pieces.
    """
    started = time.process_time()
    morph, bpe = _WORKER["mode"] == "morpheme", _WORKER["bpe_norm"] is not None
    norms = [normalize_for_training(t) for t in texts]
    units = bpe_units if bpe else wordpiece_units
    lines = [units(mark_morphemes(n) if morph else n) for n in norms]
    counts = dict(Counter("".join(norms)))
    cpu = time.process_time() - started
    return "\n".join(lines) + "\n", counts, sum(map(len, texts)), len(texts), cpu
