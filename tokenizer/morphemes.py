"""MeCab-ko morpheme boundaries: training units for the vocabulary, and morpheme-mode tokenization.

**Training units** (built fast by :mod:`kplm.tokenizer.units`). Text is normalised exactly as the saved tokenizer normalises it (after NFC), then split into
BERT pre-tokens (whitespace and punctuation, :class:`tokenizers.pre_tokenizers.BertPreTokenizer`), so training
sees the same "words" as raw-text inference. In ``morpheme`` mode every pre-token is cut where a MeCab-ko
morpheme starts. The first unit stays a plain word; each later unit is glued to :data:`MARKER`
(``"아버지가" → "아버지 \\ue000가"``), so the BPE trainer (continuation prefix ``##``) builds the morpheme's
pieces as ``##`` pieces and never merges across a morpheme boundary. Units are always substrings of the text
(cut by MeCab's byte offsets, never its surface or feature fields), so they concatenate back to the pre-token.

**BPE units** (``model="bpe"``, see :mod:`kplm.tokenizer.bpe`): whitespace eojeols cut at morpheme starts and
around punctuation (in plain mode too, as BERT's pre-tokenizer does for WordPiece), the first piece of each
prefixed with :data:`SPACE` (``"아버지가방에" → "▁아버지 가 방 에"``): Metaspace marks word starts, so the bare
pieces are the continuation forms.

**Morpheme mode at inference.** The saved tokenizer runs on raw text (greedy longest-match WordPiece, no MeCab).
For users who want MeCab boundaries respected at inference too::

    from kplm.tokenizer.morphemes import encode_morphemes, tokenize_morphemes
    tokens = tokenize_morphemes(tok, "아버지가방에들어가신다")  # ['아버지', '##가', '##방', '##에', ...]
    batch = encode_morphemes(tok, premise, hypothesis)   # input_ids / token_type_ids / attention_mask

This cannot be a text-to-text ``pretokenize_morphemes(text)`` feeding ``tok(...)``: transformers 5's
``BertTokenizer`` always rebuilds ``BertNormalizer`` + ``BertPreTokenizer``; a boundary mark that is a space
or punctuation (``##`` included) starts a new word, whose first piece gets a word-initial id instead of the
``##`` id, and any other mark stays inside the word and turns it into [UNK]. Morpheme mode therefore runs
the same WordPiece rule on the tokenizer's own vocabulary per morpheme (first morpheme of a pre-token
word-initial, later ones with ``##``); its tokens are ordinary vocabulary entries and ``tok.decode``
reverses them. For BPE tokenizers morpheme mode applies the merges to each morpheme (``▁`` before the first
of an eojeol). A morpheme that cannot be covered becomes one [UNK] (raw mode loses the whole word). Raw and
morpheme mode agree on about 94% of eojeols (KLUE-NLI premises, 16k vocabulary); pretrain and fine-tune
in the same mode.
"""

from __future__ import annotations

import re
from typing import Any

MARKER = "\ue000"
"""Private-use character that marks a continuation (non-initial) morpheme in the trainer's input."""

SPACE = "\u2581"
"""Metaspace's word-start mark in BPE vocabularies (``▁아버지``)."""

NORMALIZER_SETTINGS = {
    "clean_text": True,
    "handle_chinese_chars": True,
    "strip_accents": False,
    "lowercase": False,
}
"""BertNormalizer settings of the saved tokenizer (and of training): no lowercasing, no accent stripping (NFD
would decompose Hangul syllables into jamo), CJK ideographs (Hanja) split into one word each."""

MAX_CHARS_PER_WORD = 100  # WordPiece's max_input_chars_per_word: longer pre-tokens become [UNK]
_CHUNK_CHARS = 20000  # MeCab is given at most this many characters at once

_TAGGER: Any = None
_NORMALIZER: Any = None
_PRE_TOKENIZER: Any = None


def tagger() -> Any:
    """This process's MeCab-ko tagger, created on first use (never at import, never pickled)."""
    global _TAGGER
    if _TAGGER is None:
        import mecab_ko as MeCab

        _TAGGER = MeCab.Tagger()
    return _TAGGER


def bert_normalize(text: str) -> str:
    """The saved tokenizer's normalisation (``BertNormalizer`` with :data:`NORMALIZER_SETTINGS`)."""
    global _NORMALIZER
    if _NORMALIZER is None:
        from tokenizers import normalizers

        _NORMALIZER = normalizers.BertNormalizer(**NORMALIZER_SETTINGS)
    return _NORMALIZER.normalize_str(text)


def pre_tokenize(text: str) -> list[tuple[str, tuple[int, int]]]:
    """BERT pre-tokens (whitespace/punctuation split) of normalised ``text`` with character offsets."""
    global _PRE_TOKENIZER
    if _PRE_TOKENIZER is None:
        from tokenizers import pre_tokenizers

        _PRE_TOKENIZER = pre_tokenizers.BertPreTokenizer()
    return _PRE_TOKENIZER.pre_tokenize_str(text)


def morpheme_starts(text: str) -> list[int]:
    """Sorted character offsets at which MeCab-ko morphemes start in ``text`` (whitespace is skipped).

    Offsets come from MeCab's byte lengths (``rlength - length`` = whitespace before a morpheme), not from
    surface strings, so they always index the original text. Returns [] if MeCab's offsets do not line up.
    """
    starts: list[int] = []
    offset = 0
    while offset < len(text):
        end = len(text)
        if end - offset > _CHUNK_CHARS:
            cut = text.rfind(" ", offset + 1, offset + _CHUNK_CHARS)
            end = cut if cut > offset else offset + _CHUNK_CHARS
        starts.extend(_chunk_starts(text[offset:end], offset))
        offset = end
    return starts


def _chunk_starts(text: str, base: int) -> list[int]:
    data = text.encode("utf-8")
    starts = []
    pos_b, pos_c = 0, base
    node = tagger().parseToNode(text)
    try:
        while node is not None:
            if node.stat not in (2, 3):  # BOS/EOS nodes carry no text
                skip = node.rlength - node.length
                if skip:
                    pos_c += len(data[pos_b : pos_b + skip].decode("utf-8"))
                    pos_b += skip
                starts.append(pos_c)
                pos_c += len(data[pos_b : pos_b + node.length].decode("utf-8"))
                pos_b += node.length
            node = node.next
    except UnicodeDecodeError:
        return []
    return starts if pos_b <= len(data) else []


def word_morphemes(text: str, mode: str = "morpheme") -> list[list[str]]:
    """Each BERT pre-token of normalised ``text`` as its list of morpheme pieces (one piece in plain mode).

    ``"아버지가방에 들어가신다."`` → ``[["아버지", "가", "방", "에"], ["들어가", "신다"], ["."]]``; the pieces of
    a pre-token always concatenate back to it.
    """
    words = pre_tokenize(text)
    if mode == "plain":
        return [[w] for w, _ in words]
    starts = morpheme_starts(text)
    result = []
    i = 0
    for word, (start, end) in words:
        while i < len(starts) and starts[i] <= start:
            i += 1
        pieces, prev = [], start
        while i < len(starts) and starts[i] < end:
            pieces.append(text[prev : starts[i]])
            prev = starts[i]
            i += 1
        pieces.append(text[prev:end])
        result.append([p for p in pieces if p] or [word])
    return result


def eojeol_morphemes(text: str, mode: str = "morpheme") -> list[tuple[int, list[str]]]:
    """Each whitespace-separated eojeol of ``text`` as (start offset, its MeCab-ko morpheme pieces).

    ``"아버지가방에 들어가신다."`` → ``[(0, ["아버지", "가", "방", "에"]), (7, ["들어가", "신다", "."])]``;
    one piece per eojeol in plain mode. The pieces of an eojeol always concatenate back to it.
    """
    starts = morpheme_starts(text) if mode == "morpheme" else []
    out, i = [], 0
    for m in re.finditer(r"\S+", text):
        start, end = m.span()
        while i < len(starts) and starts[i] <= start:
            i += 1
        cuts = [start]
        while i < len(starts) and starts[i] < end:
            cuts.append(starts[i])
            i += 1
        cuts.append(end)
        out.append((start, [text[a:b] for a, b in zip(cuts, cuts[1:], strict=False) if b > a]))
    return out


def bpe_normalizer() -> Any:
    """Normaliser of BPE tokenizers: BERT's text cleaning (no Hanja split, no lowercasing), then NFC."""
    from tokenizers import normalizers

    bert = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False
    )
    return normalizers.Sequence([bert, normalizers.NFC()])


# ---------------------------------------------------------------------------------------------- inference


def _backend(tokenizer: Any) -> Any:
    return getattr(tokenizer, "backend_tokenizer", tokenizer)


def _wordpiece(backend: Any, piece: str, continuation: bool) -> list[str] | None:
    """Greedy longest-match-first WordPiece of ``piece``; None when some part is not in the vocabulary."""
    out, start = [], 0
    while start < len(piece):
        end, found = len(piece), None
        while start < end:
            sub = piece[start:end]
            if start > 0 or continuation:
                sub = "##" + sub
            if backend.token_to_id(sub) is not None:
                found = sub
                break
            end -= 1
        if found is None:
            return None
        out.append(found)
        start = end
    return out


def is_bpe(tokenizer: Any) -> bool:
    """True for a BPE (Metaspace) tokenizer, False for WordPiece."""
    return type(_backend(tokenizer).model).__name__ == "BPE"


def segment_tokens(tokenizer: Any, text: str, word_start: bool = True) -> list[tuple[str, int]]:
    """Morpheme-mode tokens of ``text`` (no added tokens in it) with the number of normalised characters each
    covers; a [UNK] covers its whole morpheme (WordPiece) or one character (BPE). ``word_start=False``: the
    text directly follows an added token, so (BPE only) an eojeol it starts with continues a word."""
    backend = _backend(tokenizer)
    unk = getattr(tokenizer, "unk_token", None) or "[UNK]"
    norm = backend.normalizer.normalize_str(text) if backend.normalizer else text
    out: list[tuple[str, int]] = []
    if is_bpe(backend):
        for start, pieces in eojeol_morphemes(norm.replace(SPACE, " ")):
            for i, piece in enumerate(pieces):
                starts_word = i == 0 and (word_start or start > 0)
                for t in backend.model.tokenize(SPACE + piece if starts_word else piece):
                    out.append((t.value, 1 if t.value == unk else len(t.value.removeprefix(SPACE))))
        return out
    for pieces in word_morphemes(norm, "morpheme"):
        if sum(map(len, pieces)) > MAX_CHARS_PER_WORD:
            out.append((unk, sum(map(len, pieces))))
            continue
        for i, piece in enumerate(pieces):
            found = _wordpiece(backend, piece, continuation=i > 0)
            out.extend((t, len(t.removeprefix("##"))) for t in found) if found else out.append(
                (unk, len(piece))
            )
    return out


def tokenize_morphemes(tokenizer: Any, text: str) -> list[str]:
    """Tokens of raw ``text`` that never cross a MeCab-ko morpheme boundary (see the module docstring).

    ``tokenizer`` is a loaded kplm tokenizer (``AutoTokenizer.from_pretrained``) or a ``tokenizers.Tokenizer``,
    WordPiece or BPE. Added tokens (specials, extra tokens such as ``[PHONE]``) stay whole, as in raw mode.
    """
    backend = _backend(tokenizer)
    added = sorted(backend.get_added_tokens_decoder().values(), key=lambda t: len(t.content), reverse=True)
    pattern = re.compile("(" + "|".join(re.escape(t.content) for t in added) + ")") if added else None
    segments = pattern.split(text) if pattern else [text]
    tokens: list[str] = []
    for k, segment in enumerate(segments):
        if k % 2 == 1:
            tokens.append(segment)
        else:
            tokens.extend(t for t, _ in segment_tokens(tokenizer, segment, word_start=k == 0))
    return tokens


def encode_morphemes(tokenizer: Any, text: str, text_pair: str | None = None) -> dict[str, list[int]]:
    """Model inputs for ``text`` (and ``text_pair``) in morpheme mode: ``[CLS] A [SEP] (B [SEP])``."""
    ids_a = tokenizer.convert_tokens_to_ids(tokenize_morphemes(tokenizer, text))
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    input_ids, types = [cls, *ids_a, sep], [0] * (len(ids_a) + 2)
    if text_pair is not None:
        ids_b = tokenizer.convert_tokens_to_ids(tokenize_morphemes(tokenizer, text_pair))
        input_ids += [*ids_b, sep]
        types += [1] * (len(ids_b) + 1)
    return {"input_ids": input_ids, "token_type_ids": types, "attention_mask": [1] * len(input_ids)}
