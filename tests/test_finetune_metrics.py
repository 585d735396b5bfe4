"""KLUE metrics on small cases whose expected values are worked out by hand in the comments."""

from __future__ import annotations

import math

import pytest

from kplm.finetune import metrics as m


def test_ynat_macro_f1_hand_case():
    # a: tp1 fp0 fn1 -> 2/3; b: tp1 fp1 fn0 -> 2/3; c: tp1 -> 1; mean 7/9
    assert m.ynat_macro_f1(["a", "b", "b", "c"], ["a", "a", "b", "c"]) == pytest.approx(700 / 9)
    # a class only predicted (never gold) counts with F1 0: (1 + 0) / 2
    assert m.ynat_macro_f1(["x", "y"], ["x", "x"]) == pytest.approx((2 / 3 + 0) / 2 * 100)


def test_nli_accuracy():
    assert (
        m.nli_accuracy(
            ["entailment", "neutral", "neutral", "contradiction"], ["entailment"] + ["neutral"] * 3
        )
        == 75.0
    )
    with pytest.raises(ValueError):
        m.nli_accuracy(["a"], [])


def test_sts_pearson_and_binary_f1():
    # x-mean = (-1, 0, 1); y-mean = (-4/3, -1/3, 5/3); r = 3 / sqrt(2 * 42/9) = 9 / sqrt(84)
    assert m.sts_pearsonr([1, 2, 3], [1, 2, 4]) == pytest.approx(900 / math.sqrt(84))
    assert m.sts_pearsonr([3, 2, 1], [1, 2, 3]) == pytest.approx(-100.0)
    # binarised at >= 3.0: pred (1, 0, 1, 0), gold (1, 1, 0, 0): tp1 fp1 fn1 -> F1 1/2
    assert m.sts_f1([3.0, 2.9, 4.0, 1.0], [3.5, 3.0, 2.0, 1.0]) == pytest.approx(50.0)
    assert m.sts_f1([1.0], [1.0]) == 0.0  # no positive anywhere: scikit-learn's zero_division 0


def test_iob2_entities_strict():
    assert m.iob2_entities(["B-PS", "I-PS", "O", "B-LC"]) == {("PS", 0, 2), ("LC", 3, 4)}
    assert m.iob2_entities(["B-PS", "B-PS"]) == {("PS", 0, 1), ("PS", 1, 2)}
    # I- without a B- of the same type starts nothing in strict IOB2
    assert m.iob2_entities(["I-PS", "I-PS", "O"]) == set()
    assert m.iob2_entities(["B-PS", "I-OG", "I-OG"]) == {("PS", 0, 1)}


def test_ner_entity_macro_f1():
    gold = [["B-PS", "I-PS", "O", "B-LC"]]
    # PS matched (F1 1), LC missed (0), OG spurious (0): 1/3
    assert m.ner_entity_macro_f1(gold, [["B-PS", "I-PS", "O", "B-OG"]]) == pytest.approx(100 / 3)
    # the PS span without its B- is no entity: PS 0, LC 1 -> 1/2
    assert m.ner_entity_macro_f1(gold, [["I-PS", "I-PS", "O", "B-LC"]]) == pytest.approx(50.0)
    # a span boundary off by one is a miss (strict matching): PS tp0 fp1 fn1 -> 0, LC 1
    assert m.ner_entity_macro_f1(gold, [["B-PS", "O", "O", "B-LC"]]) == pytest.approx(50.0)
    # entities are per sentence: the same offsets in another sentence do not match
    assert m.ner_entity_macro_f1([["B-PS"], ["O"]], [["O"], ["B-PS"]]) == 0.0


def test_ner_char_macro_f1_counts_every_label():
    gold = [["B-PS", "I-PS", "O", "B-LC"]]
    pred = [["B-PS", "O", "O", "B-LC"]]
    # B-PS 1, I-PS 0 (missed), B-LC 1, O tp1 fp1 -> 2/3, B-OG absent everywhere -> 1: mean 11/15
    labels = ["B-PS", "I-PS", "B-LC", "O", "B-OG"]
    assert m.ner_char_macro_f1(gold, pred, labels) == pytest.approx(1100 / 15)


def test_re_micro_f1_ignores_no_relation():
    gold = ["r1", "no_relation", "r2", "r1"]
    pred = ["r1", "r1", "no_relation", "r2"]
    # tp: #0; fp: #1 (r1 for no_relation), #3 (r2 for r1); fn: #2, #3 -> 2 / (2 + 2 + 2)
    assert m.re_micro_f1(pred, gold) == pytest.approx(100 / 3)
    assert m.re_micro_f1(["no_relation"], ["no_relation"]) == 0.0


def test_pr_curve_auc_hand_case():
    # thresholds .9 .8 .7 .1 -> (R, P) = (.5, 1) (.5, .5) (1, 2/3) (1, .5), plus (0, 1):
    # area = .5 * (1 + 1) / 2 + .5 * (.5 + 2/3) / 2 = .5 + .291666...
    assert m.pr_curve_auc([1, 0, 1, 0], [0.9, 0.8, 0.7, 0.1]) == pytest.approx(0.5 + 0.5 * (0.5 + 2 / 3) / 2)
    # tied scores form one point (R 1, P .5): area 1 * (1 + .5) / 2
    assert m.pr_curve_auc([1, 0], [0.5, 0.5]) == pytest.approx(0.75)


def test_re_auprc_averages_classes():
    assert m.re_auprc([[0.9, 0.1], [0.2, 0.8]], [0, 1]) == pytest.approx(100.0)
    # class 0 as above (0.791666...), class 1 scores reversed: targets (0, 1, 0, 1), scores (.1 .2 .3 .9)
    # -> points (.5, 1) (.5, .5) (1, 2/3) (1, .5): same area
    probs = [[0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.1, 0.9]]
    expected = (0.5 + 0.5 * (0.5 + 2 / 3) / 2) * 100
    assert m.re_auprc(probs, [0, 1, 0, 1]) == pytest.approx(expected)


def test_dp_scores_hand_case():
    gold_heads, gold_labels = [[2, 0, 2]], [["NP_SBJ", "VP", "NP_OBJ"]]
    scores = m.dp_scores(gold_heads, gold_labels, [[2, 0, 1]], [["NP_SBJ", "VP", "NP_OBJ"]])
    assert scores["uas"] == pytest.approx(200 / 3)
    assert scores["las"] == pytest.approx(200 / 3)
    # head classes 2: tp1 fn1 -> 2/3; 0: 1; 1: fp1 -> 0: mean 5/9
    assert scores["uas_macro_f1"] == pytest.approx(500 / 9)
    # types NP_SBJ 1, VP 1, NP_OBJ (its word's head is wrong -> PAD) 0, PAD 0: mean 1/2
    assert scores["las_macro_f1"] == pytest.approx(50.0)


def test_dp_rare_labels_fold_into_others():
    # VP_CMP (index 15) and X (index 23) are both "others" for KLUE's LAS macro-F1, not for plain LAS
    scores = m.dp_scores([[0]], [["VP_CMP"]], [[0]], [["X"]])
    assert scores["las_macro_f1"] == 100.0
    assert scores["las"] == 0.0


def test_mrc_normalisation_em_and_lccs_rouge_w():
    assert m.normalize_mrc_answer(" 《조선》의  '왕'. ") == "《조선》의 왕"
    # LCCS of "세종 대왕은" (6 chars) and "세종대왕" (4) is 2: P 1/3, R 1/2 -> F1 0.4
    assert m.lccs_f1("세종 대왕은", "세종대왕") == pytest.approx(0.4)
    scores = m.mrc_scores(["세종대왕.", "세종 대왕은", ""], [["세종", "세종대왕"], ["세종대왕"], []])
    # EM 1, 0, 1 (unanswerable answered with ""); ROUGE-W 1, .4, 1
    assert scores["exact_match"] == pytest.approx(200 / 3)
    assert scores["rouge_w"] == pytest.approx(240 / 3)


def test_weighted_lcs_rouge_w_reference():
    assert m.weighted_lcs_rouge_w("abc", "abc") == pytest.approx(1.0)
    # LCS "ab" in two runs of 1: C = 2; R = (2 / 3**1.2) ** (1/1.2), P = (2 / 2**1.2) ** (1/1.2)
    r, p = 2 ** (1 / 1.2) / 3, 2 ** (1 / 1.2) / 2
    assert m.weighted_lcs_rouge_w("ab", "acb") == pytest.approx(2 * p * r / (p + r))
    assert 2 * p * r / (p + r) == pytest.approx(0.7127, abs=1e-4)


def test_wos_joint_goal_accuracy_and_slot_f1():
    gold = [["관광-종류-박물관", "관광-지역-서울 중앙"], [], ["숙소-가격대-저렴"]]
    pred = [["관광-종류-박물관"], [], ["숙소-가격대-비쌈"]]
    scores = m.wos_scores(pred, gold)
    # only turn 2 is entirely right; slot F1: 2/3 (P 1, R 1/2), 1 (both empty), 0 -> 5/9
    assert scores["joint_goal_accuracy"] == pytest.approx(100 / 3)
    assert scores["slot_micro_f1"] == pytest.approx(500 / 9)
    # order of slots does not matter for JGA
    assert m.wos_scores([["b", "a"]], [["a", "b"]])["joint_goal_accuracy"] == 100.0
