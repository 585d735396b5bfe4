"""``kplm pii detect`` / ``kplm pii scrub`` on JSON Lines files: one record per line in, one out.

:func:`detect_file` copies every record and adds ``"pii": [{"start", "end", "type", "score"}, ...]``
(offsets into the record's text field); :func:`scrub_file` rewrites the text field under the chosen policy
and adds ``"pii_counts": {TYPE: n}``. Inputs may be ``.jsonl`` or gzip-compressed (detected by content,
not name); an output name ending in ``.gz`` is written compressed. Outputs are written to a temporary file
and renamed, so a failed run leaves no half-written output.

Bad lines (invalid UTF-8 or JSON, not an object, text field missing) stop the run with a one-line
:class:`~kplm.errors.KplmError` naming ``file:line``, or, with ``skip_bad_lines``, are counted and written
to ``<output>.rejected.jsonl`` (file, line, reason and the raw line: it is the user's own quarantine).
Nothing here prints or logs PII values; only counts are returned.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from tqdm import tqdm

from kplm.errors import KplmError
from kplm.pii.detect import check_person, check_types, detect
from kplm.pii.person_mecab import PersonMode
from kplm.pii.scrub import POLICIES, scrub
from kplm.pii.surrogate import Surrogator

_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(kw_only=True)
class PiiFileConfig:
    """Settings of ``kplm pii detect`` and ``kplm pii scrub`` (``policy`` only matters to scrub)."""

    input: Path = field(metadata={"help": "input JSON Lines file, one object per line (.jsonl or .jsonl.gz)"})
    output: Path = field(
        metadata={"help": "output JSON Lines file (name it .jsonl.gz to compress); written atomically"}
    )
    text_field: str = field(default="text", metadata={"help": "the record field holding the text"})
    policy: Literal["tag", "mask", "surrogate"] = field(
        default="tag",
        metadata={
            "help": "scrub: tag = [PHONE]-style placeholders, mask = *** of the same length, "
            "surrogate = realistic fakes keyed by $KPLM_PII_SECRET (random if unset)"
        },
    )
    min_score: float = field(
        default=0.5, metadata={"help": "report/replace only detections scoring at least this (0-1)"}
    )
    types: list[str] | None = field(
        default=None,
        metadata={"help": "PII types to look for, e.g. PHONE EMAIL RRN (default: all detectable types)"},
    )
    person: PersonMode = field(
        default="context",
        metadata={
            "help": "PERSON detector: context = names before a title (씨, 기자, 교수 …), fast; "
            "mecab = also names MeCab-ko tags as person nouns (higher recall, ~10x slower); "
            "crf = also the learned tagger of --person-model (highest recall)"
        },
    )
    person_model: Path | None = field(
        default=None,
        metadata={"help": "model file of --person crf (made by `kplm pii train-person --output PATH`)"},
    )
    skip_bad_lines: bool = field(
        default=False,
        metadata={"help": "count bad lines and write them to <output>.rejected.jsonl instead of stopping"},
    )

    def __post_init__(self) -> None:
        self.input = Path(self.input)
        self.output = Path(self.output)
        if str(self.output) in ("", "."):
            raise ValueError("output: must be a file path")
        if self.output.resolve() == self.input.resolve():
            raise ValueError("output: must differ from input (the input would be overwritten)")
        if not self.text_field:
            raise ValueError("text_field: must not be empty")
        if self.policy not in POLICIES:
            raise ValueError(f"policy: must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        if not 0.0 <= self.min_score <= 1.0:
            raise ValueError(f"min_score: must be between 0 and 1, got {self.min_score}")
        check_person(self.person, self.person_model)
        if self.types is not None:
            if not self.types:
                raise ValueError("types: give at least one type, or leave it unset for all")
            self.types = list(check_types(self.types))


def rejected_path(output: Path) -> Path:
    """Where :func:`detect_file`/:func:`scrub_file` put bad lines when ``skip_bad_lines`` is on."""
    return output.with_name(output.name + ".rejected.jsonl")


def _open_input(path: Path) -> IO[bytes]:
    if not path.exists():
        raise KplmError(f"input file not found: {path}")
    if not path.is_file():
        raise KplmError(f"{path}: not a file (expected a .jsonl or .jsonl.gz file)")
    with path.open("rb") as probe:
        compressed = probe.read(2) == _GZIP_MAGIC
    return gzip.open(path, "rb") if compressed else path.open("rb")


@contextlib.contextmanager
def _atomic_writer(path: Path) -> Iterator[IO[str]]:
    """A text stream to ``path`` that only replaces ``path`` when the block finishes without error."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(tmp, "wt", encoding="utf-8") as out:
            yield out
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _lines(config: PiiFileConfig, desc: str) -> Iterator[tuple[int, bytes]]:
    """(line number, raw bytes without the line break) of every non-blank input line, with a progress bar."""
    lineno = 0
    try:
        with _open_input(config.input) as fh:
            for lineno, raw in enumerate(tqdm(fh, desc=desc, unit=" lines", disable=None, mininterval=1), 1):
                raw = raw.rstrip(b"\r\n")
                if raw.strip():
                    yield lineno, raw
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise KplmError(f"{config.input}: corrupt gzip data after line {lineno} ({e})") from None
    except OSError as e:
        raise KplmError(f"{config.input}: cannot read ({e.strerror or e})") from None


def _parse(raw: bytes, text_field: str) -> tuple[dict[str, Any] | None, str]:
    """The record of one line and its text, or (None, reason) when the line is bad."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, f"invalid UTF-8 at byte {e.start}"
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        return None, f"invalid JSON ({e.msg} at column {e.colno})"
    if not isinstance(record, dict):
        return None, f"expected a JSON object, got a JSON {type(record).__name__}"
    text = record.get(text_field)
    if not isinstance(text, str):
        return None, f"field '{text_field}' missing or not a string"
    return record, text


Transform = Callable[[dict[str, Any], str], Counter]


def _run(config: PiiFileConfig, desc: str, transform: Transform) -> dict[str, Any]:
    """Stream the input through ``transform`` (which edits each record in place and returns type counts)."""
    counts: dict[str, Any] = {"records": 0, "records_with_pii": 0, "spans": 0, "rejected": 0}
    by_type: Counter = Counter()
    rejects: list[str] = []
    if config.person == "crf":
        from kplm.pii.person_crf import load_tagger

        load_tagger(config.person_model)  # type: ignore[arg-type]  # a bad model fails before any output
    with _atomic_writer(config.output) as out:
        for lineno, raw in _lines(config, desc):
            record, text = _parse(raw, config.text_field)
            if record is None:
                if not config.skip_bad_lines:
                    raise KplmError(f"{config.input}:{lineno}: {text}")
                counts["rejected"] += 1
                rejects.append(
                    json.dumps(
                        {
                            "file": str(config.input),
                            "line": lineno,
                            "reason": text,
                            "raw": raw.decode("utf-8", "backslashreplace"),
                        },
                        ensure_ascii=False,
                    )
                )
                continue
            found = transform(record, text)
            counts["records"] += 1
            if found:
                counts["records_with_pii"] += 1
                counts["spans"] += sum(found.values())
                by_type.update(found)
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    reject_file = rejected_path(config.output)
    if rejects:
        with _atomic_writer(reject_file) as out:
            out.writelines(r + "\n" for r in rejects)
    else:
        reject_file.unlink(missing_ok=True)  # a stale quarantine from an earlier run would mislead
    counts["types"] = dict(sorted(by_type.items()))
    return counts


def detect_file(config: PiiFileConfig) -> dict[str, Any]:
    """Copy every record of ``config.input`` to ``config.output`` with its detected ``"pii"`` spans added.

    Returns counts: records, records_with_pii, spans, rejected and ``types`` ({TYPE: spans}).
    """

    def transform(record: dict[str, Any], text: str) -> Counter:
        spans = detect(
            text,
            types=config.types,
            min_score=config.min_score,
            person=config.person,
            person_model=config.person_model,
        )
        record["pii"] = [{"start": s.start, "end": s.end, "type": s.type, "score": s.score} for s in spans]
        return Counter(s.type for s in spans)

    return _run(config, "pii detect", transform)


def scrub_file(config: PiiFileConfig) -> dict[str, Any]:
    """Copy every record with its text field scrubbed under ``config.policy`` and ``"pii_counts"`` added.

    Returns the same counts as :func:`detect_file`.
    """
    surrogator = Surrogator() if config.policy == "surrogate" else None

    def transform(record: dict[str, Any], text: str) -> Counter:
        spans = detect(
            text,
            types=config.types,
            min_score=config.min_score,
            person=config.person,
            person_model=config.person_model,
        )
        found = Counter(s.type for s in spans)
        if spans:
            record[config.text_field] = scrub(text, spans, config.policy, surrogator=surrogator)
        record["pii_counts"] = dict(sorted(found.items()))
        return found

    return _run(config, "pii scrub", transform)
