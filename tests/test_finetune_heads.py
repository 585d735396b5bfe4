"""KLUE-RE, KLUE-DP, KLUE-MRC and WoS heads: tiny fixtures in the official formats (RE/MRC/WoS, Korean
sentences written here) and a slice of the real KLUE-DP dev set, fine-tuned on a tiny random BERT."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _finetune_fixtures import DP, shared_tiny_model

from kplm.errors import KplmError
from kplm.finetune import data
from kplm.finetune.run import FinetuneConfig, finetune


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return shared_tiny_model(tmp_path_factory)


def _entity(sentence: str, word: str, kind: str) -> dict:
    start = sentence.index(word)
    return {"word": word, "start_idx": start, "end_idx": start + len(word) - 1, "type": kind}


RE_ROWS = [
    ("이순신은 1545년 한성에서 태어났다.", "이순신", "PER", "1545년", "DAT", "per:date_of_birth"),
    ("세종대왕은 1397년에 태어난 조선의 왕이다.", "세종대왕", "PER", "1397년", "DAT", "per:date_of_birth"),
    ("김민수는 삼성전자에서 일하는 연구원이다.", "김민수", "PER", "삼성전자", "ORG", "per:employee_of"),
    ("박지영은 현대자동차 연구소에 다닌다.", "박지영", "PER", "현대자동차", "ORG", "per:employee_of"),
    ("네이버의 본사는 성남시 분당구에 있다.", "네이버", "ORG", "성남시", "LOC", "org:place_of_headquarters"),
    ("카카오는 제주도에 본사를 두고 있다.", "카카오", "ORG", "제주도", "LOC", "org:place_of_headquarters"),
    ("어제 서울에는 비가 많이 내렸고 김철수는 집에 있었다.", "김철수", "PER", "서울", "LOC", "no_relation"),
    ("이 영화는 2019년에 개봉했고 홍길동이 주연을 맡았다.", "홍길동", "PER", "2019년", "DAT", "no_relation"),
]


def _write_re(path: Path) -> list[dict]:
    records = [
        {
            "guid": f"klue-re-v1_train_{i:05d}",
            "sentence": s,
            "subject_entity": _entity(s, subj, st),
            "object_entity": _entity(s, obj, ot),
            "label": label,
            "source": "wikipedia",
        }
        for i, (s, subj, st, obj, ot, label) in enumerate(RE_ROWS)
    ]
    path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    return records


def _overfit(model: Path, task: str, path: Path, out: Path, **kw) -> dict:
    settings = {"epochs": 20, "lr": 2e-3, "batch_size": 4, "warmup_ratio": 0.0, "threads": 1, **kw}
    return finetune(
        FinetuneConfig(model=model, task=task, output=out, train_file=path, eval_file=path, **settings)
    )


def _check_training(result: dict, epochs: int) -> None:
    training = result["training"]
    assert training["last_loss"] < training["first_loss"] * 0.7, training
    assert len(training["epochs"]) == epochs
    main = training["main_metric"]
    best = max(training["epochs"], key=lambda e: e["metrics"][main])
    assert result["best_epoch"] == best["epoch"] and result["metrics"] == best["metrics"]
    assert all(0.0 <= v <= 100.0 for v in result["metrics"].values()), result["metrics"]
    out = Path(result["saved_model"]).parent
    assert f"evaluated epochs: epoch {result['best_epoch']:g}" in (out / "results.md").read_text("utf-8")
    record = json.loads((out / "kplm_record.json").read_text("utf-8"))
    assert record["counts"]["best_epoch"] == result["best_epoch"]
    assert record["counts"]["saved_model"] == result["saved_model"]


def test_re_entity_markers_training_and_reload(tiny_model, tmp_path):
    from transformers import AutoModel, AutoTokenizer

    from kplm.finetune.heads import load_head_model
    from kplm.finetune.task_re import RE_LABELS, RelationClassifier, Task, mark_entities

    path = tmp_path / "klue-re-v1.1_train.json"
    _write_re(path)
    examples = data.load_task_file("klue-re", path)
    assert mark_entities(examples[0]) == "<subj> 이순신 </subj> 은 <obj> 1545년 </obj> 한성에서 태어났다."
    adjacent = {
        "sentence": "김민수삼성전자",
        "subject": {"start": 0, "end": 2},
        "object": {"start": 3, "end": 6},
    }
    assert mark_entities(adjacent) == "<subj> 김민수 </subj> <obj> 삼성전자 </obj>"
    result = _overfit(tiny_model, "klue-re", path, tmp_path / "re", epochs=12)
    assert set(result["metrics"]) == {"micro_f1", "auprc"}
    _check_training(result, 12)
    assert result["metrics"]["micro_f1"] >= 50.0, result["training"]["epochs"]
    # the best epoch's saved model (marker tokens in its tokenizer) reproduces the reported scores
    saved = result["saved_model"]
    task = Task("klue-re", result["hyperparameters"], None)
    task.tokenizer = AutoTokenizer.from_pretrained(saved)
    assert task.tokenizer.tokenize("<subj> 이순신 </subj>")[0] == "<subj>"
    task.model = load_head_model(saved, RelationClassifier)
    assert task.model.head_args["labels"] == list(RE_LABELS)
    assert AutoModel.from_pretrained(saved).get_input_embeddings().num_embeddings == len(task.tokenizer)
    scores = task.evaluate(examples, task.encode(examples, training=False))
    assert {k: round(v, 4) for k, v in scores.items()} == result["metrics"]


def test_dp_biaffine_on_real_klue_dp_slice(tiny_model, tmp_path):
    from transformers import AutoTokenizer

    from kplm.finetune.heads import load_head_model
    from kplm.finetune.task_dp import BiaffineParser, Task, word_tokens

    sentences = data.load_task_file("klue-dp", DP)[:60]
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model))
    for s in sentences:
        enc = tokenizer(" ".join(s["words"]), return_offsets_mapping=True)
        first, last = word_tokens(enc["offset_mapping"], s["words"])
        assert all(0 < f <= lst for f, lst in zip(first, last, strict=True))  # every word has subwords
        assert first == sorted(first) and len(set(first)) == len(first)
    result = finetune(
        FinetuneConfig(
            model=tiny_model,
            task="klue-dp",
            output=tmp_path / "dp",
            split_of=DP,
            max_train_examples=48,
            max_eval_examples=16,
            epochs=4,
            lr=2e-3,
            batch_size=8,
            warmup_ratio=0.0,
            threads=1,
        )
    )
    assert result["train_split"] == "klue-dp-v1.1_dev[:80%] (shuffled seed 42) first 48"
    assert result["eval_split"] == "klue-dp-v1.1_dev[80%:] (shuffled seed 42) first 16"
    assert set(result["metrics"]) == {"uas_macro_f1", "las_macro_f1", "uas", "las"}
    _check_training(result, 4)
    model = load_head_model(result["saved_model"], BiaffineParser)
    task = Task("klue-dp", result["hyperparameters"], None)
    task.tokenizer, task.model = AutoTokenizer.from_pretrained(result["saved_model"]), model
    train, dev, _, _ = data.split_examples(data.load_task_file("klue-dp", DP), "x", 0.8, 42)
    dev = dev[:16]
    features = task.encode(dev, training=False)
    heads, labels = task.predict(features)
    for s, h, lab in zip(dev, heads, labels, strict=True):
        assert len(h) == len(lab) == len(s["words"])
        assert all(0 <= x <= len(s["words"]) and x != i + 1 for i, x in enumerate(h))
    scores = task.evaluate(dev, features)
    assert {k: round(v, 4) for k, v in scores.items()} == result["metrics"]


MRC_CONTEXT = (
    "세종대왕은 조선의 네 번째 왕으로 1397년에 태어났다. 그는 집현전을 설치하여 학자들을 모았고, "
    "1443년에 훈민정음을 창제하였다. 훈민정음은 백성을 가르치는 바른 소리라는 뜻이다. "
    "세종 시대에는 측우기와 해시계 같은 과학 기구도 만들어졌다. 장영실은 이 시기에 활동한 "
    "대표적인 과학자로, 자격루라는 물시계를 만들었다. 세종은 1450년에 세상을 떠났다."
)
MRC_QUESTIONS = [
    ("세종대왕이 태어난 해는?", "1397년"),
    ("훈민정음을 창제한 해는?", "1443년"),
    ("장영실이 만든 물시계의 이름은?", "자격루"),
    ("세종이 세상을 떠난 해는?", "1450년"),
    ("세종대왕이 좋아한 음식은?", None),
]


def _write_mrc(path: Path) -> None:
    qas = []
    for i, (question, answer) in enumerate(MRC_QUESTIONS):
        answers = [] if answer is None else [{"text": answer, "answer_start": MRC_CONTEXT.index(answer)}]
        qas.append(
            {
                "question": question,
                "answers": answers,
                "guid": f"klue-mrc-v1_train_{i:05d}",
                "question_type": 1,
                "is_impossible": answer is None,
            }
        )
    document = {
        "title": "세종대왕",
        "source": "wikipedia",
        "paragraphs": [{"context": MRC_CONTEXT, "qas": qas}],
    }
    path.write_text(json.dumps({"version": "v1.1", "data": [document]}, ensure_ascii=False), "utf-8")


def test_mrc_doc_stride_targets_postprocessing_and_reload(tiny_model, tmp_path):
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    from kplm.finetune.task_mrc import Task

    path = tmp_path / "klue-mrc-v1.1_train.json"
    _write_mrc(path)
    examples = data.load_task_file("klue-mrc", path)
    config = FinetuneConfig(model=tiny_model, task="klue-mrc", output=tmp_path, split_of=path, doc_stride=16)
    task = Task("klue-mrc", {"max_length": 64, "batch_size": 4}, config)
    task.tokenizer = AutoTokenizer.from_pretrained(str(tiny_model))
    features = task.encode(examples, training=True)
    assert len(features) > 2 * len(examples)  # the long context is cut into several overlapping windows
    tokens = task.encode(examples, training=False)
    found = {n: 0 for n in range(len(examples))}
    for f, w in zip(features, tokens, strict=True):
        ex = examples[f["example"]]
        assert len(f["input_ids"]) <= 64
        if f["start_positions"] == 0:
            assert f["end_positions"] == 0
            continue
        start, end = w["offsets"][f["start_positions"]][0], w["offsets"][f["end_positions"]][1]
        assert ex["answers"][0] in MRC_CONTEXT[start:end]
        found[f["example"]] += 1
    assert [found[n] > 0 for n in range(len(examples))] == [True, True, True, True, False]
    settings = {"epochs": 20, "lr": 3e-3, "max_length": 96, "doc_stride": 32}
    result = _overfit(tiny_model, "klue-mrc", path, tmp_path / "mrc", **settings)
    assert set(result["metrics"]) == {"exact_match", "rouge_w"}
    _check_training(result, 20)
    assert result["metrics"]["exact_match"] >= 40.0, result["training"]["epochs"]  # the spans are found
    config = FinetuneConfig(model=tiny_model, task="klue-mrc", output=tmp_path, split_of=path, doc_stride=32)
    task = Task("klue-mrc", result["hyperparameters"], config)
    task.tokenizer = AutoTokenizer.from_pretrained(result["saved_model"])
    task.model = AutoModelForQuestionAnswering.from_pretrained(result["saved_model"]).eval()
    tokens = task.encode(examples, training=False)
    answers = task.predict(examples, tokens)
    assert all(a == "" or a in MRC_CONTEXT for a in answers) and answers[-1] == ""
    scores = task.evaluate(examples, tokens)
    assert {k: round(v, 4) for k, v in scores.items()} == result["metrics"]


WOS_DIALOGUES = [
    [
        ("user", "서울 중심에 있는 박물관을 추천해 주세요.", ["관광-종류-박물관", "관광-지역-서울 중앙"]),
        ("sys", "국립중앙박물관은 어떠세요?", None),
        (
            "user",
            "좋아요. 근처에 저렴한 한식당도 알려 주세요.",
            ["관광-종류-박물관", "관광-지역-서울 중앙", "식당-종류-한식당", "식당-가격대-저렴"],
        ),
    ],
    [
        ("user", "서울 북쪽에 있는 공원에 가고 싶어요.", ["관광-종류-공원", "관광-지역-서울 북쪽"]),
        ("sys", "북서울꿈의숲이 있습니다.", None),
        (
            "user",
            "거기 근처 비싼 양식당도 있나요?",
            ["관광-종류-공원", "관광-지역-서울 북쪽", "식당-종류-양식당", "식당-가격대-비쌈"],
        ),
    ],
    [
        ("user", "가격은 상관없고 서울 남쪽 호텔을 찾아요.", ["숙소-가격대-dontcare", "숙소-지역-서울 남쪽"]),
        ("sys", "강남에 호텔이 많습니다.", None),
        (
            "user",
            "주차가 되는 곳이면 좋겠어요.",
            ["숙소-가격대-dontcare", "숙소-지역-서울 남쪽", "숙소-주차 가능-yes"],
        ),
    ],
]


def _write_wos(path: Path) -> None:
    dialogues = []
    for i, turns in enumerate(WOS_DIALOGUES):
        dialogue = []
        for role, text, state in turns:
            dialogue.append({"role": role, "text": text, **({"state": state} if state is not None else {})})
        dialogues.append({"guid": f"wos-v1_train_{i:05d}", "domains": ["관광"], "dialogue": dialogue})
    path.write_text(json.dumps(dialogues, ensure_ascii=False), encoding="utf-8")


def test_wos_ontology_classification_and_reload(tiny_model, tmp_path):
    from transformers import AutoTokenizer

    from kplm.finetune.heads import load_head_model
    from kplm.finetune.task_wos import SlotClassifier, Task, build_ontology, split_state

    path = tmp_path / "wos-v1.1_train.json"
    _write_wos(path)
    examples = data.load_task_file("wos", path)
    assert split_state("관광-지역-서울 중앙") == ("관광-지역", "서울 중앙")
    ontology = build_ontology(examples)
    assert ontology["식당-가격대"] == ["none", "dontcare", "비쌈", "저렴"]
    assert ontology["숙소-가격대"] == ["none", "dontcare"]
    result = _overfit(tiny_model, "wos", path, tmp_path / "wos", epochs=25, lr=3e-3, batch_size=2)
    assert set(result["metrics"]) == {"joint_goal_accuracy", "slot_micro_f1", "ontology_coverage"}
    assert result["metrics"]["ontology_coverage"] == 100.0
    _check_training(result, 25)
    assert result["metrics"]["slot_micro_f1"] >= 60.0, result["training"]["epochs"]
    model = load_head_model(result["saved_model"], SlotClassifier)
    assert model.head_args["ontology"] == ontology
    task = Task("wos", result["hyperparameters"], None)
    task.tokenizer, task.model, task.ontology = (
        AutoTokenizer.from_pretrained(result["saved_model"]),
        model,
        ontology,
    )
    features = task.encode(examples, training=False)
    assert all(f["input_ids"][0] == task.tokenizer.cls_token_id for f in features)
    scores = task.evaluate(examples, features)
    assert {k: round(v, 4) for k, v in scores.items()} == result["metrics"]


def test_max_length_fits_the_position_embeddings():
    from types import SimpleNamespace

    from transformers import BertConfig, RobertaConfig

    from kplm.finetune.task_cls import Task

    task = Task("klue-ner", {"max_length": 510}, None)
    task.model = SimpleNamespace(config=BertConfig(max_position_embeddings=512))
    assert task.fit_length() is None and task.hp["max_length"] == 510
    task.model = SimpleNamespace(config=RobertaConfig(max_position_embeddings=130, pad_token_id=1))
    assert task.fit_length() == 128 and task.hp["max_length"] == 128


def test_bad_inputs_of_new_tasks(tiny_model, tmp_path):
    path = tmp_path / "re.json"
    records = _write_re(path)
    records[0]["label"] = "per:favourite_food"
    path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(KplmError, match="unknown KLUE-RE label 'per:favourite_food'"):
        _overfit(tiny_model, "klue-re", path, tmp_path / "re", epochs=1)
    _write_re(path)
    with pytest.raises(KplmError, match="device: cannot use 'tpu:7'"):
        _overfit(tiny_model, "klue-re", path, tmp_path / "dev", epochs=1, device="tpu:7")
    with pytest.raises(KplmError, match="doc_stride"):
        from kplm.config import build

        build(
            FinetuneConfig,
            {"model": "m", "task": "klue-mrc", "output": "o", "split_of": "f", "doc_stride": 0},
        )
