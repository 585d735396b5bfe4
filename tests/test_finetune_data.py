"""Readers of the official KLUE/KorSTS/KorNLI formats on the real files, a YNAT fixture, bad input, splits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kplm.errors import KplmError
from kplm.finetune import data, metrics
from kplm.finetune.report import COLUMNS, markdown, table

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def test_real_klue_files_read_completely():
    nli = data.load_task_file("klue-nli", DATA / "klue" / "klue-nli-v1.1_dev.json")
    assert len(nli) == 3000
    assert {e["label"] for e in nli} == set(data.NLI_LABELS)
    sts = data.load_task_file("klue-sts", DATA / "klue" / "klue-sts-v1.1_dev.json")
    assert len(sts) == 519
    assert sts[0]["label"] == pytest.approx(4.857142857142857)
    assert all(0.0 <= e["label"] <= 5.0 for e in sts)
    ner = data.load_task_file("klue-ner", DATA / "klue" / "klue-ner-v1.1_dev.tsv")
    assert len(ner) == 5000
    first = ner[0]
    assert first["guid"] == "klue-ner-v1_dev_00000-wikitree"
    assert "".join(first["chars"]).startswith("경찰은 또 성매매")
    assert first["tags"][:3] == ["B-OG", "I-OG", "O"]
    assert all(len(e["chars"]) == len(e["tags"]) for e in ner)
    dp = data.load_task_file("klue-dp", DATA / "klue" / "klue-dp-v1.1_dev.tsv")
    assert len(dp) == 2000
    assert dp[0]["heads"] == [2, 6, 4, 6, 6, 0]
    assert dp[0]["labels"][1] == "NP_SBJ"


def test_korsts_and_kornli_tsv():
    korsts = data.load_task_file("korsts", DATA / "korsts" / "sts-dev.tsv")
    assert korsts[0] == {
        "text_a": "안전모를 가진 한 남자가 춤을 추고 있다.",
        "text_b": "안전모를 쓴 한 남자가 춤을 추고 있다.",
        "label": 5.0,
    }
    assert len(korsts) > 1000
    kornli = data.load_task_file("kornli", DATA / "kornli" / "xnli.dev.ko.tsv")
    assert len(kornli) == 2490
    assert kornli[1]["label"] == "contradiction"


def test_ynat_fixture_in_official_format(tmp_path):
    records = [
        {
            "guid": "ynat-v1_dev_00000",
            "title": "삼성전자 새 스마트폰 공개",
            "label": "IT과학",
            "url": "",
            "date": "",
        },
        {
            "guid": "ynat-v1_dev_00001",
            "title": "류현진 시즌 10승 달성",
            "label": "스포츠",
            "url": "",
            "date": "",
        },
    ]
    path = tmp_path / "ynat-v1.1_dev.json"
    path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    examples = data.load_task_file("ynat", path)
    assert examples[1] == {"text_a": "류현진 시즌 10승 달성", "text_b": None, "label": "스포츠"}


@pytest.mark.parametrize(
    ("task", "name", "content", "message"),
    [
        (
            "klue-nli",
            "nli.json",
            '[{"premise": "a", "hypothesis": "b", "gold_label": "maybe"}]',
            "unknown label",
        ),
        ("klue-nli", "nli.json", '[{"premise": "a"}]', "missing field 'hypothesis'"),
        ("klue-sts", "sts.json", "[{", "invalid JSON"),
        ("klue-ner", "ner.tsv", "## klue-ner-x\t가\n가\tB-XX\n", "unknown label"),
        ("klue-ner", "ner.tsv", "가\tO\textra\n", "expected 'CHAR<TAB>TAG'"),
        ("korsts", "sts.tsv", "score\tsentence1\tsentence2\nhigh\ta\tb\n", "is not a number"),
        ("kornli", "nli.tsv", "sentence1\tsentence2\n", "lacks column 'gold_label'"),
        ("klue-dp", "dp.tsv", "1\t가\t가\tNNG\tx\tNP\n", "numeric"),
    ],
)
def test_bad_input_names_the_file(tmp_path, task, name, content, message):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(KplmError, match=message) as info:
        data.load_task_file(task, path)
    assert name in str(info.value)


def test_missing_file_and_unknown_task(tmp_path):
    with pytest.raises(KplmError, match="not found"):
        data.load_task_file("klue-nli", tmp_path / "none.json")
    with pytest.raises(KplmError, match="no reader"):
        data.load_task_file("klue-xx", tmp_path / "none.json")


def test_split_is_deterministic_disjoint_and_named():
    examples = [{"text_a": str(i), "text_b": None, "label": "a"} for i in range(10)]
    train, dev, train_name, dev_name = data.split_examples(examples, "klue-nli-v1.1_dev", 0.8, seed=7)
    again = data.split_examples(examples, "klue-nli-v1.1_dev", 0.8, seed=7)
    assert (train, dev) == (again[0], again[1])
    assert len(train) == 8 and len(dev) == 2
    assert {e["text_a"] for e in train}.isdisjoint({e["text_a"] for e in dev})
    assert train_name == "klue-nli-v1.1_dev[:80%] (shuffled seed 7)"
    assert dev_name == "klue-nli-v1.1_dev[80%:] (shuffled seed 7)"
    other = data.split_examples(examples, "x", 0.8, seed=8)
    assert other[0] != train
    with pytest.raises(KplmError, match="too few"):
        data.split_examples(examples[:1], "x", 0.8, seed=7)


def test_nli_split_keeps_each_premise_on_one_side():
    examples = data.load_task_file("klue-nli", DATA / "klue" / "klue-nli-v1.1_dev.json")
    train, dev, train_name, dev_name = data.split_examples(examples, "klue-nli-v1.1_dev", 0.8, 1, "text_a")
    assert len(train) + len(dev) == len(examples) and 0.79 < len(train) / len(examples) < 0.81
    assert {e["text_a"] for e in train}.isdisjoint({e["text_a"] for e in dev})
    assert train_name == "klue-nli-v1.1_dev[:80%] (shuffled seed 1, grouped by text_a)"
    # split by example, nearly every scored premise is in training, always with the other labels
    plain_train, plain_dev, _, _ = data.split_examples(examples, "x", 0.8, 1)
    seen: dict[str, set] = {}
    for e in plain_train:
        seen.setdefault(e["text_a"], set()).add(e["label"])
    shared = [e for e in plain_dev if e["text_a"] in seen]
    assert len(shared) > 0.8 * len(plain_dev)
    assert all(e["label"] not in seen[e["text_a"]] for e in shared)


def test_results_table_in_klue_order():
    results = [
        {
            "task": "klue-nli",
            "model": "/m/tiny",
            "metrics": {"accuracy": 41.5},
            "train_split": "a[:80%]",
            "eval_split": "a[80%:]",
            "train_examples": 8,
            "eval_examples": 2,
        },
        {
            "task": "ynat",
            "model": "/m/tiny",
            "metrics": {"macro_f1": 12.25},
            "train_split": "y-train",
            "eval_split": "y-dev",
            "train_examples": 5,
            "eval_examples": 5,
        },
    ]
    t = table(results)
    assert t["columns"][:4] == ["YNAT F1", "KLUE-STS R", "KLUE-STS F1", "KLUE-NLI ACC"]
    assert [c[0] for c in COLUMNS][-4:] == ["korsts", "korsts", "kornli", "nsmc"]
    values = t["rows"][0]["values"]
    assert values["YNAT F1"] == 12.25 and values["KLUE-NLI ACC"] == 41.5 and values["WoS JGA"] is None
    md = markdown(results)
    assert "| tiny | 12.25 | – | – | 41.50 |" in md
    assert "klue-nli (tiny): a[:80%] (8 examples) → a[80%:] (2 examples)" in md


def _write(path: Path, obj: object) -> Path:
    path.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    return path


def test_klue_re_fixture_and_entity_offsets(tmp_path):
    sentence = "〈Something〉는 조지 해리슨이 쓰고 비틀즈가 1969년 앨범 《Abbey Road》에 담은 노래다."
    record = {
        "guid": "klue-re-v1_train_00000",
        "sentence": sentence,
        "subject_entity": {"word": "비틀즈", "start_idx": 24, "end_idx": 26, "type": "ORG"},
        "object_entity": {"word": "조지 해리슨", "start_idx": 13, "end_idx": 18, "type": "PER"},
        "label": "no_relation",
        "source": "wikipedia",
    }
    examples = data.load_task_file("klue-re", _write(tmp_path / "re.json", [record]))
    assert examples[0]["subject"] == {"word": "비틀즈", "start": 24, "end": 26, "type": "ORG"}
    assert examples[0]["label"] == "no_relation"
    record["object_entity"] = {"word": "조지 해리슨", "start_idx": 12, "end_idx": 17, "type": "PER"}
    with pytest.raises(KplmError, match="object_entity word does not match"):
        data.load_task_file("klue-re", _write(tmp_path / "re.json", [record]))


def test_klue_mrc_fixture_feeds_the_metric(tmp_path):
    context = "세종대왕은 1443년에 훈민정음을 창제하였다. 훈민정음은 1446년에 반포되었다."
    mrc = {
        "version": "v1.1",
        "data": [
            {
                "title": "훈민정음",
                "news_category": None,
                "source": "wikipedia",
                "paragraphs": [
                    {
                        "context": context,
                        "qas": [
                            {
                                "question": "훈민정음을 창제한 사람은?",
                                "answers": [{"text": "세종대왕", "answer_start": 0}],
                                "question_type": 1,
                                "is_impossible": False,
                                "guid": "klue-mrc-v1_dev_00001",
                            },
                            {
                                "question": "훈민정음이 폐지된 해는?",
                                "answers": [],
                                "plausible_answers": [{"text": "1446년", "answer_start": 30}],
                                "question_type": 3,
                                "is_impossible": True,
                                "guid": "klue-mrc-v1_dev_00002",
                            },
                        ],
                    }
                ],
            }
        ],
    }
    examples = data.load_task_file("klue-mrc", _write(tmp_path / "mrc.json", mrc))
    assert [e["answers"] for e in examples] == [["세종대왕"], []]
    assert examples[1]["is_impossible"] and examples[1]["question_type"] == 3
    scores = metrics.mrc_scores(["세종대왕은", ""], [e["answers"] for e in examples])
    assert scores["exact_match"] == 50.0  # "세종대왕은" is not exact; "" answers the impossible question
    assert scores["rouge_w"] == pytest.approx((2 * 0.8 / 1.8 + 1) / 2 * 100)  # LCCS 4: P 4/5, R 1
    mrc["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = 3
    with pytest.raises(KplmError, match="not at answer_start 3"):
        data.load_task_file("klue-mrc", _write(tmp_path / "mrc.json", mrc))


def test_wos_fixture_gives_one_example_per_user_turn(tmp_path):
    dialogue = {
        "guid": "wos-v1_dev_00000",
        "domains": ["관광"],
        "dialogue": [
            {
                "role": "user",
                "text": "서울 중앙에 있는 박물관을 찾아주세요.",
                "state": ["관광-종류-박물관", "관광-지역-서울 중앙"],
            },
            {"role": "sys", "text": "국립중앙박물관은 어떠신가요?"},
            {
                "role": "user",
                "text": "좋아요. 입장료도 알려주세요.",
                "state": ["관광-종류-박물관", "관광-지역-서울 중앙", "관광-이름-국립중앙박물관"],
            },
        ],
    }
    turns = data.load_task_file("wos", _write(tmp_path / "wos.json", [dialogue]))
    assert [t["guid"] for t in turns] == ["wos-v1_dev_00000-0", "wos-v1_dev_00000-2"]
    assert len(turns[1]["history"]) == 3
    gold = [t["state"] for t in turns]
    scores = metrics.wos_scores([gold[0], gold[0]], gold)
    assert scores["joint_goal_accuracy"] == 50.0
    assert scores["slot_micro_f1"] == pytest.approx((1 + 2 * (2 / 3) / (1 + 2 / 3)) / 2 * 100)  # P 1, R 2/3
    dialogue["dialogue"][0]["state"] = ["박물관"]
    with pytest.raises(KplmError, match="domain-slot-value"):
        data.load_task_file("wos", _write(tmp_path / "wos.json", [dialogue]))


def test_nsmc_sentiment_reader(tmp_path):
    from kplm.finetune.data import load_task_file

    path = tmp_path / "sentiment.jsonl"
    path.write_text(
        '{"text": "정말 재밌어요", "label": 1}\n\n{"text": "지루했다", "label": 0}\n', encoding="utf-8"
    )
    assert load_task_file("nsmc", path) == [
        {"text_a": "정말 재밌어요", "text_b": None, "label": "positive"},
        {"text_a": "지루했다", "text_b": None, "label": "negative"},
    ]
    path.write_text('{"text": "별로", "label": 5}\n', encoding="utf-8")
    with pytest.raises(KplmError, match=r"sentiment.jsonl:1: label must be 0 or 1"):
        load_task_file("nsmc", path)
    path.write_text('{"text": "별로", "label": 0}\n{"text": \n', encoding="utf-8")
    with pytest.raises(KplmError, match=r"sentiment.jsonl:2: invalid JSON"):
        load_task_file("nsmc", path)
