"""The learned PERSON tagger (``person: crf``): training on real KLUE-NER, names in Korean sentences written
here, no names on look-alikes, deterministic training, clear errors for missing/corrupt models, pickling.

The model is trained once per module on the first 400 training sentences of the real KLUE-NER dev file
(../shared/data; the held-out split is not touched) with few iterations: its threshold comes from an inner
model trained on 300 of them and swept on the other 100. A few seconds.
"""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest

from kplm.errors import KplmError
from kplm.pii.detect import detect
from kplm.pii.evalset import NEGATIVES
from kplm.pii.evaluate import KLUE_NER, PiiEvalConfig, evaluate, load_labelled
from kplm.pii.files import PiiFileConfig, detect_file, scrub_file
from kplm.pii.person_crf import crf_person_candidates, features, load_tagger, spans_from_marginals
from kplm.pii.person_crf_train import (
    GRID,
    PersonTrainConfig,
    split_klue,
    split_validation,
    train_person,
)
from kplm.pii.step import PiiScrubStep

pytestmark = pytest.mark.skipif(not KLUE_NER.is_file(), reason="KLUE-NER dev not in ../shared/data")

# no marks on the negatives allowed: a sweep on 100 validation sentences is noisy, and the default bound
# (1%) lets this small model pick a threshold as low as 0.03
SMALL = {"max_sentences": 400, "max_iterations": 60, "max_negative_fp_rate": 0.0}
NAMES = [
    ("손흥민이 골을 넣었다.", "손흥민"),
    ("어제 김민재가 결승골을 넣었습니다.", "김민재"),
    ("봉준호 감독의 새 영화가 개봉했다.", "봉준호"),
    ("이 영화는 송강호 연기가 다 했다", "송강호"),
    ("박지성 선수는 은퇴 후 해설을 맡았다.", "박지성"),
]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    path = tmp_path_factory.mktemp("crf") / "person.crf"
    result = train_person(PersonTrainConfig(output=path, **SMALL))
    assert result["train_sentences"] == 400
    assert result["held_out_sentences"] == 1000  # every 5th of 5,000 sentences
    assert result["held_out"]["all_ps"]["recall"] > 0.5  # even a 400-sentence model finds most names
    return path, result


@pytest.fixture(scope="module")
def model(trained: tuple[Path, dict]) -> Path:
    return trained[0]


def test_threshold_comes_from_the_validation_sweep(trained: tuple[Path, dict]) -> None:
    path, result = trained
    sel = result["threshold_selection"]
    assert sel["method"] == "validation sweep"
    assert (sel["inner_train_sentences"], sel["validation_sentences"]) == (300, 100)
    assert (
        "position % 4 == 0" in sel["validation_fold"] and "at most 0.0 of the negatives" in sel["criterion"]
    )
    assert sel["validation"]["gold"] > 0 and sel["negatives"] == 200
    # the stored threshold is the best validation F2 among grid points within the negatives bound
    meta = json.loads(Path(f"{path}.json").read_text(encoding="utf-8"))
    curve = meta["threshold_selection"]["curve"]
    assert result["threshold"] in GRID and len(curve) == len(GRID) and "curve" not in sel

    def f2(r: float, p: float) -> float:
        return 5 * p * r / (4 * p + r) if p + r else 0.0

    feasible = [(f2(r, p), t) for t, r, p, hits in curve if hits == 0]
    assert sel["constraint_met"] and sel["negative_hits"] == 0 == sel["final_model_negative_hits"]
    best = max(score for score, _ in feasible)
    swept = sel.get("raised_for_negatives", [result["threshold"]])[0]  # the final model may need more
    assert any(t == swept and score >= best - 1e-3 for score, t in feasible)
    assert result["threshold"] >= swept
    assert meta["threshold"] == result["threshold"] and meta["threshold_selection"]["method"] == sel["method"]
    assert load_tagger(path)[1] == result["threshold"]


def test_split_is_fixed_and_disjoint() -> None:
    train, held = split_klue(KLUE_NER, 5)
    assert (len(train), len(held)) == (4000, 1000)
    assert held[0][0] == "klue-ner-v1_dev_00000-wikitree"  # index 0 is held out
    assert not {i for i, _, _ in train} & {i for i, _, _ in held}


@pytest.mark.parametrize(("text", "name"), NAMES)
def test_finds_names_without_titles(model: Path, text: str, name: str) -> None:
    start = text.index(name)
    spans = [s for s in detect(text, person="crf", person_model=model) if s.type == "PERSON"]
    assert any(s.start < start + len(name) and start < s.end for s in spans), text
    # the context detector alone misses these (no title right after the name, or none at all)
    assert not any(s.type == "PERSON" for s in detect(text.replace(" 감독", "").replace(" 선수", "")))


def test_no_person_on_look_alikes(model: Path) -> None:
    negatives = load_labelled(NEGATIVES)
    extra = [
        "고객님 주문이 완료되었습니다.",
        "사장님이 오늘 쉬신대요.",
        "오늘 날씨가 정말 좋네요.",
        "이 영화 최고예요",
    ]
    texts = [t for _, t, _ in negatives] + extra
    hits = [t for t in texts if crf_person_candidates(t, model)]
    assert len(hits) <= len(texts) // 100, len(hits)  # the bound: ≤ 1% of look-alikes
    assert not [
        t for t in extra if any(s.type == "PERSON" for s in detect(t, person="crf", person_model=model))
    ]


def test_training_is_deterministic_and_blind_to_the_held_out_part(
    trained: tuple[Path, dict], tmp_path: Path
) -> None:
    # the first 500 sentences of the real file with their held-out ones (index % 5 == 0) shuffled: the
    # training part (and so the inner fold) is unchanged, so the model and its threshold must be too
    model, first = trained
    lines = KLUE_NER.read_text(encoding="utf-8").splitlines(keepends=True)
    headers = [i for i, line in enumerate(lines) if line.startswith("## klue")][:501]
    blocks = [lines[a:b] for a, b in zip(headers, headers[1:], strict=False)]
    blocks[::5] = blocks[::5][::-1]  # each held-out slot gets another held-out sentence
    klue = tmp_path / "klue-shuffled.tsv"
    klue.write_text("".join(lines[: headers[0]] + [x for b in blocks for x in b]), encoding="utf-8")
    assert split_klue(klue, 5)[0] == split_klue(KLUE_NER, 5)[0][:400]
    assert split_klue(klue, 5)[1] != split_klue(KLUE_NER, 5)[1][:100]
    again = tmp_path / "again.crf"
    result = train_person(PersonTrainConfig(output=again, klue_ner=klue, evaluate=False, **SMALL))
    assert "held_out" not in result
    assert again.read_bytes() == model.read_bytes()
    assert result["threshold"] == first["threshold"]
    assert result["threshold_selection"] == first["threshold_selection"]
    texts = [t for t, _ in NAMES]
    assert [crf_person_candidates(t, again) for t in texts] == [
        crf_person_candidates(t, model) for t in texts
    ]


def test_missing_and_corrupt_models_are_clear_errors(model: Path, tmp_path: Path) -> None:
    with pytest.raises(KplmError, match="person model not found"):
        detect("손흥민이 골을 넣었다.", person="crf", person_model=tmp_path / "nope.crf")
    corrupt = tmp_path / "corrupt.crf"
    corrupt.write_bytes(b"not a crfsuite model at all" * 10)
    shutil.copy(f"{model}.json", f"{corrupt}.json")
    with pytest.raises(KplmError, match="not a readable CRFsuite model"):
        load_tagger(corrupt)
    no_meta = tmp_path / "no_meta.crf"
    shutil.copy(model, no_meta)
    with pytest.raises(KplmError, match="metadata"):
        load_tagger(no_meta)
    old = tmp_path / "old.crf"
    shutil.copy(model, old)
    meta = json.loads(Path(f"{model}.json").read_text()) | {"feature_version": 0}
    Path(f"{old}.json").write_text(json.dumps(meta))
    with pytest.raises(KplmError, match="retrain"):
        load_tagger(old)
    with pytest.raises(ValueError, match="person_model"):
        detect("손흥민", person="crf")
    with pytest.raises(KplmError, match="KLUE-NER file not found"):
        train_person(PersonTrainConfig(output=tmp_path / "x.crf", klue_ner=tmp_path / "missing.tsv"))


def test_config_validation(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="holdout_every"):
        PersonTrainConfig(output=tmp_path / "m", holdout_every=1)
    with pytest.raises(ValueError, match="threshold"):
        PersonTrainConfig(output=tmp_path / "m", threshold=1.0)
    with pytest.raises(ValueError, match="validate_every"):
        PersonTrainConfig(output=tmp_path / "m", validate_every=1)
    with pytest.raises(ValueError, match="max_negative_fp_rate"):
        PersonTrainConfig(output=tmp_path / "m", max_negative_fp_rate=2.0)
    inner, validation = split_validation(list(range(10)), 4)
    assert (inner, validation) == ([1, 2, 3, 5, 6, 7, 9], [0, 4, 8])


def test_fixed_threshold_skips_the_sweep(tmp_path: Path) -> None:
    path = tmp_path / "fixed.crf"
    result = train_person(
        PersonTrainConfig(output=path, threshold=0.3, max_sentences=100, max_iterations=10, evaluate=False)
    )
    assert result["threshold"] == 0.3 and "no validation sweep" in result["threshold_selection"]["method"]
    assert load_tagger(path)[1] == 0.3


def test_step_pickles_and_scrubs_names(model: Path) -> None:
    step = pickle.loads(pickle.dumps(PiiScrubStep(person="crf", person_model=str(model))))
    text, counts = step.scrub_text("손흥민이 골을 넣었다. 문의 010-1234-5678")
    assert counts["PERSON"] == 1 and counts["PHONE"] == 1
    assert "손흥민" not in text and "[PERSON]" in text


def test_features_and_span_decoding() -> None:
    text = "김 선수 골"
    feats = features(text)
    assert len(feats) == len(text) and "c=김" in feats[0] and "sur0" in feats[0]
    probs = [0.9, 0.8, 0.05, 0.7, 0.6, 0.1]
    starts = [True, False, False, True, True, False]
    spans = spans_from_marginals(probs, starts, 0.5)
    assert [(s, e) for s, e, _ in spans] == [(0, 2), (3, 4), (4, 5)]
    assert spans_from_marginals(probs, starts, 0.95) == []


def test_eval_reports_the_held_out_part_apart(model: Path, tmp_path: Path) -> None:
    # a slice of the real file: its first 60 sentences (the held-out ones are those with index % 5 == 0)
    lines = KLUE_NER.read_text(encoding="utf-8").splitlines(keepends=True)
    headers = [i for i, line in enumerate(lines) if line.startswith("## klue")]
    klue = tmp_path / "klue-slice.tsv"
    klue.write_text("".join(lines[: headers[60]]), encoding="utf-8")
    result = evaluate(PiiEvalConfig(output=tmp_path / "ev", klue_ner=klue, person="crf", person_model=model))
    k = result["klue_ner_person"]
    assert (k["sentences"], k["held_out"]["sentences"]) == (60, 12)
    assert "index % 5 != 0" in k["caveat"] and result["person_model"] == str(model)
    assert k["held_out"]["all_ps"]["gold"] > 0 and k["held_out"]["all_ps"]["recall"] > 0.5
    assert result["types"]["PHONE"]["leak_recall"] == 1.0 and result["types"]["URL"]["leak_recall"] == 1.0
    assert result["negative_fp_rate"] <= 0.01
    assert "held_out all_ps" in (tmp_path / "ev" / "pii_eval.md").read_text(encoding="utf-8")


def test_jsonl_files_with_the_crf_detector(model: Path, tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": 1, "text": NAMES[0][0]}, ensure_ascii=False) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    counts = scrub_file(PiiFileConfig(input=src, output=out, person="crf", person_model=model))
    assert counts["types"] == {"PERSON": 1}
    assert json.loads(out.read_text(encoding="utf-8"))["text"].startswith("[PERSON]")
    with pytest.raises(KplmError, match="person model not found"):
        detect_file(PiiFileConfig(input=src, output=out, person="crf", person_model=tmp_path / "none.crf"))
    with pytest.raises(KplmError, match="person model not found"):
        PiiScrubStep(person="crf", person_model=str(tmp_path / "none.crf"))
