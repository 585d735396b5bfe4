"""The results table: one row per model, columns in the KLUE paper's order, as JSON and Markdown.

Columns: YNAT (macro-F1) · KLUE-STS (Pearson r, F1) · KLUE-NLI (accuracy) · KLUE-NER (entity F1, char F1) ·
KLUE-RE (micro-F1, AUPRC) · KLUE-DP (UAS, LAS) · KLUE-MRC (EM, ROUGE-W) · WoS (JGA, slot F1), then the
non-KLUE extras KorSTS and KorNLI. A task that was not run shows ``–``. Under the table every number is
traced to the split that trained and the split that scored it, and to the epoch it comes from (the best of
the epochs evaluated on that split).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kplm.records import write_json_atomic

#: (task, metric key, column header), in the KLUE paper's order.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("ynat", "macro_f1", "YNAT F1"),
    ("klue-sts", "pearsonr", "KLUE-STS R"),
    ("klue-sts", "f1", "KLUE-STS F1"),
    ("klue-nli", "accuracy", "KLUE-NLI ACC"),
    ("klue-ner", "entity_macro_f1", "KLUE-NER entity F1"),
    ("klue-ner", "char_macro_f1", "KLUE-NER char F1"),
    ("klue-re", "micro_f1", "KLUE-RE F1"),
    ("klue-re", "auprc", "KLUE-RE AUPRC"),
    ("klue-dp", "uas_macro_f1", "KLUE-DP UAS"),
    ("klue-dp", "las_macro_f1", "KLUE-DP LAS"),
    ("klue-mrc", "exact_match", "KLUE-MRC EM"),
    ("klue-mrc", "rouge_w", "KLUE-MRC ROUGE-W"),
    ("wos", "joint_goal_accuracy", "WoS JGA"),
    ("wos", "slot_micro_f1", "WoS slot F1"),
    ("korsts", "pearsonr", "KorSTS R"),
    ("korsts", "f1", "KorSTS F1"),
    ("kornli", "accuracy", "KorNLI ACC"),
    ("nsmc", "accuracy", "NSMC ACC"),
)


def table(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Rows per model: ``{"columns": [...], "rows": [{"model", "values": {header: number|None}}]}``."""
    by_model: dict[str, dict[str, dict[str, Any]]] = {}
    for result in results:
        by_model.setdefault(result["model"], {})[result["task"]] = result
    rows = []
    for model, tasks in by_model.items():
        values = {
            header: tasks[task]["metrics"].get(key) if task in tasks else None
            for task, key, header in COLUMNS
        }
        rows.append({"model": model, "values": values})
    return {"columns": [header for _, _, header in COLUMNS], "rows": rows}


def markdown(results: list[dict[str, Any]]) -> str:
    """The table as Markdown, followed by the train/eval split of every task."""
    data = table(results)
    lines = [
        "| model | " + " | ".join(data["columns"]) + " |",
        "|---|" + "---:|" * len(data["columns"]),
    ]
    for row in data["rows"]:
        cells = ["–" if v is None else f"{v:.2f}" for v in row["values"].values()]
        lines.append(f"| {Path(row['model']).name} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Splits (trained on → scored on):")
    lines.append("")
    for r in results:
        best = ""
        if "best_epoch" in r:
            best = f", best of {len(r['training']['epochs'])} evaluated epochs: epoch {r['best_epoch']:g}"
        lines.append(
            f"- {r['task']} ({Path(r['model']).name}): {r['train_split']} ({r['train_examples']} examples) → "
            f"{r['eval_split']} ({r['eval_examples']} examples){best}"
        )
    return "\n".join(lines) + "\n"


def write_results(output: Path, results: list[dict[str, Any]]) -> None:
    """Write ``results.json`` (per-task results + table) and ``results.md`` atomically into ``output``."""
    output = Path(output)
    write_json_atomic(output / "results.json", {"results": results, "table": table(results)})
    tmp = output / "results.md.tmp"
    tmp.write_text(markdown(results), encoding="utf-8")
    tmp.replace(output / "results.md")
