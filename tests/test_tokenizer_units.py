"""kplm.tokenizer.units (the fast training-unit path) and the Hanja alphabet (``required_characters``).

The unit path is checked against the reference per-morpheme implementation (MeCab byte offsets and BERT's
pre-tokenizer) on real NSMC reviews; the Hanja alphabet by training small vocabularies with the default
settings and tokenizing real sentences that carry Hanja.
"""

from __future__ import annotations

import gzip
import json
import os
import unicodedata
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"

import pytest

from kplm.tokenizer.alphabet import choose_alphabet, ksx1001_hanja, required_characters
from kplm.tokenizer.config import TokenizerConfig
from kplm.tokenizer.morphemes import MARKER, SPACE, bert_normalize, eojeol_morphemes, word_morphemes
from kplm.tokenizer.report import is_bert_punctuation, is_cjk_ideograph
from kplm.tokenizer.train import train_tokenizer
from kplm.tokenizer.units import bpe_units, init_worker, mark_morphemes, training_lines, wordpiece_units

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
NSMC = DATA / "nsmc" / "reviews.jsonl.gz"
# News-style sentences with Hanja, the main [UNK] source of NSMC-trained vocabularies on KLUE text
HANJA_SENTENCES = [
    "文대통령은 靑에서 與野 대표들과 만났다.",
    "美中 무역분쟁이 韓 경제에 미치는 영향",
    "大韓民國 憲法 제1조 1항은 민주공화국을 말한다.",
]


def _nsmc(start: int, stop: int) -> list[str]:
    out = []
    with gzip.open(NSMC, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= stop:
                break
            if i >= start:
                out.append(json.loads(line)["text"])
    return out


def _reference_wordpiece(norm: str) -> str:
    """The unit line of the per-morpheme implementation (word_morphemes) that units.py replaced."""
    units = []
    for pieces in word_morphemes(norm, "morpheme"):
        units.append(pieces[0])
        units.extend(MARKER + p for p in pieces[1:])
    return " ".join(units)


def test_wordpiece_units_equal_the_per_morpheme_reference():
    texts = [
        bert_normalize(unicodedata.normalize("NFC", t)).replace(MARKER, " ") for t in _nsmc(40000, 41500)
    ]
    texts += [
        "진 캘리 사랑해요",  # MeCab-ko's dictionary has "캘리 " with a trailing space
        "ㅋㅋ...(웃음) 최고!!",  # MeCab makes "..(" one morpheme; BERT splits every punctuation mark
        bert_normalize("했었습니다 韓國語 😀좋아요 " + "가" * 25000),  # longer than one MeCab call
    ]
    for text in texts:
        marked = mark_morphemes(text)
        assert marked.replace(MARKER, "") == text
        assert wordpiece_units(marked) == _reference_wordpiece(text)


def test_bpe_units_cut_morphemes_and_punctuation_in_both_modes():
    text = "아버지가방에 들어가신다. ㅋㅋ...(웃음)"
    assert bpe_units(mark_morphemes(text)) == "▁아버지 가 방 에 ▁들어가 신다 . ▁ㅋㅋ . . . ( 웃음 )"
    assert bpe_units(text) == "▁아버지가방에 ▁들어가신다 . ▁ㅋㅋ . . . ( 웃음 )"
    for review in _nsmc(50000, 50300):
        norm = " ".join(review.split())
        line = bpe_units(mark_morphemes(norm))
        for unit in line.split():
            core = unit.removeprefix(SPACE)
            assert core and (len(core) == 1 or not any(map(is_bert_punctuation, core)))
        # units rebuild the eojeols, and every morpheme start is a unit start
        words = line.replace(" ", "").split(SPACE)[1:]
        assert words == norm.split()
        starts = {len("".join(p[:k])) for _, p in eojeol_morphemes(norm) for k in range(1, len(p))}
        assert len(line.split()) >= len(norm.split()) + len(starts) - sum(s == 0 for s in starts)


def test_training_lines_counts_and_cpu_time():
    init_worker("morpheme", ["[PHONE]"], "wordpiece")
    texts = ["아버지가방에 들어가신다.", "연락처는[PHONE]이고 좋다"]
    lines, counts, n_chars, n_docs, cpu = training_lines(texts)
    assert lines.splitlines()[0] == f"아버지 {MARKER}가 {MARKER}방 {MARKER}에 들어가 {MARKER}신다 ."
    assert "[PHONE]" not in lines and "PHONE" not in counts
    assert counts["가"] == 2 and n_chars == sum(map(len, texts)) and n_docs == 2 and cpu >= 0


def test_ksx1001_hanja_set_and_fallback():
    hanja = ksx1001_hanja()
    assert len(hanja) == len(set(hanja)) == 4622
    assert all(is_cjk_ideograph(c) and unicodedata.normalize("NFC", c) == c for c in hanja)
    assert not any("\uf900" <= c <= "\ufaff" for c in hanja)  # compatibility forms never survive NFC
    for c in "大韓民國憲法文靑與野美中韓":
        assert c in hanja, c
    ksx, mid, full = (set(required_characters(n)) for n in ("ksx1001", "ksx1001_hanja", "ksx1001_all"))
    assert ksx < mid < full and set(hanja) < mid - ksx and "▲" in full - mid and "ア" in full - mid
    punctuation = mid - ksx - set(hanja)  # KS X 1001's punctuation: also one WordPiece entry each
    assert (
        len(punctuation) == 56
        and all(map(is_bert_punctuation, punctuation))
        and set("·…「」“”") < punctuation
    )
    counts = {"가": 10, "나": 5}
    # WordPiece: a Hanja is a word of its own (one entry), a syllable needs its ## form too
    assert len(choose_alphabet(counts, 1.0, 11000, "ksx1001_hanja")) == len(mid)
    fallback = choose_alphabet(counts, 1.0, 6000, "ksx1001_hanja")
    assert "튤" in fallback and "韓" not in fallback
    assert TokenizerConfig(input=[NSMC], output=Path("x")).required_characters == "ksx1001_hanja"


@pytest.mark.parametrize(("model", "vocab_size"), [("wordpiece", 21000), ("bpe", 16000)])
def test_default_alphabet_spells_hanja_sentences_without_unk(tmp_path, model, vocab_size):
    out = tmp_path / model
    counts = train_tokenizer(
        TokenizerConfig(
            input=[NSMC], output=out, model=model, vocab_size=vocab_size, max_docs=3000, report_docs=0
        )
    )
    assert counts["alphabet_chars"] >= 2350 + 4622
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(out), local_files_only=True)
    for sentence in HANJA_SENTENCES:
        tokens = tok.tokenize(sentence)
        assert "[UNK]" not in tokens, (sentence, tokens)
        assert tok.decode(tok(sentence)["input_ids"], skip_special_tokens=True).replace(
            " ", ""
        ) == sentence.replace(" ", "")
        if model == "wordpiece":  # each Hanja is its own word: no ## form needed
            assert all(not (t.startswith("##") and any(map(is_cjk_ideograph, t))) for t in tokens)
