"""New corpus rules on literal Korean text: each filter's exact drop reason, boilerplate line removal,
CP949/EUC-KR source files (decoded, never mojibake) and the fused filter step's agreement with the rules."""

import json
import re
import sys
import unicodedata

from datatrove.data import Document

from kplm.corpus import filters
from kplm.corpus.clean import CleanConfig, clean
from kplm.corpus.encoding import looks_like_cp949
from kplm.corpus.normalize import boilerplate_lines_v1, normalize
from kplm.corpus.sentences import split_sentences
from kplm.corpus.shards import iter_documents

GOOD = "오늘 서울의 낮 기온은 영상 십오 도까지 올라 포근하겠습니다."
NEWS = (
    "정부는 올해 하반기 경제정책 방향을 발표하고 내수 회복을 위한 지원책을 내놓았다. "
    "전문가들은 소비 심리가 살아나려면 물가 안정이 먼저라고 지적했다."
)


def ids(out, rule):
    return sorted(d["id"] for d in iter_documents(out / "excluded" / rule))


def test_new_filters_drop_with_their_reason(tmp_path):
    looped = "이 제품 정말 좋아요 강력 추천합니다 지금 바로 구매하세요 " * 12
    records = [
        {"id": "good", "text": GOOD},
        {"id": "news", "text": NEWS},
        {"id": "digits", "text": "경기 결과 12 대 10 점수 2024 0315 기록"},
        {
            "id": "links",
            "text": "자세한 내용은 저희 홈페이지를 참고하여 주시기 바랍니다 www.kplm.kr/a 메일 help@kplm.kr",
        },
        {"id": "loop", "text": looped},
        {"id": "one_link", "text": f"{NEWS}\n출처: https://blog.example.org/haesol_life/335752388?ref=share"},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "out"
    counts = clean(CleanConfig(input=[str(src)], output=out, max_chars=10_000))
    assert sorted(d["id"] for d in iter_documents(out)) == ["good", "news", "one_link"]
    assert ids(out, "digit_ratio_v1") == ["digits"]
    assert ids(out, "url_email_ratio_v1") == ["links"]
    assert ids(out, "repeated_ngrams_v1") == ["loop"]
    assert counts["input"] == counts["kept"] + counts["dropped"] == 6
    assert (
        sum(counts["kept_length_histogram"].values()) == 3 and counts["kept_length_histogram"]["20-49"] == 1
    )
    assert "url_email_ratio_v1" in (out / "clean_report_drops.svg").read_text(encoding="utf-8")
    assert (out / "clean_report_lengths.svg").exists()


def test_boilerplate_lines_are_removed_but_sentences_stay():
    article = "\n".join(
        [
            NEWS,
            "<저작권자 ⓒ 연합뉴스, 무단전재-재배포금지>",
            "무단 전재 및 재배포 금지",
            "로그인 후 이용해 주세요",
            "기사 공유하기",
            "맨 위로 가기",
        ]
    )
    assert boilerplate_lines_v1(article) == NEWS
    assert normalize(article) == NEWS
    for sentence in (
        "무단 전재는 불법이라고 그는 말했다",
        "로그인 후 봐야 해서 짜증났어요",
        "목록에 있는 사람들은 모두 참석했다",
        GOOD,
    ):
        assert boilerplate_lines_v1(sentence) == sentence


def test_fused_step_agrees_with_each_rule_alone():
    rules = [
        filters.MinCharsFilter(10),
        filters.HangulRatioFilter(0.4),
        filters.SymbolRatioFilter(0.3),
        filters.DigitRatioFilter(0.5),
    ]
    texts = [GOOD, "ㅇㅇ", "Great movie!!", "★★★★★ 최고 ★★★★★", "1234567890 원", NEWS]
    docs = [Document(text=t, id=str(i)) for i, t in enumerate(texts)]
    kept = [d.text for d in filters.QualityFilters(rules).run(iter(docs))]
    alone = [t for t in texts if all(r.filter(Document(text=t, id="x")) is True for r in rules)]
    assert kept == alone == [GOOD, NEWS]


def test_symbol_count_matches_unicode_categories():
    for code in range(0, sys.maxunicode + 1, 7):  # every 7th code point of all planes
        if 0xD800 <= code <= 0xDFFF:
            continue
        ch = chr(code)
        assert filters.count_symbols(f"가{ch}나") == (unicodedata.category(ch)[0] in "PS"), hex(code)
    assert filters.count_symbols("최고!! 😀👍 ★") == 5
    assert filters.TextStats("ㅋㅋ 한국어 abc").hangul == 5


def test_cp949_and_euc_kr_files_are_decoded(tmp_path):
    lines = [GOOD, NEWS, "어제 본 영화는 생각보다 훨씬 재미있었습니다."]
    (tmp_path / "legacy.txt").write_bytes("\r\n".join(lines).encode("cp949") + b"\r\n")
    records = "".join(
        json.dumps({"id": str(i), "text": t}, ensure_ascii=False) + "\n" for i, t in enumerate(lines)
    )
    (tmp_path / "legacy.jsonl").write_bytes(records.encode("euc-kr"))
    out = tmp_path / "out"
    counts = clean(CleanConfig(input=[str(tmp_path)], output=out, dedup=False))
    assert counts == {**counts, "input": 6, "kept": 6, "quarantined": 0}
    docs = list(iter_documents(out))
    assert sorted(d["text"] for d in docs) == sorted(lines * 2)
    assert all(json.loads(d["metadata"])["source_encoding"] == "cp949" for d in docs)


def test_undecodable_lines_in_a_cp949_file_are_quarantined(tmp_path):
    good = (GOOD + "\n").encode("cp949") * 3
    (tmp_path / "bad.txt").write_bytes(good + b"\xc7\xd1\xff\xff broken\n" + (NEWS + "\n").encode("cp949"))
    out = tmp_path / "out"
    counts = clean(CleanConfig(input=[str(tmp_path / "bad.txt")], output=out, dedup=False))
    assert counts["input"] == 5 and counts["kept"] == 4 and counts["quarantined"] == 1
    entry = json.loads((out / "quarantine" / "00000.jsonl").read_text())
    assert entry["reason_code"] == "invalid_cp949" and entry["origin"].endswith("bad.txt:4")


def test_mojibake_is_not_accepted_as_cp949():
    assert looks_like_cp949((GOOD + "\n").encode("cp949"))
    assert not looks_like_cp949((GOOD + "\n").encode("utf-8"))
    assert not looks_like_cp949("Café très élégant, déjà vu à Paris, naïve\n".encode("latin-1"))


def test_near_duplicates_are_removed_with_minhash(tmp_path):
    base = (
        "이 영화는 배우들의 연기가 정말 훌륭했고 음악과 영상미도 뛰어나서 두 시간이 금방 지나갔습니다. "
        "다만 결말이 조금 급하게 마무리된 느낌이 있어서 아쉬웠지만 그래도 극장에서 볼 만한 작품이었어요."
    )
    variant = (
        base.replace("훌륭했고", "훌륭했고,").replace("아쉬웠지만", "아쉬웠지만!!").replace(" ", "  ", 3)
    )
    other = (
        "주말에 가족과 함께 바닷가에 다녀왔는데 날씨가 맑아서 산책하기 좋았고 "
        "저녁에는 시장에서 신선한 회를 먹었습니다. 다음에도 꼭 다시 가고 싶어요."
    )
    records = [
        {"id": "base", "text": base},
        {"id": "variant", "text": variant},
        {"id": "other", "text": other},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "out"
    counts = clean(CleanConfig(input=[str(src)], output=out, near_dedup=True))
    assert counts["dropped_by_rule"] == {"minhash_dedup_v1": 1}
    kept = sorted(d["id"] for d in iter_documents(out))
    assert len(kept) == 2 and "other" in kept and counts["input"] == 3
    assert len(ids(out, "minhash_dedup_v1")) == 1


def test_documents_overlapping_klue_dev_are_removed(tmp_path, shared_data):
    klue = shared_data / "klue"
    nli = json.loads((klue / "klue-nli-v1.1_dev.json").read_text(encoding="utf-8"))
    premise = next(r["premise"] for r in nli if len(r["premise"]) > 40)
    ner_line = next(
        line
        for line in (klue / "klue-ner-v1.1_dev.tsv").read_text(encoding="utf-8").splitlines()
        if line.startswith("## klue-ner") and len(line) > 80
    )
    ner_sentence = re.sub(r"<([^<>:]+):[A-Z]{2,3}>", r"\1", ner_line.split("\t", 1)[1])
    records = [
        {"id": "copied_nli", "text": f"블로그 글입니다. {premise} 이상입니다."},
        {"id": "copied_ner", "text": ner_sentence.replace(" ", "  ")},
        {"id": "clean", "text": NEWS},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "out"
    counts = clean(CleanConfig(input=[str(src)], output=out, decontaminate=[str(klue)], max_symbol_ratio=1.0))
    assert [d["id"] for d in iter_documents(out)] == ["clean"]
    assert ids(out, "decontam_v1") == ["copied_ner", "copied_nli"]
    assert counts["decontaminated_by_benchmark"] == {"klue-ner-v1.1_dev.tsv": 1, "klue-nli-v1.1_dev.json": 1}
    assert "klue-nli-v1.1_dev.json" in (out / "clean_report.md").read_text(encoding="utf-8")


def test_sentence_splitter_recovers_klue_dp_boundaries(shared_data):
    lines = (shared_data / "klue" / "klue-dp-v1.1_dev.tsv").read_text(encoding="utf-8").splitlines()
    gold = [line.split("\t", 1)[1].strip() for line in lines if line.startswith("## klue-dp")]
    assert len(gold) == 2000
    hits = found = 0
    for i in range(0, len(gold), 5):  # paragraphs of 5 gold sentences
        predicted = split_sentences(" ".join(gold[i : i + 5]))
        hits += len(set(predicted) & set(gold[i : i + 5]))
        found += len(predicted)
    assert hits / len(gold) > 0.98 and hits / found > 0.98
    assert split_sentences("가격은 3.5달러다. J. K. 롤링이 썼다! 정말?\n새 줄") == [
        "가격은 3.5달러다.",
        "J. K. 롤링이 썼다!",
        "정말?",
        "새 줄",
    ]


def test_short_sentences_are_removed_for_chosen_sources(tmp_path):
    web = "좋아요. " + NEWS + " 끝."
    records = [{"id": "w", "text": web, "source": "web"}, {"id": "r", "text": web, "source": "review"}]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "out"
    config = CleanConfig(
        input=[str(src)], output=out, min_sentence_chars=20, min_sentence_sources=["web"], dedup=False
    )
    clean(config)
    texts = {d["id"]: d["text"] for d in iter_documents(out)}
    assert texts == {"w": NEWS, "r": web}


def test_txt_paragraph_mode_reads_blank_line_separated_documents(tmp_path):
    (tmp_path / "essays.txt").write_text(
        f"{GOOD}\n{NEWS}\n\n\n어제 본 영화는 정말 재미있었습니다.\n", encoding="utf-8"
    )
    out = tmp_path / "out"
    counts = clean(CleanConfig(input=[str(tmp_path / "essays.txt")], output=out, txt_paragraphs=True))
    docs = sorted((d["id"], d["text"]) for d in iter_documents(out))
    assert docs == [("essays:1", f"{GOOD}\n{NEWS}"), ("essays:5", "어제 본 영화는 정말 재미있었습니다.")]
    assert counts["input"] == 2
    jsonl = tmp_path / "b.jsonl"  # blank lines in JSONL files are just skipped in paragraph mode
    jsonl.write_text(json.dumps({"text": GOOD}, ensure_ascii=False) + "\n\n", encoding="utf-8")
    assert clean(CleanConfig(input=[str(jsonl)], output=tmp_path / "o2", txt_paragraphs=True))["kept"] == 1
