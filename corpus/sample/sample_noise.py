"""Crawl-style noise for the kplm sample corpus (helper of ``make_sample.py``).

:class:`Noiser` picks documents with a seeded ``random.Random`` and damages them the way scraped web text is
damaged: boilerplate lines, long repeated-character runs, URLs, HTML tags and entities, odd whitespace,
zero-width and control characters, full-width digits, CRLF line ends and decomposed (NFD) Hangul. Every change
is recorded in the document's ``noise`` list. :data:`JUNK` holds low-quality documents that quality filters
should drop, and :func:`near_variant` makes near-duplicates.
"""

from __future__ import annotations

import random
import re
import unicodedata
from urllib.parse import quote

OUTLETS = ("가람일보", "해솔뉴스", "누리경제", "새빛타임즈")
REPORTERS = (
    ("박지영", "jiyoung.park"),
    ("김민수", "minsu.kim"),
    ("이서연", "seoyeon.lee"),
    ("최현우", "hyunwoo.choi"),
    ("정유진", "yujin.jung"),
    ("강태호", "taeho.kang"),
    ("윤지아", "jia.yoon"),
    ("조성민", "sungmin.cho"),
    ("한예린", "yerin.han"),
)
BOILERPLATE = {
    "news": (
        "무단 전재 및 재배포 금지",
        "ⓒ {outlet}, 무단 전재 및 재배포 금지",
        "<저작권자 ⓒ {outlet} 무단전재-재배포금지>",
        "Copyright ⓒ {outlet}. All rights reserved.",
        "▶ 지금 많이 본 뉴스\n▶ {outlet} 구독하기",
    ),
    "web": (
        "로그인 후 이용해 주세요.",
        "목록 | 이전글 | 다음글",
        "이 게시물을 공유하기: 카카오톡 | 페이스북 | 링크 복사",
        "댓글 0 · 로그인 후 댓글을 작성하실 수 있습니다.",
        "Copyright © 2024 Haesol Co., Ltd. All rights reserved.",
    ),
    "review": (
        "도움이 돼요 12 · 신고하기",
        "이 리뷰가 도움이 되었나요? 예 | 아니오",
        "판매자 답글: 소중한 리뷰 감사합니다 고객님^^ 또 찾아주세요~",
    ),
}
ZERO_WIDTH = ("\u200b", "\u200b", "\u200c", "\u200d", "\ufeff", "\u2060", "\u00ad")
CONTROL = ("\x07", "\x08", "\x0b", "\x0c", "\x1b", "\x1f", "\x7f", "\x85")
RUN_CHARS = ("ㅋ", "ㅠ", "!", ".", "ㅎ", "?", "~", "ㅜ")
HANGUL = "가-힣"
# Low-quality documents: too short, mostly symbols, not Korean, or boilerplate only.
JUNK = (
    ("chat", "ㅇㅇ"),
    ("review", "굿"),
    ("chat", "ㅋㅋㅋㅋㅋㅋㅋㅋㅋㅋㅋㅋㅋㅋㅋㅋㅋㅋㅋㅋㅋㅋㅋㅋㅋㅋㅋㅋ"),
    ("chat", "!!!!!!!!!!!!!!!!!!!!!!!!"),
    ("chat", "ㅎㅇ"),
    ("chat", "....."),
    ("review", "1"),
    ("review", "^^"),
    ("review", "★★★★★★★★★★★★★★★★★★★★"),
    ("web", "=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-="),
    ("web", "■■■■■ 광고 ■■■■■ ☎☎☎ >>>>>>>>>> 클릭 <<<<<<<<<<"),
    ("web", "Click here to subscribe to our newsletter! Best deals every week. Unsubscribe at any time."),
    ("web", "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt."),
    ("web", "404 Not Found - The requested URL was not found on this server."),
    ("web", "1234567890 0987654321 1111 2222 3333 4444 5555"),
    ("web", "SALE SALE SALE 50% OFF!!! >>> https://shop.example.com/sale?utm_source=spam <<<"),
    ("web", "var el = document.getElementById('main'); el.style.display = 'none';"),
    ("web", "[image] [image] [image] [image]"),
    ("web", "Page 1 of 23 | Next » | Last »"),
    ("chat", "asdfasdfasdf"),
    ("chat", "ok ok ok ok ok ok ok ok"),
    ("chat", "삭제된 댓글입니다."),
    ("web", "비밀글입니다."),
    ("web", "본 게시물은 관리자에 의해 삭제되었습니다."),
    ("news", "무단 전재 및 재배포 금지"),
    ("web", "로그인 후 이용해 주세요."),
    ("chat", "\ufffd\ufffd\ufffd\ufffd \ufffd\ufffd\ufffd"),
    ("news", "가람시 중앙시장 소식입니다".encode().decode("cp1252", errors="replace")),
)
NEAR_WORDS = (
    ("정말", "진짜"),
    ("진짜", "정말"),
    ("너무", "엄청"),
    ("매우", "아주"),
    ("오늘", "어제"),
    ("밝혔다", "전했다"),
    ("말했다", "설명했다"),
    ("좋아요", "좋네요"),
    ("있다", "있었다"),
    ("합니다", "하였습니다"),
)
NEAR_TAGS = {"news": " (종합)", "web": " [수정]", "chat": " ㅎㅎ", "review": " 추천합니다"}


def _gaps(text: str, protect: list[tuple] = ()) -> list[int]:
    """Positions between a Hangul syllable and a Hangul syllable or space: never inside numbers or addresses,
    nor inside the values of ``protect`` (PII items ``(kind, value, valid)``, e.g. names)."""
    spans = [(m.start(), m.end()) for _, v, _ in protect for m in re.finditer(re.escape(v), text)]
    gaps = (m.start() for m in re.finditer(rf"(?<=[{HANGUL}])(?=[{HANGUL} ])", text))
    return [g for g in gaps if not any(a < g < b for a, b in spans)]


def _insert(text: str, positions: list[int], pieces: list[str]) -> str:
    for pos, piece in sorted(zip(positions, pieces, strict=True), reverse=True):
        text = text[:pos] + piece + text[pos:]
    return text


class Noiser:
    """Applies each kind of noise to a fixed number of documents chosen with ``rng``."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def _mark(self, doc: dict, kind: str, text: str) -> None:
        if text != doc["text"]:
            doc["text"] = text
            doc.setdefault("noise", []).append(kind)

    def add_bylines(self, news: list[dict], fake) -> None:
        """Give some news articles a reporter byline (a fake name, and often a fake e-mail address)."""
        for i, doc in enumerate(self.rng.sample(news, 10)):
            name, local = REPORTERS[i % len(REPORTERS)]
            outlet = doc["outlet"] = OUTLETS[i % len(OUTLETS)]
            email = fake.email(local) if i % 5 != 2 and i % 5 != 4 else None
            doc["pii"].append(("name", name, None))
            if email:
                doc["pii"].append(("email", email, None))
            style = i % 5
            if style == 0:
                doc["text"] += f"\n{outlet} {name} 기자 {email}"
            elif style == 1:
                doc["text"] = f"[{outlet}={name} 기자] {doc['text']}\n{email}"
            elif style == 2:
                doc["text"] += f" /{name} 기자"
            elif style == 3:
                doc["text"] = f"(가람={outlet}) {name} 기자 = {doc['text']} {name} 기자({email})"
            else:
                doc["text"] = (
                    f"{outlet} | {name} 기자 | 입력 2024.03.{10 + i:02d} 09:{i + 10:02d}\n{doc['text']}"
                )

    def apply(self, docs: list[dict]) -> None:
        """Noise the hand-written documents of ``docs`` (junk documents, with an empty id, are left alone)."""
        base = [d for d in docs if d["id"]]
        by = {s: [d for d in base if d["source"] == s] for s in dict.fromkeys(d["source"] for d in base)}

        def pick(pool: list[dict], k: int) -> list[dict]:
            return self.rng.sample(pool, min(k, len(pool)))

        for source, count in (("news", 22), ("web", 14), ("review", 8)):
            for doc in pick(by[source], count):
                self._mark(doc, "boilerplate", self.boilerplate(doc["text"], source, doc.get("outlet")))
        for doc in pick(by["chat"], 20) + pick(by["review"], 14):
            self._mark(doc, "repeated_chars", self.repeats(doc["text"]))
        for doc in pick(base, 26):
            self._mark(doc, "url", self.url(doc["text"], doc["source"]))
        with_amp = pick([d for d in base if "&" in d["text"]], 6)
        others = [d for d in base if d["source"] != "chat" and d not in with_amp]
        for n, doc in enumerate(with_amp + pick(others, 24)):
            ops = (3, n % 2) if n < len(with_amp) else ((n + k) % 5 for k in (0, 2))
            self._mark(doc, "html", self.html(doc["text"], ops))
        for doc in pick(base, 36):
            self._mark(doc, "whitespace", self.whitespace(doc["text"]))
        for doc in pick(base, 22):
            self._mark(doc, "zero_width", self.zero_width(doc["text"], doc["pii"]))
        for n, doc in enumerate(pick(base, 9)):
            self._mark(doc, "control_chars", self.control(doc["text"], doc["pii"], nul=n == 0))
        numeric = [d for d in base if re.search(r"\d", d["text"]) and not d["pii"]]
        for doc in pick(numeric, 4):
            self._mark(doc, "fullwidth", self.fullwidth(doc["text"]))
        for doc in pick([d for d in base if "\n" in d["text"]], 6):
            self._mark(doc, "crlf", doc["text"].replace("\n", "\r\n"))
        for doc in pick(base, 9):
            self._mark(doc, "nfd", unicodedata.normalize("NFD", doc["text"]))

    def boilerplate(self, text: str, source: str, outlet: str | None = None) -> str:
        outlet = self.rng.choice(OUTLETS) if outlet is None else outlet
        line = self.rng.choice(BOILERPLATE[source]).format(outlet=outlet)
        return f"{line}\n{text}" if source == "web" and self.rng.random() < 0.3 else f"{text}\n{line}"

    def repeats(self, text: str) -> str:
        """Stretch an existing ㅋㅋ/ㅠㅠ/!!/... run to 8-40 characters, or append a new run."""
        runs = [m for m in re.finditer(r"([ㅋㅠㅎㅜ!.?~])\1+", text)]
        if runs:
            m = self.rng.choice(runs)
            return text[: m.start()] + m.group(1) * self.rng.randint(8, 40) + text[m.end() :]
        return text + " " + self.rng.choice(RUN_CHARS) * self.rng.randint(8, 40)

    def url(self, text: str, source: str) -> str:
        r = self.rng
        if source == "news":
            link = r.choice(
                (
                    f"\n기사 원문: https://news.example.com/article/{r.randint(10**7, 10**8 - 1)}?section=local&page=2",
                    f"\n▶ 관련 기사 https://m.example.com/news/view.html?idxno={r.randint(10**5, 10**6 - 1)}",
                )
            )
        elif source == "encyclopedia":
            link = f"\n참고: https://wiki.example.org/wiki/{quote(text.split()[0].strip('은는이가'))}"
        elif source == "chat":
            vid = "".join(r.choice("abcdefghijkmnpqrstuvwxyzABCDEFGH0123456789_-") for _ in range(11))
            link = r.choice(
                (
                    f" https://video.example.com/watch?v={vid}",
                    f"\n이거 봐봐 ㅋㅋ http://bit.example.net/{vid[:6]}",
                )
            )
        elif source == "review":
            link = r.choice(
                (
                    f" https://shop.example.net/product/{r.randint(100000, 999999)}?ref=review&utm_source=share",
                    f"\n구매 링크: https://smartstore.example.com/haesol/products/{r.randint(10**9, 10**10 - 1)}",
                    f" (사진 더 보기: https://blog.example.org/review_diary/{r.randint(10**8, 10**9 - 1)})",
                )
            )
        else:
            link = r.choice(
                (
                    f"\n출처: https://blog.example.org/haesol_life/{r.randint(10**8, 10**9 - 1)}",
                    "\n자세히 보기 → www.example.com/notice/view.php?no=" + str(r.randint(100, 9999)),
                )
            )
        return text + link

    def html(self, text: str, ops) -> str:
        """Apply ``ops``: 0 tags around the text, 1 <br> breaks, 2 &nbsp; between words, 3 escaped & " < > ',
        4 inline <b>/<span> tags."""
        for op in ops:
            if op == 0:
                text = '<div class="article-body"><p>' + text.replace("\n", "</p>\n<p>") + "</p></div>"
            elif op == 1:
                text = re.sub(r"([.!?]) (?=\S)", r"\1<br>", text, count=self.rng.randint(1, 3))
                text = text.replace("\n", "<br />\n")
            elif op == 2:
                gaps = [m.start() for m in re.finditer(rf"(?<=[{HANGUL}]) (?=[{HANGUL}])", text)]
                for pos in sorted(self.rng.sample(gaps, min(3, len(gaps))), reverse=True):
                    text = text[:pos] + "&nbsp;" + text[pos + 1 :]
            elif op == 3:
                text = (
                    text.replace("&", "&amp;")
                    .replace('"', "&quot;")
                    .replace("<", "&lt;")
                    .replace(">", "&gt;")
                )
                text = text.replace("'", "&#39;")
            else:
                words = list(re.finditer(rf"[{HANGUL}]{{2,}}", text))
                if words:
                    w = self.rng.choice(words)
                    text = text[: w.start()] + f"<b>{w.group()}</b>" + text[w.end() :]
                text = "<span style='font-size:10pt'>" + text + "</span><!-- end -->"
        return text

    def whitespace(self, text: str) -> str:
        """One or two of: doubled spaces, tabs, NBSP/ideographic spaces, blank lines, padding at both ends."""
        r = self.rng
        for op in r.sample(range(5), 2):
            spaces = [m.start() for m in re.finditer(rf"(?<=[{HANGUL}]) (?=[{HANGUL}])", text)]
            if op == 0 and spaces:
                for pos in sorted(r.sample(spaces, min(3, len(spaces))), reverse=True):
                    text = text[:pos] + " " * r.randint(2, 6) + text[pos + 1 :]
            elif op == 1 and spaces:
                pos = r.choice(spaces)
                text = text[:pos] + r.choice(("\t", "\u00a0", "\u3000", " \t ")) + text[pos + 1 :]
            elif op == 2:
                text = re.sub(r"([.!?]) (?=\S)", "\\1\n\n\n", text, count=1)
            elif op == 3:
                text = " " * r.randint(1, 4) + text + r.choice(("  ", "\n", " \n\n", "\t"))
            else:
                text = "\n" + text.replace("\n", "\n \n") + "\n\n"
        return text

    def zero_width(self, text: str, protect: list[tuple]) -> str:
        gaps = _gaps(text, protect)
        k = min(len(gaps), self.rng.randint(1, 4))
        text = _insert(text, self.rng.sample(gaps, k), [self.rng.choice(ZERO_WIDTH) for _ in range(k)])
        return "\ufeff" + text if self.rng.random() < 0.25 else text

    def control(self, text: str, protect: list[tuple], nul: bool = False) -> str:
        gaps = _gaps(text, protect)
        k = min(len(gaps), 2)
        pieces = ["\x00" if nul and i == 0 else self.rng.choice(CONTROL) for i in range(k)]
        return _insert(text, self.rng.sample(gaps, k), pieces)

    def fullwidth(self, text: str) -> str:
        return re.sub(r"[0-9A-Za-z%]", lambda m: chr(ord(m.group()) + 0xFEE0), text)


def near_variant(text: str, source: str, rng: random.Random) -> tuple[str, str]:
    """A near-duplicate of ``text``: one word, one digit or one punctuation mark changed, or a short tag added."""
    options = []
    if re.search(r"[.!?](?=\s*$)", text) or text.rstrip().endswith("다"):
        options.append("punctuation")
    if any(a in text for a, _ in NEAR_WORDS):
        options.append("word")
    if re.search(r"\d", text):
        options.append("number")
    if source in NEAR_TAGS:
        options.append("tag")
    op = rng.choice(options or ["tag"])
    if op == "punctuation":
        stripped = text.rstrip()
        if stripped[-1] in ".!?":
            new = stripped[:-1] + rng.choice(("!", "...", "", "!!")) + text[len(stripped) :]
        else:
            new = stripped + "." + text[len(stripped) :]
    elif op == "word":
        old, repl = next((a, b) for a, b in NEAR_WORDS if a in text)
        new = text.replace(old, repl, 1)
    elif op == "number":
        digits = [m.start() for m in re.finditer(r"\d", text)]
        pos = rng.choice(digits)
        new = text[:pos] + str((int(text[pos]) + rng.randint(1, 8)) % 10) + text[pos + 1 :]
    else:
        new = text + NEAR_TAGS.get(source, " (재게시)")
    return new, op
