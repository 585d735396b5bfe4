"""Build kplm's embedded sample corpus, ``kplm_sample_ko.jsonl``, from the hand-written base documents.

The base documents live next to this script in ``base_<register>.py`` (original Korean text written for kplm,
CC0 1.0). This script fills their ``{PLACEHOLDER}`` fields with generated fake PII, adds the noise a real crawl
has (HTML, URLs, invisible characters, decomposed Hangul, boilerplate, duplicates, junk documents) and writes one
JSON object per line. It uses only the standard library and one seeded ``random.Random``, so

    python corpus/sample/make_sample.py            # rewrites the shipped file byte-identically
    python corpus/sample/make_sample.py --check    # exit status 1 if the shipped file is out of date
    python corpus/sample/make_sample.py --pii-manifest /tmp/pii.jsonl   # also list every fake PII item

Statistics (counts per source, per noise kind, per PII kind) are printed as JSON on stdout.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import re
import sys
import unicodedata
from collections import Counter
from pathlib import Path

from sample_noise import JUNK, Noiser, near_variant
from sample_pii import NAME_MARK, PII_FIELD, FakePII

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "kplm_sample_ko.jsonl"
SEED = 1446
REGISTERS = ("news", "encyclopedia", "review", "chat", "dialogue", "web")
DATED = {"news", "review", "chat", "web"}
EXACT_DUPLICATES = 26
NEAR_DUPLICATES = 16


def load_base(register: str) -> list[str]:
    """The hand-written documents of one register: ``TEXT`` of ``base_<register>.py`` split on blank lines."""
    path = HERE / f"base_{register}.py"
    spec = importlib.util.spec_from_file_location(f"kplm_sample_base_{register}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    docs = [d.strip() for d in re.split(r"\n\s*\n", module.TEXT) if d.strip()]
    stray = [d for d in docs if re.search(r"[{}]", PII_FIELD.sub("", NAME_MARK.sub("", d)))]
    if stray:
        raise SystemExit(f"{path.name}: stray brace in document starting {stray[0][:30]!r}")
    return docs


def random_date(rng: random.Random) -> str:
    """A date between 2022-01-01 and 2024-12-28 (days 1-28, so every month is valid)."""
    return f"{rng.randint(2022, 2024)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def to_json_line(doc: dict) -> str:
    """One JSONL line; characters that some readers treat as line breaks (C1, U+2028/9) are escaped."""
    line = json.dumps(doc, ensure_ascii=False)
    return re.sub(r"[\x7f-\x9f\u2028\u2029]", lambda m: f"\\u{ord(m.group()):04x}", line)


def build() -> tuple[list[str], dict, list[dict]]:
    """Build the corpus lines, the statistics that describe them and the list of every fake PII item."""
    rng = random.Random(SEED)
    fake = FakePII(rng)
    noiser = Noiser(rng)
    docs: list[dict] = []
    base_bytes = base_hangul = 0
    for register in REGISTERS:
        for i, raw in enumerate(load_base(register), start=1):
            base_bytes += len(raw.encode("utf-8"))
            base_hangul += sum(1 for c in raw if "\uac00" <= c <= "\ud7a3")
            text, items = fake.fill(raw)
            doc = {"id": f"{register}-{i:04d}", "text": text, "source": register, "pii": items}
            if register in DATED:
                doc["date"] = random_date(rng)
            docs.append(doc)
    base_count = len(docs)
    noiser.add_bylines([d for d in docs if d["source"] == "news"], fake)
    for source, text in JUNK:
        docs.append({"id": "", "text": text, "source": source, "date": random_date(rng), "pii": []})
    noiser.apply(docs)

    next_number = Counter(d["source"] for d in docs if d["id"])

    def new_id(source: str) -> str:
        next_number[source] += 1
        return f"{source}-{next_number[source]:04d}"

    for doc in docs:
        doc["id"] = doc["id"] or new_id(doc["source"])

    originals = list(docs)
    near_pool = [d for d in originals[:base_count] if len(d["text"]) >= 40 and not d.get("pii")]
    near = []
    for src in rng.sample(near_pool, NEAR_DUPLICATES):
        text, op = near_variant(src["text"], src["source"], rng)
        copy = {**src, "id": new_id(src["source"]), "text": text, "near_of": src["id"], "near_op": op}
        if "date" in src:
            copy["date"] = random_date(rng)
        near.append(copy)
    exact = []
    with_pii = [d for d in originals if d["pii"]]
    sources = rng.sample(originals, EXACT_DUPLICATES - 6)
    sources += rng.sample(originals[:base_count], 3) + rng.sample(with_pii, 3)
    for src in sources:
        copy = {**src, "id": new_id(src["source"]), "duplicate_of": src["id"]}
        if "date" in src:
            copy["date"] = random_date(rng)
        exact.append(copy)
    docs = originals + near + exact
    rng.shuffle(docs)

    lines = []
    for d in docs:
        record = {"id": d["id"], "text": d["text"], "source": d["source"]}
        if "date" in d:
            record["date"] = d["date"]
        lines.append(to_json_line(record))

    texts = [d["text"] for d in docs]
    pii_kinds = Counter(kind for d in docs for kind, _, _ in d["pii"])
    blob = "\n".join(lines) + "\n"
    stats = {
        "documents": len(docs),
        "bytes": len(blob.encode("utf-8")),
        "per_source": dict(sorted(Counter(d["source"] for d in docs).items())),
        "hand_written_documents": base_count,
        "hand_written_bytes": base_bytes,
        "hand_written_hangul_syllables": base_hangul,
        "junk_documents": len(JUNK),
        "distinct_texts": len(set(texts)),
        "exact_duplicates": len(exact),
        "near_duplicates": len(near),
        "near_duplicate_ops": dict(sorted(Counter(d["near_op"] for d in near).items())),
        "hangul_syllables": sum(1 for c in blob if "\uac00" <= c <= "\ud7a3"),
        "hangul_syllables_nfc": sum(
            1 for t in texts for c in unicodedata.normalize("NFC", t) if "\uac00" <= c <= "\ud7a3"
        ),
        "docs_with_pii": sum(1 for d in docs if d["pii"]),
        "docs_with_pii_distinct": sum(1 for d in originals if d["pii"]),
        "docs_with_pii_other_than_names_distinct": sum(
            1 for d in originals if any(k != "name" for k, _, _ in d["pii"])
        ),
        "pii_items": dict(sorted(pii_kinds.items())),
        "pii_items_distinct": dict(sorted(Counter(k for d in originals for k, _, _ in d["pii"]).items())),
        "rrn_valid_checksum": sum(1 for d in originals for _, _, valid in d["pii"] if valid),
        "noisy_documents": sum(1 for d in originals if d.get("noise")),
        "noise": dict(sorted(Counter(n for d in originals for n in d.get("noise", [])).items())),
    }
    manifest = [
        {"id": d["id"], "kind": kind, "value": value, **({} if valid is None else {"valid_checksum": valid})}
        for d in sorted(docs, key=lambda d: d["id"])
        for kind, value, valid in d["pii"]
    ]
    return lines, stats, manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare with the shipped file")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="where to write the corpus")
    parser.add_argument(
        "--pii-manifest", type=Path, help="also write every fake PII item (id, kind, value) as JSONL here"
    )
    args = parser.parse_args(argv)
    lines, stats, manifest = build()
    data = ("\n".join(lines) + "\n").encode("utf-8")
    if args.check:
        same = args.output.is_file() and args.output.read_bytes() == data
        print(f"{args.output}: {'up to date' if same else 'OUT OF DATE'}", file=sys.stderr)
        return 0 if same else 1
    tmp = args.output.with_name(f".{args.output.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, args.output)
    if args.pii_manifest:
        args.pii_manifest.write_text(
            "".join(to_json_line(item) + "\n" for item in manifest), encoding="utf-8"
        )
    print(json.dumps(stats, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
