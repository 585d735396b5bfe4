"""Shared inputs of the fine-tuning tests: the KLUE dev files under ../shared/data and one tiny random
2-layer BERT whose WordPiece vocabulary is trained here on real KLUE-NLI/NER text (built once per session
under pytest's base temporary folder and reused by every test module that asks for it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kplm.finetune import data

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
NLI = DATA / "klue" / "klue-nli-v1.1_dev.json"
NER = DATA / "klue" / "klue-ner-v1.1_dev.tsv"
STS = DATA / "klue" / "klue-sts-v1.1_dev.json"
DP = DATA / "klue" / "klue-dp-v1.1_dev.tsv"


def build_tiny_model(folder: Path, hidden: int = 32) -> Path:
    """Write a random 2-layer BERT (``hidden`` units, seeded weights) and its WordPiece tokenizer into
    ``folder``."""
    import torch
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    nli = data.load_task_file("klue-nli", NLI)
    ner = data.load_task_file("klue-ner", NER)
    texts = [e["text_a"] + " " + e["text_b"] for e in nli] + ["".join(e["chars"]) for e in ner[:1500]]
    wordpiece = BertWordPieceTokenizer(lowercase=False, strip_accents=False, clean_text=True)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    wordpiece.train_from_iterator(texts, vocab_size=2000, min_frequency=2, special_tokens=specials)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = BertTokenizerFast(vocab=wordpiece.get_vocab(), do_lower_case=False, strip_accents=False)
    tokenizer.save_pretrained(str(folder))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=hidden,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=512,
    )
    torch.manual_seed(0)
    BertForMaskedLM(config).save_pretrained(str(folder))
    return folder


def shared_tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny BERT folder, built once per test session (test modules wrap this in a fixture)."""
    folder = tmp_path_factory.getbasetemp() / "finetune_tiny_model"
    if not (folder / "model.safetensors").is_file():
        build_tiny_model(folder)
    return folder
