"""Fine-tuning throughput and scores of ``kplm.finetune`` on one task; prints one JSON object.

Without ``--model`` a tiny random 2-layer BERT (hidden 32) with a WordPiece vocabulary trained on the
KLUE-NLI/NER dev text is built in a temporary folder: the numbers then measure the loop's overhead, not
a model's quality. With ``--model`` any Hugging Face folder (e.g. the output of ``kplm export``) is used.

The model is evaluated after every epoch (``eval_seconds``); ``train_seconds`` and the throughput count only
the training steps; ``cpu_seconds`` is this process's CPU time (user + system), less sensitive to other load
on the machine than wall time. Weights are not saved (``save_model=False``).

Example: python bench/bench_finetune.py --task klue-nli --train 512 --eval 256 --epochs 1 --threads 2
         python bench/bench_finetune.py --task klue-dp --train 512 --eval 128 --epochs 1 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
FILES = {
    "klue-nli": "klue/klue-nli-v1.1_dev.json",
    "klue-sts": "klue/klue-sts-v1.1_dev.json",
    "klue-ner": "klue/klue-ner-v1.1_dev.tsv",
    "klue-dp": "klue/klue-dp-v1.1_dev.tsv",
    "korsts": "korsts/sts-dev.tsv",
    "kornli": "kornli/xnli.dev.ko.tsv",
}


def tiny_model(folder: Path) -> Path:
    """Random tiny BERT + WordPiece vocabulary trained on KLUE dev text (as in tests/test_finetune_run.py)."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    from kplm.finetune.data import load_task_file

    nli = load_task_file("klue-nli", DATA / FILES["klue-nli"])
    ner = load_task_file("klue-ner", DATA / FILES["klue-ner"])
    texts = [e["text_a"] + " " + e["text_b"] for e in nli] + ["".join(e["chars"]) for e in ner[:1500]]
    wordpiece = BertWordPieceTokenizer(lowercase=False, strip_accents=False, clean_text=True)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    wordpiece.train_from_iterator(texts, vocab_size=2000, min_frequency=2, special_tokens=specials)
    tokenizer = BertTokenizerFast(vocab=wordpiece.get_vocab(), do_lower_case=False, strip_accents=False)
    tokenizer.save_pretrained(str(folder))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
    )
    BertForMaskedLM(config).save_pretrained(str(folder))
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, help="HF model folder (default: a tiny random BERT built here)")
    parser.add_argument(
        "--task", choices=sorted(FILES), default="klue-nli", help="task (its dev file is split 80/20)"
    )
    parser.add_argument("--train", type=int, default=512, help="training examples (from the 80%% part)")
    parser.add_argument("--eval", type=int, default=256, help="evaluation examples (from the 20%% part)")
    parser.add_argument("--epochs", type=float, default=1.0, help="epochs")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    args = parser.parse_args()

    import transformers

    from kplm.finetune.run import FinetuneConfig, finetune

    transformers.logging.set_verbosity_error()
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or tiny_model(Path(tmp) / "tiny")
        started = time.time()
        result = finetune(
            FinetuneConfig(
                model=model,
                task=args.task,
                output=Path(tmp) / "out",
                split_of=DATA / FILES[args.task],
                max_train_examples=args.train,
                max_eval_examples=args.eval,
                epochs=args.epochs,
                threads=args.threads,
                save_model=False,
            )
        )
        seconds = time.time() - started
    trained = result["train_examples"] * args.epochs
    print(
        json.dumps(
            {
                "task": args.task,
                "model": "tiny-random-bert-h32-l2" if args.model is None else str(args.model),
                "train_split": result["train_split"],
                "eval_split": result["eval_split"],
                "hyperparameters": result["hyperparameters"],
                "threads": args.threads,
                "seconds_total": round(seconds, 2),
                "cpu_seconds": round(sum(resource.getrusage(resource.RUSAGE_SELF)[:2]), 2),
                "train_seconds": result["training"]["seconds"],
                "eval_seconds": result["training"]["eval_seconds"],
                "train_examples_per_second": round(trained / result["training"]["seconds"], 1),
                "metrics": result["metrics"],
                "best_epoch": result["best_epoch"],
                "load_average": os.getloadavg()[0],
            },
            ensure_ascii=False,
        )
    )


if __name__ == "__main__":
    main()
