"""The model card of an export, written from the records of the stages that made the model.

:func:`lineage` follows the records upstream of a checkpoint — pretraining → packed data → tokenizer and
corpus (→ PII → cleaning) — by the input paths each record's config names. :func:`model_card` turns their
counts into a README.md. Only numbers, settings and rule names go into the card: never document text or PII.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kplm.records import read_record

KLUE_COLUMNS = ("YNAT", "KLUE-STS", "KLUE-NLI", "KLUE-NER", "KLUE-RE", "KLUE-DP", "KLUE-MRC", "WoS")


def lineage(state: dict[str, Any], run_dir: Path) -> dict[str, dict[str, Any]]:
    """Records of the stages behind a checkpoint, keyed ``pretrain``, ``pack``, ``tokenizer``, ``pii``, ``corpus``.

    ``state`` is the checkpoint's ``trainer_state.json``; ``run_dir`` the pretraining output folder. Stages
    whose folders are gone or carry no record are simply absent.
    """
    found: dict[str, dict[str, Any]] = {}
    pretrain = read_record(run_dir)
    if pretrain:
        found["pretrain"] = pretrain
    resolved = run_dir / "checkpoints" / "resolved_config.json"
    if resolved.is_file() and "pretrain" not in found:
        found["pretrain"] = {"config": json.loads(resolved.read_text(encoding="utf-8")), "counts": {}}
    if state.get("tokenizer"):
        record = read_record(Path(state["tokenizer"]))
        if record:
            report = Path(state["tokenizer"]) / "tokenizer_report.json"
            if report.is_file():
                record["report"] = json.loads(report.read_text(encoding="utf-8"))
            found["tokenizer"] = record
    pack = read_record(Path(state["data"])) if state.get("data") else None
    if not pack:
        return found
    found["pack"] = pack
    upstream = Path(pack["config"].get("corpus", ""))
    for _ in range(3):  # pii → corpus (a corpus stage names its input folder)
        record = read_record(upstream)
        if not record:
            break
        stage = str(record.get("stage", ""))
        if stage.startswith("pii"):
            found["pii"] = record
            upstream = Path(record["config"].get("input", ""))
        elif stage.startswith("corpus"):
            found["corpus"] = record
            break
        else:
            break
    return found


def _num(value: Any, fmt: str = ",") -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "n/a"
    return format(value, fmt)


def _data_section(records: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["## Training data", ""]
    corpus = records.get("corpus", {}).get("counts")
    if corpus:
        lines.append(
            f"Cleaned with `kplm corpus clean`: {_num(corpus.get('input'))} input documents → "
            f"{_num(corpus.get('kept'))} kept, {_num(corpus.get('dropped'))} dropped, "
            f"{_num(corpus.get('quarantined'))} quarantined (unreadable)."
        )
        lines += ["", "| drop reason | documents |", "|---|---:|"]
        lines += [f"| `{rule}` | {_num(n)} |" for rule, n in corpus.get("dropped_by_rule", {}).items()]
        if corpus.get("kept_by_source"):
            lines += ["", "| source | documents kept |", "|---|---:|"]
            lines += [
                f"| {source or '(none)'} | {_num(n)} |" for source, n in corpus["kept_by_source"].items()
            ]
    else:
        lines.append("No cleaning record was found for the training corpus.")
    pii = records.get("pii")
    if pii:
        counts = pii.get("counts", {})
        by_type = ", ".join(f"{t} {_num(n)}" for t, n in counts.get("pii_by_type", {}).items()) or "none"
        lines += [
            "",
            f"Personal information: policy `{pii['config'].get('policy')}` (kplm PII stage); "
            f"{_num(counts.get('documents_with_pii'))} of {_num(counts.get('documents'))} documents had detections "
            f"({by_type}).",
        ]
    else:
        lines += [
            "",
            "Personal information: no PII stage was run on this corpus (policy `off`) or its record is missing.",
        ]
    pack = records.get("pack", {}).get("counts")
    if pack:
        lines += [
            "",
            f"Packed into {_num(pack.get('train_sequences'))} training and {_num(pack.get('valid_sequences'))} "
            f"held-out sequences ({_num(pack.get('train_tokens'))} training tokens).",
        ]
    return lines


def _tokenizer_section(records: dict[str, dict[str, Any]]) -> list[str]:
    record = records.get("tokenizer")
    if not record:
        return []
    config, report = record.get("config", {}), record.get("report", {})
    held = report.get("heldout", {})
    lines = [
        "## Tokenizer",
        "",
        f"WordPiece, {_num(report.get('vocab_size') or record.get('counts', {}).get('vocab_size'))} tokens, trained by "
        f"`kplm tokenizer train --mode {config.get('mode')}` (MeCab-ko morpheme-aware when `morpheme`); runs on raw text.",
    ]
    if held:
        lines.append(
            f"On {_num(held.get('docs'))} held-out documents: {_num(held.get('tokens_per_eojeol'), '.3f')} tokens per "
            f"eojeol, [UNK] rate {_num(100 * held['unk_rate'], '.3f') if 'unk_rate' in held else 'n/a'}%."
        )
    return ["", *lines]


def _pretrain_section(records: dict[str, dict[str, Any]], state: dict[str, Any]) -> list[str]:
    resolved = records.get("pretrain", {}).get("config", {})
    run = resolved.get("config", {})
    ds = resolved.get("deepspeed", {})
    versions = resolved.get("versions", {})
    zero = ds.get("zero_optimization", {}).get("stage", "n/a")
    precision = run.get("precision", "n/a")
    return [
        "",
        "## Pretraining",
        "",
        "| | |",
        "|---|---|",
        f"| steps | {_num(state.get('step'))} of {_num(state.get('max_steps'))} |",
        f"| tokens seen | {_num(state.get('tokens_seen'))} |",
        f"| global batch | {_num(state.get('global_batch'))} sequences × {_num(state.get('seq_len'))} tokens |",
        f"| ranks | {_num(state.get('world_size'))} (DeepSpeed ZeRO {zero}, {precision}) |",
        f"| learning rate | {run.get('lr', 'n/a')}, {run.get('schedule', 'n/a')} decay, {run.get('warmup_steps', 'n/a')} warm-up steps |",
        f"| final training MLM loss | {_num(state.get('train_loss'), '.4f')} |",
        f"| final held-out MLM loss | {_num(state.get('valid_loss'), '.4f')} |",
        f"| software | torch {versions.get('torch', '?')}, deepspeed {versions.get('deepspeed', '?')}, "
        f"transformers {versions.get('transformers', '?')}, kplm {versions.get('kplm_git') or versions.get('kplm', '?')} |",
    ]


def _klue_section(results: dict[str, Any] | None) -> list[str]:
    if not results:
        return []
    table = results.get("table", results)
    present = [c for c in KLUE_COLUMNS if c in table]
    if not present:
        return []
    return [
        "",
        "## KLUE results",
        "",
        "| " + " | ".join(present) + " |",
        "|" + "---:|" * len(present),
        "| " + " | ".join(str(table[c]) for c in present) + " |",
        "",
        str(results.get("note", "")),
    ]


def model_card(
    *,
    state: dict[str, Any],
    hf_config: Any,
    tokenizer: Any,
    dtype: str,
    records: dict[str, dict[str, Any]],
    klue_results: dict[str, Any] | None = None,
) -> str:
    """README.md of an exported model, from the checkpoint state and the upstream stage records."""
    arch = {"roberta": "RoBERTa", "modernbert": "ModernBERT"}.get(hf_config.model_type, "BERT")
    mask = tokenizer.mask_token
    lines = [
        "---",
        "language: ko",
        "library_name: transformers",
        "pipeline_tag: fill-mask",
        f"tags: [kplm, {hf_config.model_type}, masked-lm, korean]",
        "---",
        "",
        f"# Korean {arch}-{state.get('size', '?')} (kplm)",
        "",
        f"A Korean {arch} masked language model pretrained from scratch with kplm "
        "(Korean corpus cleaning, PII pseudonymisation, morpheme-aware vocabulary, DeepSpeed masked-LM pretraining).",
        "",
        "| | |",
        "|---|---|",
        f"| architecture | {hf_config.model_type}, {hf_config.num_hidden_layers} layers, hidden "
        f"{hf_config.hidden_size}, {hf_config.num_attention_heads} heads, FFN {hf_config.intermediate_size} |",
        f"| parameters | {_num(state.get('params'))} |",
        f"| vocabulary | {hf_config.vocab_size:,} tokens |",
        f"| maximum sequence length | {state.get('seq_len', '?')} |",
        f"| weights | {dtype}, safetensors |",
        "",
        *_data_section(records),
        *_tokenizer_section(records),
        *_pretrain_section(records, state),
        *_klue_section(klue_results),
        "",
        "## Usage",
        "",
        "```python",
        "from transformers import pipeline",
        "",
        'fill = pipeline("fill-mask", model="path/to/this/folder")',
        f'fill("대한민국의 수도는 {mask}이다.")',
        "```",
        "",
    ]
    return "\n".join(lines)
