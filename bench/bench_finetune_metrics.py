"""Cross-check of ``kplm.finetune.metrics`` against the libraries KLUE-baseline uses; prints one JSON object.

KLUE-baseline computes its metrics with scikit-learn, scipy and seqeval; kplm re-implements them without
those packages. This script draws random cases (ties, absent classes, invalid IOB2 included) and reports
the largest absolute difference per metric (percentage points). Run it with any Python that has numpy,
scikit-learn, scipy and seqeval installed (they are not kplm dependencies); it loads
``finetune/metrics.py`` by file path, so kplm need not be installed there.

Example: python -m venv /tmp/skv && /tmp/skv/bin/pip install scikit-learn scipy seqeval
         /tmp/skv/bin/python bench/bench_finetune_metrics.py --cases 300
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import random
import warnings
from pathlib import Path

METRICS = Path(__file__).resolve().parents[1] / "finetune" / "metrics.py"
TAGS = ["B-PS", "I-PS", "B-LC", "I-LC", "B-OG", "I-OG", "O", "O", "O"]
NER13 = [f"{p}-{t}" for t in ("DT", "LC", "OG", "PS", "QT", "TI") for p in "BI"] + ["O"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=300, help="random cases per metric")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random cases")
    args = parser.parse_args()

    import numpy as np
    import sklearn.metrics as skm
    from scipy.stats import pearsonr
    from seqeval.metrics import f1_score as seqeval_f1
    from seqeval.scheme import IOB2

    warnings.filterwarnings("ignore")
    spec = importlib.util.spec_from_file_location("kplm_finetune_metrics", METRICS)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    rng, nrng, worst = random.Random(args.seed), np.random.default_rng(args.seed), {}

    def record(name: str, ours: float, reference: float) -> None:
        worst[name] = max(worst.get(name, 0.0), abs(ours - reference))

    for _ in range(args.cases):
        n = rng.randint(2, 40)
        y = [rng.choice("abcdefg") for _ in range(n)]
        p = [rng.choice("abcdefg") if rng.random() < 0.5 else t for t in y]
        record("ynat_macro_f1", m.ynat_macro_f1(p, y), skm.f1_score(y, p, average="macro") * 100)
        ys = nrng.uniform(0, 5, n)
        ps = ys + nrng.normal(0, 1.5, n)
        record("sts_pearsonr", m.sts_pearsonr(ps, ys), pearsonr(ps, ys)[0] * 100)
        binary = skm.f1_score((ys >= 3).astype(int), (ps >= 3).astype(int), average="binary", zero_division=0)
        record("sts_f1", m.sts_f1(ps, ys), binary * 100)
        gold = [[rng.choice(TAGS) for _ in range(rng.randint(1, 12))] for _ in range(rng.randint(1, 5))]
        pred = [[rng.choice(TAGS) if rng.random() < 0.4 else t for t in s] for s in gold]
        reference = seqeval_f1(gold, pred, average="macro", mode="strict", scheme=IOB2, zero_division=0)
        record("ner_entity_macro_f1", m.ner_entity_macro_f1(gold, pred), reference * 100)
        gf = [NER13.index(t) for s in gold for t in s]
        pf = [NER13.index(t) for s in pred for t in s]
        reference = skm.f1_score(gf, pf, labels=list(range(13)), average="macro", zero_division=True)
        record("ner_char_macro_f1", m.ner_char_macro_f1(gold, pred, NER13), reference * 100)
        names = ["no_relation", "r1", "r2", "r3"]
        yt = [rng.randrange(4) for _ in range(n)]
        pt = [rng.randrange(4) if rng.random() < 0.5 else t for t in yt]
        reference = skm.f1_score(yt, pt, average="micro", labels=[1, 2, 3])
        record("re_micro_f1", m.re_micro_f1([names[i] for i in pt], [names[i] for i in yt]), reference * 100)
        probs = np.round(nrng.dirichlet(np.ones(4), n), 1)  # rounding makes ties
        labels = nrng.integers(0, 4, n)
        if len(set(labels.tolist())) == 4:
            onehot, areas = np.eye(4)[labels], []
            for c in range(4):
                precision, recall, _ = skm.precision_recall_curve(onehot[:, c], probs[:, c])
                areas.append(skm.auc(recall, precision))
            record("re_auprc", m.re_auprc(probs, labels), float(np.mean(areas)) * 100)
        gh = [rng.randint(0, 8) for _ in range(n)]
        ph = [h if rng.random() < 0.7 else rng.randint(0, 8) for h in gh]
        gl = [rng.randrange(38) for _ in range(n)]
        pl = [x if rng.random() < 0.6 else rng.randrange(38) for x in gl]
        scores = m.dp_scores([gh], [[m.DP_LABELS[i] for i in gl]], [ph], [[m.DP_LABELS[i] for i in pl]])
        record("dp_uas_macro_f1", scores["uas_macro_f1"], skm.f1_score(gh, ph, average="macro") * 100)
        record("dp_uas_micro_f1", scores["uas"], skm.f1_score(gh, ph, average="micro") * 100)
        types_gold = np.array([-3 if x >= 15 else x for x in gl])
        types_pred = np.array([-3 if x >= 15 else x for x in pl])
        types_pred[np.array(gh) != np.array(ph)] = -2
        reference = skm.f1_score(types_gold.tolist(), types_pred.tolist(), average="macro")
        record("dp_las_macro_f1", scores["las_macro_f1"], reference * 100)
    versions = {k: importlib.metadata.version(k) for k in ("scikit-learn", "scipy", "seqeval", "numpy")}
    print(json.dumps({"cases": args.cases, "max_abs_difference": worst, "versions": versions}))


if __name__ == "__main__":
    main()
