"""kplm.tokenizer with ``model="bpe"`` (Metaspace BPE learned from MeCab-ko morphemes) and ``report_tokenizer``.

One morpheme-mode and one plain-mode BPE tokenizer are trained per module on the first 10,000 NSMC reviews
(vocabulary 4,000 rounded up to a multiple of 64) and shared by the tests here and in test_tokenizer_report.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"

import pytest

from kplm.config import build
from kplm.errors import KplmError
from kplm.tokenizer.alphabet import choose_alphabet, required_characters
from kplm.tokenizer.config import TokenizerConfig, TokenizerReportConfig
from kplm.tokenizer.evaluate import load_compare, read_eval_texts, report_tokenizer
from kplm.tokenizer.morphemes import SPACE, eojeol_morphemes, tokenize_morphemes
from kplm.tokenizer.train import train_tokenizer

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
NSMC = DATA / "nsmc" / "reviews.jsonl.gz"
KLUE_NLI = DATA / "klue" / "klue-nli-v1.1_dev.json"
EXAMPLE = "아버지가방에들어가신다"
EXTRA = ["[PHONE]", "[EMAIL]"]


def bpe_config(output: Path, **kw) -> TokenizerConfig:
    base = {
        "input": [NSMC],
        "output": output,
        "model": "bpe",
        "vocab_size": 4000,
        "max_docs": 10000,
        "extra_tokens": EXTRA,
        "unused_tokens": 2,
        "pad_to_multiple_of": 64,
        "num_proc": 1,
    }
    return TokenizerConfig(**{**base, **kw})


def load(folder: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)


@pytest.fixture(scope="module")
def bpe_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bpe") / "morpheme"
    train_tokenizer(bpe_config(out, mode="morpheme"))
    return out


@pytest.fixture(scope="module")
def bpe_plain_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bpe") / "plain"
    train_tokenizer(bpe_config(out, mode="plain"))
    return out


def _premise_eojeols(n: int) -> list[str]:
    premises = dict.fromkeys(d["premise"] for d in json.loads(KLUE_NLI.read_text(encoding="utf-8")))
    return [w for t in list(premises)[:n] for w in t.split()]


def test_bpe_folder_loads_with_metaspace_and_bert_specials(bpe_dir):
    tok = load(bpe_dir)
    assert tok.is_fast and len(tok) == 4032  # 4000 rounded up to a multiple of 64
    spec = json.loads((bpe_dir / "tokenizer.json").read_text(encoding="utf-8"))
    assert spec["model"]["type"] == "BPE" and spec["pre_tokenizer"]["type"] == "Metaspace"
    assert [tok.convert_ids_to_tokens(i) for i in range(9)] == [
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]", "[unused1]", *EXTRA
    ]  # fmt: skip
    vocab = (bpe_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert len(vocab) == len(set(vocab)) == 4032
    assert tok.mask_token_id == 4 and tok.pad_token_id == 0
    record = json.loads((bpe_dir / "kplm_record.json").read_text(encoding="utf-8"))
    assert record["counts"]["model"] == "bpe" and record["counts"]["heldout"]["unk_rate"] < 0.01


def test_bpe_raw_text_continuations_round_trip_and_pairs(bpe_dir):
    tok = load(bpe_dir)
    tokens = tok.tokenize(EXAMPLE + " 좋다")
    assert "[UNK]" not in tokens and tokens[0] == SPACE + "아버지"
    # continuation pieces are the bare ones: exactly two word starts, one per eojeol
    assert sum(t.startswith(SPACE) for t in tokens) == 2
    enc = tok(EXAMPLE + "?", "배우도 좋다")
    ids, types = enc["input_ids"], enc["token_type_ids"]
    assert ids[0] == tok.cls_token_id and ids.count(tok.sep_token_id) == 2 and ids[-1] == tok.sep_token_id
    assert (
        types[: ids.index(tok.sep_token_id) + 1] == [0] * (ids.index(tok.sep_token_id) + 1) and types[-1] == 1
    )
    assert tok.decode(enc["input_ids"], skip_special_tokens=True) == EXAMPLE + "? 배우도 좋다"
    text = "연락처는[PHONE]이고 메일은 [EMAIL]입니다"
    assert tok.tokenize(text).count("[PHONE]") == 1
    assert tok.decode(tok(text)["input_ids"], skip_special_tokens=True) == text
    after = tok.tokenize(text)  # text glued to an added token continues its word, in both modes
    assert not after[after.index("[PHONE]") + 1].startswith(SPACE)
    morph = tokenize_morphemes(tok, text)
    assert not morph[morph.index("[PHONE]") + 1].startswith(SPACE)


def test_bpe_vocabulary_holds_bare_particles_and_endings(bpe_dir):
    vocab = set((bpe_dir / "vocab.txt").read_text(encoding="utf-8").splitlines())
    for piece in ("는", "을", "에서", "습니다", "으로", "지만"):
        assert piece in vocab, piece
    # morpheme training never learns a piece that spans a particle and the next morpheme
    assert SPACE + "영화가" not in vocab


def test_bpe_pieces_never_glue_punctuation_to_letters(bpe_dir, bpe_plain_dir):
    from kplm.tokenizer.report import is_bert_punctuation

    for folder in (bpe_dir, bpe_plain_dir):  # punctuation is cut in both modes, as BERT does for WordPiece
        vocab = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
        mixed = [
            t
            for t in vocab
            if not t.startswith("[")
            and len(core := t.removeprefix(SPACE)) > 1
            and any(map(is_bert_punctuation, core))
            and not all(map(is_bert_punctuation, core))
        ]
        assert not mixed, mixed[:5]


def test_bpe_morpheme_mode_and_raw_agreement(bpe_dir, bpe_plain_dir):
    tok, plain = load(bpe_dir), load(bpe_plain_dir)
    tokens = tokenize_morphemes(tok, EXAMPLE + ".")
    assert tokens[:2] == [SPACE + "아버지", "가"] and tokens[-1] == "."
    assert "".join(tokens).replace(SPACE, "") == EXAMPLE + "."
    eojeols = _premise_eojeols(200)

    def agreement(t):
        return sum(t.tokenize(w) == tokenize_morphemes(t, w) for w in eojeols) / len(eojeols)

    ours, base = agreement(tok), agreement(plain)
    assert ours > 0.8 and ours > base + 0.15, (ours, base)


def test_bpe_is_independent_of_num_proc(tmp_path):
    corpus = tmp_path / "small.jsonl"
    import gzip

    with gzip.open(NSMC, "rt", encoding="utf-8") as f, open(corpus, "w", encoding="utf-8") as out:
        for i, line in enumerate(f):
            if i >= 1500:
                break
            out.write(line)
    kw = {"input": [corpus], "vocab_size": 1500, "max_docs": None, "required_characters": "none"}
    train_tokenizer(bpe_config(tmp_path / "one", **kw))
    train_tokenizer(bpe_config(tmp_path / "two", num_proc=2, **kw))
    one = (tmp_path / "one" / "tokenizer.json").read_text(encoding="utf-8")
    assert one == (tmp_path / "two" / "tokenizer.json").read_text(encoding="utf-8")


def test_eojeol_morphemes_cut_at_mecab_starts():
    parts = eojeol_morphemes("아버지가방에 들어가신다.")
    assert parts[0] == (0, ["아버지", "가", "방", "에"])
    assert parts[1][0] == 7 and "".join(parts[1][1]) == "들어가신다." and parts[1][1][-1] == "."
    assert eojeol_morphemes("아버지가 방에", "plain") == [(0, ["아버지가"]), (5, ["방에"])]


def test_required_characters_and_budget():
    ksx = required_characters("ksx1001")
    assert len([c for c in ksx if "가" <= c <= "힣"]) == 2350 and "튤" in ksx and "ᄏ" in ksx and "ㅋ" in ksx
    full = required_characters("ksx1001_all")
    # the 4,888 KS X 1001 Hanja as NFC leaves them: 268 compatibility duplicates fold into unified ones
    assert set(ksx) < set(full) and sum("\u3400" <= c <= "\u9fff" for c in full) == 4622
    assert not any("\uf900" <= c <= "\ufaff" for c in full)
    assert "▲" in full and "㎡" in full and "州" in full
    counts = {"가": 10, "나": 5}
    assert "튤" in choose_alphabet(counts, 1.0, 20000, "ksx1001")
    small = choose_alphabet(counts, 1.0, 1000, "ksx1001")  # does not fit: falls back to jamo + ASCII
    assert small[:2] == ["가", "나"] and "ㅋ" in small and "튤" not in small
    assert choose_alphabet(counts, 1.0, 1000, "none") == ["가", "나"]


# ------------------------------------------------------------------------------------ kplm tokenizer report

KCBERT = DATA / "vocabs" / "kcbert-base" / "vocab.txt"
KLUE_NER = DATA / "klue" / "klue-ner-v1.1_dev.tsv"


def test_report_rows_boundaries_and_files(bpe_dir, bpe_plain_dir, tmp_path):
    extra = tmp_path / "odd.txt"
    extra.write_text("좋은 영화였다 ☃☃\n\n재밌다\n", encoding="utf-8")  # ☃ is in no alphabet here
    cfg = build(
        TokenizerReportConfig,
        {
            "tokenizer": str(bpe_dir),
            "text": [str(KLUE_NLI), str(extra)],
            "compare": [str(bpe_plain_dir), str(KCBERT)],
        },
    )
    cfg.max_lines = 300
    result = report_tokenizer(cfg)
    rows = {r["name"]: r for r in result["rows"]}
    assert list(rows) == ["morpheme (raw text)", "morpheme (morpheme mode)", "plain", "kcbert-base"]
    assert result["docs"] == 300
    raw, morph, plain, kcbert = rows.values()
    assert morph["boundary_recall"] == 1.0 and morph["boundary_docs_skipped"] == 0
    assert raw["boundary_recall"] > plain["boundary_recall"] + 0.15, (raw, plain)
    assert raw["boundary_f1"] > plain["boundary_f1"] and raw["boundary_precision"] > 0.5
    assert kcbert["vocab_size"] == 30000 and kcbert["unk_rate"] < 0.01 and kcbert["tokens_per_eojeol"] < 3
    assert raw["tokens_per_eojeol_vs_first"] == 1.0 and plain["tokens_per_eojeol"] < raw["tokens_per_eojeol"]
    out = bpe_dir / "report_klue-nli-v1"
    saved = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert saved["rows"][0]["docs"] == 300
    assert "| kcbert-base | 30000 |" in out.with_suffix(".md").read_text(encoding="utf-8")

    cfg = TokenizerReportConfig(
        tokenizer=bpe_dir, text=[extra], output=tmp_path / "r" / "odd", morphemes=False
    )
    result = report_tokenizer(cfg)
    row = result["rows"][0]
    assert len(result["rows"]) == 1 and "boundary_recall" not in row
    assert row["roundtrip_failure_share"] == 0.5 and row["roundtrip_examples"][0]["doc"] == 0
    assert "[UNK]" in row["roundtrip_examples"][0]["decoded"]
    assert (tmp_path / "r" / "odd.md").is_file()


def test_reference_vocab_matches_transformers_bert_tokenizer():
    from transformers import BertTokenizer
    from transformers.models.bert.tokenization_bert import load_vocab

    name, ours = load_compare(KCBERT)
    ref = BertTokenizer(vocab=dict(load_vocab(str(KCBERT))), do_lower_case=False)
    assert name == "kcbert-base" and ours.get_vocab_size() == 30000
    for text in ["아버지가방에들어가신다.", "韓國語 'KLUE' 데이터셋은 2021년에 공개됐다!", "ㅋㅋㅋ 개꿀잼ㅎ"]:
        assert ours.encode(text, add_special_tokens=False).tokens == ref.tokenize(text), text


def test_klue_files_are_read_by_structure():
    texts = read_eval_texts([KLUE_NER], max_lines=50)
    assert len(texts) == 50 and texts[0].startswith("경찰은 또 성매매 알선 자금을 관리한 박씨의 딸(32)과")
    assert not any(":PS>" in t or "<" in t for t in texts)
    nli = read_eval_texts([KLUE_NLI], max_lines=None)
    assert 3000 < len(nli) < 6000  # distinct premises and hypotheses


def test_report_bad_inputs(bpe_dir, tmp_path):
    with pytest.raises(KplmError, match="not a tokenizer folder"):
        report_tokenizer(TokenizerReportConfig(tokenizer=tmp_path, text=[KLUE_NLI]))
    with pytest.raises(KplmError, match="compare: not found"):
        report_tokenizer(
            TokenizerReportConfig(tokenizer=bpe_dir, text=[KLUE_NLI], compare=[tmp_path / "x.txt"])
        )
    (tmp_path / "vocab.txt").write_text("a\nb\n", encoding="utf-8")
    with pytest.raises(KplmError, match="no \\[UNK\\]"):
        load_compare(tmp_path / "vocab.txt")
    (tmp_path / "bad.json").write_text('{"a": 1}', encoding="utf-8")
    with pytest.raises(KplmError, match="bad.json: expected a JSON list"):
        read_eval_texts([tmp_path / "bad.json"], None)
    with pytest.raises(KplmError, match="text file not found"):
        read_eval_texts([tmp_path / "missing.tsv"], None)
    with pytest.raises(KplmError, match="max_lines"):
        build(TokenizerReportConfig, {"tokenizer": "t", "text": ["a.txt"], "max_lines": 0})
