"""The study report: ``report.md`` plus SVG charts, from the ``study.json`` that :mod:`kplm.pipeline.study`
writes. Every number in it comes from a file of the study folder; nothing is typed in by hand.

Sections: data split, wall time of every step per arm, pretraining loss curves (train and held-out), fine-
tuning scores as mean ± standard deviation over seeds (each seed's value listed too), the configured arm
comparisons with their pass/fail against the stated minimum gain, and a full-scale compute estimate.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from kplm.pipeline.study_baselines import context_free_baselines

COLORS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#9d755d")

#: (task, metric) pairs reported, when the task was run; kplm's KLUE metrics are all in points (0–100).
MAIN_METRICS: tuple[tuple[str, str], ...] = (
    ("korsts", "pearsonr"),
    ("klue-sts", "pearsonr"),
    ("klue-nli", "accuracy"),
    ("kornli", "accuracy"),
    ("klue-ner", "entity_macro_f1"),
    ("klue-ner", "char_macro_f1"),
    ("nsmc", "accuracy"),
    ("ynat", "macro_f1"),
)


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def loss_curves(out: Path, arms: list[str]) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """Per arm: ``train`` and ``eval`` (step, loss) and ``tokens_per_s`` (step, rate) series from its
    ``pretrain/metrics.jsonl``."""
    curves: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for arm in arms:
        path = out / arm / "pretrain" / "metrics.jsonl"
        if not path.is_file():
            continue
        series: dict[str, list[tuple[int, float]]] = {"train": [], "eval": [], "tokens_per_s": []}
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if row.get("kind") == "train" and "loss" in row:
                series["train"].append((int(row["step"]), float(row["loss"])))
                if row.get("tokens_per_s"):
                    series["tokens_per_s"].append((int(row["step"]), float(row["tokens_per_s"])))
            elif row.get("kind") == "eval" and "valid_loss" in row:
                series["eval"].append((int(row["step"]), float(row["valid_loss"])))
        curves[arm] = {
            k: sorted(dict(v).items()) for k, v in series.items()
        }  # a resumed run logs steps twice
    return curves


#: the folder of each pipeline stage inside an arm's folder (see kplm.pipeline.run)
STAGE_FOLDERS = {"pack": "packed", "export": "model", "random_init": "model"}


def stage_seconds(out: Path, arm: str, stage: str, timing: dict[str, Any]) -> float:
    """How long ``stage`` took when it ran: its record's ``seconds`` (a rerun of the study that skipped the
    finished stage measures ~0 s), else the timing this run measured."""
    record = out / arm / STAGE_FOLDERS.get(stage, stage) / "kplm_record.json"
    if record.is_file():
        seconds = json.loads(record.read_text(encoding="utf-8")).get("seconds")
        if isinstance(seconds, (int, float)):
            return float(seconds)
    return float(timing["seconds"])


def tokens_seen(out: Path, arm: str) -> int | None:
    """Training tokens of an arm's pretraining, from its record (None before it finished)."""
    record = out / arm / "pretrain" / "kplm_record.json"
    if not record.is_file():
        return None
    return json.loads(record.read_text(encoding="utf-8")).get("counts", {}).get("tokens_seen")


def line_chart_svg(title: str, series: dict[str, list[tuple[int, float]]], y_label: str) -> str:
    """Lines of (x, y) points, one colour per series, with axes ticks and a legend; no plotting library."""
    width, height, left, right, top, bottom = 640, 360, 60, 150, 30, 40
    points = [p for s in series.values() for p in s]
    if not points:
        return ""
    x_max = max(x for x, _ in points) or 1
    y_min, y_max = min(y for _, y in points), max(y for _, y in points)
    y_max = y_max if y_max > y_min else y_min + 1.0
    plot_w, plot_h = width - left - right, height - top - bottom

    def sx(x: float) -> float:
        return left + plot_w * x / x_max

    def sy(y: float) -> float:
        return top + plot_h * (1 - (y - y_min) / (y_max - y_min))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        'font-size="11">',
        f'<text x="{left}" y="18" font-size="14" font-weight="bold">{_esc(title)}</text>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#333"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#333"/>',
        f'<text x="{left + plot_w / 2}" y="{height - 6}" text-anchor="middle">step</text>',
        f'<text x="14" y="{top + plot_h / 2}" transform="rotate(-90 14 {top + plot_h / 2})" '
        f'text-anchor="middle">{_esc(y_label)}</text>',
    ]
    for i in range(5):
        y = y_min + (y_max - y_min) * i / 4
        x = x_max * i / 4
        parts.append(f'<text x="{left - 4}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.2f}</text>')
        parts.append(f'<text x="{sx(x):.1f}" y="{top + plot_h + 14}" text-anchor="middle">{x:,.0f}</text>')
    for i, (name, pts) in enumerate(series.items()):
        color = COLORS[i % len(COLORS)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{path}"/>')
        ly = top + 14 * i + 6
        parts.append(f'<rect x="{width - right + 10}" y="{ly}" width="12" height="3" fill="{color}"/>')
        parts.append(f'<text x="{width - right + 26}" y="{ly + 5}">{_esc(name)}</text>')
    return "\n".join([*parts, "</svg>"]) + "\n"


def bars_svg(title: str, groups: dict[str, dict[str, tuple[float, float]]]) -> str:
    """Grouped bars: group (a task metric) → arm → (mean, std), with std whiskers; values in points."""
    arms = sorted({a for g in groups.values() for a in g})
    if not arms:
        return ""
    width, row_h, left = 700, 16, 190
    height = 40 + sum(row_h * len(g) + 10 for g in groups.values())
    top_value = max((m + s for g in groups.values() for m, s in g.values()), default=1.0) or 1.0
    scale = (width - left - 80) / max(top_value, 1e-9)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        'font-size="11">',
        f'<text x="10" y="18" font-size="14" font-weight="bold">{_esc(title)}</text>',
    ]
    y = 30
    for group, values in groups.items():
        parts.append(f'<text x="10" y="{y + 12}" font-weight="bold">{_esc(group)}</text>')
        for arm, (mean, std) in values.items():
            color = COLORS[arms.index(arm) % len(COLORS)]
            w = max(0.0, mean) * scale
            parts += [
                f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{_esc(arm)}</text>',
                f'<rect x="{left}" y="{y + 3}" width="{w:.1f}" height="{row_h - 5}" fill="{color}"/>',
                f'<line x1="{left + max(0.0, mean - std) * scale:.1f}" y1="{y + 8}" '
                f'x2="{left + (mean + std) * scale:.1f}" y2="{y + 8}" stroke="#222"/>',
                f'<text x="{left + (mean + std) * scale + 6:.1f}" y="{y + 12}">{mean:.1f} ± {std:.1f}</text>',
            ]
            y += row_h
        y += 10
    return "\n".join([*parts, "</svg>"]) + "\n"


def score_table(summary: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{task/metric: {arm: {"mean", "std", "values"}}}`` over the seeds each arm ran."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for arm, info in summary["arms"].items():
        per_seed = info.get("finetune", {}).get("scores", {})
        for task, metric in MAIN_METRICS:
            values = [
                float(s[task][metric])
                for s in per_seed.values()
                if task in s and s[task].get(metric) is not None
            ]
            if values:
                table.setdefault(f"{task} {metric}", {})[arm] = {
                    "mean": statistics.fmean(values),
                    "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                    "values": values,
                }
    return table


def comparisons(table: dict[str, Any], rows: list[Any]) -> list[dict[str, Any]]:
    """Each configured :class:`~kplm.pipeline.study.Comparison` with the measured gain in points."""
    out = []
    for row in rows:
        cell = table.get(f"{row.task} {row.metric}", {})
        gain = (
            cell[row.arm]["mean"] - cell[row.other]["mean"] if row.arm in cell and row.other in cell else None
        )
        passed = None if gain is None else gain >= row.min_gain
        out.append(
            {
                "arm": row.arm,
                "other": row.other,
                "task": row.task,
                "metric": row.metric,
                "min_gain": row.min_gain,
                "gain": gain,
                "passed": passed,
            }
        )
    return out


def full_scale(settings: dict[str, Any]) -> dict[str, Any] | None:
    """GPU-hours for a full-scale run: FLOPs/token of the named model × tokens / (peak × MFU).

    ``settings``: ``arch``, ``size``, ``vocab_size``, ``seq_len``, ``steps``, ``batch_size`` (sequences per
    step), ``peak_tflops`` (per GPU, the precision used) and ``mfu`` (the target, e.g. 0.5).
    """
    if not settings:
        return None
    from kplm.training.config import ModelConfig
    from kplm.training.model import build_mlm, count_params, flops_per_token, hf_config

    seq_len = int(settings["seq_len"])
    model_config = ModelConfig(arch=settings["arch"], size=settings["size"])
    ids = {"pad": 1, "cls": 0, "sep": 2}
    config = hf_config(model_config, vocab_size=int(settings["vocab_size"]), seq_len=seq_len, ids=ids)
    params = count_params(build_mlm(config))
    per_token = flops_per_token(config, params, seq_len, float(settings.get("mask_prob", 0.15)))
    tokens = int(settings["steps"]) * int(settings["batch_size"]) * seq_len
    sustained = float(settings["peak_tflops"]) * 1e12 * float(settings["mfu"])
    gpu_hours = per_token * tokens / sustained / 3600
    return {
        **settings,
        "params": params,
        "flops_per_token": per_token,
        "tokens": tokens,
        "gpu_hours": gpu_hours,
    }


def write_report(out: Path, summary: dict[str, Any], config: Any) -> None:
    """Write ``report.md``, ``loss.svg`` and ``scores.svg`` into the study folder ``out``."""
    arms = list(summary["arms"])
    curves = loss_curves(out, arms)
    table = score_table(summary)
    lines = [
        "# kplm study",
        "",
        "Every number below comes from `study.json` and the arms' folders.",
        "",
        "## Data",
        "",
    ]
    data = summary.get("data")
    if data:
        lines += ["| NSMC count | value |", "|---|---:|", *(f"| {k} | {v:,} |" for k, v in data.items())]
        if data.get("sentiment_test"):
            share = data["sentiment_test_positive"] / data["sentiment_test"]
            lines += [
                "",
                f"NSMC sentiment test: majority-class accuracy **{100 * max(share, 1 - share):.1f}**.",
            ]
    else:
        lines.append("No NSMC sentiment split.")
    lines += [
        "",
        "## Wall time per step (seconds, from each step's record: when it ran, not when it was reused)",
        "",
        "| arm | step | seconds |",
        "|---|---|---:|",
    ]
    for arm, info in summary["arms"].items():
        for stage, t in info.get("stages", {}).items():
            shown = (
                f"shared with {t['shared_with']}"
                if "shared_with" in t
                else f"{stage_seconds(out, arm, stage, t):.1f}"
            )
            lines.append(f"| {arm} | {stage} | {shown} |")
        for seed, seconds in info.get("finetune", {}).get("seconds", {}).items():
            lines.append(f"| {arm} | fine-tuning ({seed}) | {seconds:.1f} |")
    lines += ["", "## Pretraining", ""]
    if curves:
        train = {arm: c["train"] for arm, c in curves.items()}
        held = {arm: c["eval"] for arm, c in curves.items() if c["eval"]}
        (out / "loss.svg").write_text(line_chart_svg("MLM training loss", train, "loss"), encoding="utf-8")
        if held:
            (out / "valid_loss.svg").write_text(
                line_chart_svg("held-out MLM loss", held, "loss"), encoding="utf-8"
            )
        lines += ["![training loss](loss.svg)", ""]
        if held:
            lines += ["![held-out loss](valid_loss.svg)", ""]
        lines += [
            "| arm | tokens seen | tokens/s | last train loss | last held-out loss | unigram | left bigram |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for arm, c in curves.items():
            tokens, rates = tokens_seen(out, arm), [r for _, r in c["tokens_per_s"]]
            held_last = c["eval"][-1][1] if c["eval"] else None
            baselines = context_free_baselines(out / arm / "packed") or {}
            cells = [
                f"{tokens / 1e6:.2f} M" if tokens else "–",
                f"{statistics.fmean(rates):,.0f}" if rates else "–",
                f"{c['train'][-1][1]:.3f}",
                "–" if held_last is None else f"{held_last:.3f}",
                f"{baselines['unigram']:.3f}" if baselines else "–",
                f"{baselines['bigram']:.3f}" if baselines else "–",
            ]
            lines.append(f"| {arm} | " + " | ".join(cells) + " |")
        lines += [
            "",
            "Losses are in nats over masked positions (80/10/10). The last two columns are references computed "
            "from the packed data (training-split counts scored on the held-out tokens): *unigram* is what a "
            "model that ignores its input scores; *left bigram* is what the left neighbour alone already "
            "predicts. A held-out loss near the unigram means the model learned token frequencies but little "
            "context yet.",
        ]
    lines += ["", f"## Fine-tuning (mean ± std over seeds {list(config.seeds)}, points)", ""]
    if table:
        groups = {k: {a: (v["mean"], v["std"]) for a, v in cells.items()} for k, cells in table.items()}
        (out / "scores.svg").write_text(bars_svg("fine-tuning scores", groups), encoding="utf-8")
        lines += ["![scores](scores.svg)", "", "| task metric | " + " | ".join(arms) + " |"]
        lines.append("|---|" + "---:|" * len(arms))
        for key, cells in table.items():
            row = [
                f"{cells[a]['mean']:.2f} ± {cells[a]['std']:.2f} ({', '.join(f'{v:.1f}' for v in cells[a]['values'])})"
                if a in cells
                else "–"
                for a in arms
            ]
            lines.append(f"| {key} | " + " | ".join(row) + " |")
    checks = comparisons(table, config.compare)
    if checks:
        lines += ["", "## Comparisons", "", "| arm − other | task metric | gain (points) | target | met |"]
        lines.append("|---|---|---:|---:|---|")
        for c in checks:
            gain = "–" if c["gain"] is None else f"{c['gain']:+.2f}"
            met = {True: "yes", False: "no", None: "not run"}[c["passed"]]
            lines.append(
                f"| {c['arm']} − {c['other']} | {c['task']} {c['metric']} | {gain} | ≥ {c['min_gain']:g} | {met} |"
            )
    estimate = full_scale(config.full_scale)
    if estimate:
        lines += [
            "",
            "## What a full-scale run costs",
            "",
            f"{estimate['arch']}-{estimate['size']} ({estimate['params'] / 1e6:.0f} M parameters, vocabulary "
            f"{estimate['vocab_size']:,}), {estimate['steps']:,} steps × {estimate['batch_size']:,} sequences × "
            f"{estimate['seq_len']} tokens = {estimate['tokens'] / 1e9:.1f} B tokens; "
            f"{estimate['flops_per_token'] / 1e9:.2f} GFLOP per token (kplm's MFU formula). At "
            f"{estimate['peak_tflops']} TFLOP/s peak and {estimate['mfu']:.0%} MFU: "
            f"**{estimate['gpu_hours']:,.0f} GPU-hours**.",
        ]
    (out / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
