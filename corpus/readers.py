"""Readers: source files (jsonl, jsonl.gz, txt, parquet; local or any fsspec URL) → datatrove Documents.

Every input record becomes a Document or a quarantine entry naming its file and line (invalid UTF-8,
malformed JSON, a missing or non-string text field). Nothing is skipped silently: the per-rank counts of
read and quarantined records are written next to the work files so the stage can reconcile
``input = kept + dropped + quarantined`` exactly.
"""

from __future__ import annotations

import gzip
import json
import posixpath
from collections.abc import Iterator
from typing import Any

import fsspec
import pyarrow.parquet as pq
from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.base import PipelineStep

from kplm.corpus.encoding import sniff_lines
from kplm.errors import KplmError

_SCALARS = (str, int, float, bool)
SUPPORTED_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".txt", ".txt.gz", ".parquet")


def _suffix(path: str) -> str | None:
    lower = path.lower()
    return next((s for s in sorted(SUPPORTED_SUFFIXES, key=len, reverse=True) if lower.endswith(s)), None)


def resolve_input_files(inputs: list[str]) -> list[str]:
    """Expand files and folders (local or fsspec URLs) into a sorted list of supported source files."""
    files: list[str] = []
    for item in inputs:
        fs, path = fsspec.core.url_to_fs(str(item))
        protocol = fs.protocol[0] if isinstance(fs.protocol, tuple | list) else fs.protocol
        prefix = "" if protocol in ("file", "local") else f"{protocol}://"
        if not fs.exists(path):
            raise KplmError(f"input not found: {item}")
        if fs.isdir(path):
            found = sorted(
                p for p in fs.find(path) if _suffix(p) and not posixpath.basename(p).startswith(".")
            )
            if not found:
                raise KplmError(f"{item}: no input files ({', '.join(SUPPORTED_SUFFIXES)}) in this folder")
            files.extend(prefix + p for p in found)
        elif _suffix(path):
            files.append(prefix + path)
        else:
            raise KplmError(
                f"{item}: unsupported input format (expected one of {', '.join(SUPPORTED_SUFFIXES)})"
            )
    return files


class SourceReader(PipelineStep):
    """Read this rank's share (``files[rank::world_size]``) of the source files into Documents.

    Each Document gets ``id`` (the record's id field, else ``<file name>:<line>``), ``metadata["source"]``
    (the record's source field, else the configured source name, else the file's stem) and
    ``metadata["origin"]`` (``file:line``). Unreadable records go to ``quarantine/<rank>.jsonl`` in the
    output folder with the file, the line and the reason.
    """

    type = "📖 - READER"
    name = "kplm source reader"

    def __init__(
        self,
        files: list[str],
        *,
        output_folder: str,
        counts_folder: str,
        text_field: str = "text",
        id_field: str = "id",
        source_field: str = "source",
        source_name: str | None = None,
        txt_paragraphs: bool = False,
    ):
        super().__init__()
        self.txt_paragraphs = txt_paragraphs
        self.files = files
        self.output_folder = output_folder
        self.counts_folder = counts_folder
        self.text_field = text_field
        self.id_field = id_field
        self.source_field = source_field
        self.source_name = source_name

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        counts: dict[str, Any] = {"read": 0, "quarantined": 0, "files": {}}
        quarantine_path = f"{self.output_folder}/quarantine/{rank:05d}.jsonl"
        fsspec.core.url_to_fs(quarantine_path)[0].makedirs(posixpath.dirname(quarantine_path), exist_ok=True)
        with fsspec.open(quarantine_path, "w", encoding="utf-8") as quarantine:
            for path in self.files[rank::world_size]:
                file_counts = {"read": 0, "quarantined": 0}
                for item in self._read_file(path):
                    if isinstance(item, Document):
                        file_counts["read"] += 1
                        yield item
                    else:
                        file_counts["quarantined"] += 1
                        self.stat_update("quarantined", f"quarantined_{item['reason_code']}")
                        quarantine.write(json.dumps(item, ensure_ascii=False) + "\n")
                self.stat_update("documents_read", value=file_counts["read"])
                counts["files"][path] = file_counts
                counts["read"] += file_counts["read"]
                counts["quarantined"] += file_counts["quarantined"]
        with fsspec.open(f"{self.counts_folder}/read_{rank:05d}.json", "w") as f:
            json.dump(counts, f, indent=1)

    def _read_file(self, path: str) -> Iterator[Document | dict[str, Any]]:
        suffix = _suffix(path)
        stem = posixpath.basename(path)[: -len(suffix)] if suffix else posixpath.basename(path)
        source = self.source_name or stem
        if suffix == ".parquet":
            yield from self._read_parquet(path, stem, source)
            return
        with fsspec.open(path, "rb") as raw, gzip.open(raw) if suffix.endswith(".gz") else raw as stream:
            items = self._read_lines(stream, path, stem, source, suffix)
            yield from _paragraphs(items) if self.txt_paragraphs and suffix.startswith(".txt") else items

    def _read_lines(
        self, stream, path: str, stem: str, source: str, suffix: str
    ) -> Iterator[Document | dict[str, Any]]:
        try:
            encoding, lines = sniff_lines(stream)
            extra = {"source_encoding": encoding} if encoding != "utf-8" else {}
            code = "invalid_utf8" if encoding == "utf-8" else "invalid_cp949"
            for line_no, line in enumerate(lines, 1):
                origin = f"{path}:{line_no}"
                try:
                    text_line = line.decode(encoding)
                except UnicodeDecodeError as e:
                    what = "UTF-8" if encoding == "utf-8" else "CP949 (file detected as CP949/EUC-KR)"
                    yield _quarantine(origin, code, f"invalid {what} at byte {e.start}", line)
                    continue
                if not text_line.strip():
                    if self.txt_paragraphs and suffix.startswith(".txt"):
                        yield _BLANK
                    continue
                if suffix.startswith(".txt"):
                    yield self._document(
                        text_line.rstrip("\r\n"), f"{stem}:{line_no}", source, origin, dict(extra)
                    )
                    continue
                try:
                    record = json.loads(text_line)
                except json.JSONDecodeError as e:
                    yield _quarantine(
                        origin, "invalid_json", f"invalid JSON ({e.msg} at column {e.colno})", line
                    )
                    continue
                doc = self._from_record(record, stem, line_no, source, origin, line)
                if extra and isinstance(doc, Document):
                    doc.metadata.update(extra)
                yield doc
        except (OSError, EOFError) as e:
            raise KplmError(f"{path}: cannot read ({e})") from None

    def _read_parquet(self, path: str, stem: str, source: str) -> Iterator[Document | dict[str, Any]]:
        with fsspec.open(path, "rb") as f:
            parquet = pq.ParquetFile(f)
            row = 0
            for batch in parquet.iter_batches(batch_size=4096):
                for record in batch.to_pylist():
                    row += 1
                    yield self._from_record(record, stem, row, source, f"{path}:row {row}", None)

    def _from_record(
        self, record: Any, stem: str, line_no: int, source: str, origin: str, raw: bytes | None
    ) -> Document | dict[str, Any]:
        if not isinstance(record, dict):
            return _quarantine(
                origin, "not_an_object", f"expected a JSON object, got {type(record).__name__}", raw
            )
        text = record.get(self.text_field)
        if not isinstance(text, str):
            what = "missing" if text is None else f"not a string ({type(text).__name__})"
            return _quarantine(origin, "bad_text_field", f"field '{self.text_field}' {what}", raw)
        doc_id = record.get(self.id_field)
        doc_id = str(doc_id) if doc_id is not None else f"{stem}:{line_no}"
        record_source = record.get(self.source_field)
        if isinstance(record_source, str) and record_source and not self.source_name:
            source = record_source
        extra = {
            k: v
            for k, v in record.items()
            if k not in (self.text_field, self.id_field, self.source_field) and isinstance(v, _SCALARS)
        }
        return self._document(text, doc_id, source, origin, extra)

    @staticmethod
    def _document(text: str, doc_id: str, source: str, origin: str, extra: dict[str, Any]) -> Document:
        return Document(text=text, id=doc_id, metadata={**extra, "source": source, "origin": origin})


_BLANK = object()  # a blank line, marking a paragraph end in blank-line separated text files


def _paragraphs(items: Iterator[Any]) -> Iterator[Document | dict[str, Any]]:
    """Merge the per-line documents of a text file into one document per blank-line separated paragraph
    (id and origin of its first line); quarantine entries pass through."""
    paragraph: list[Document] = []

    def flush() -> Iterator[Document]:
        if paragraph:
            first = paragraph[0]
            first.text = "\n".join(doc.text for doc in paragraph)
            paragraph.clear()
            yield first

    for item in items:
        if item is _BLANK:
            yield from flush()
        elif isinstance(item, Document):
            paragraph.append(item)
        else:
            yield item
    yield from flush()


def _quarantine(origin: str, code: str, reason: str, raw: bytes | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"origin": origin, "reason_code": code, "reason": reason}
    if raw is not None:
        entry["raw"] = raw[:2000].decode("utf-8", errors="backslashreplace")
    return entry


class ShardFileReader(PipelineStep):
    """Read back exactly the file ``<folder>/<rank>.parquet`` (or another ``filename`` pattern with a
    ``{rank}`` field) that a previous step of the same rank wrote.

    Datatrove's own readers split a folder's files by position, which misaligns ranks when a rank wrote
    nothing; steps that pair up by rank (exact dedup's signature and filter steps) need this reader.
    """

    type = "📖 - READER"
    name = "kplm rank shard reader"

    def __init__(self, folder: str, filename: str = "{rank:05d}.parquet"):
        super().__init__()
        self.folder = folder
        self.filename = filename

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        path = f"{self.folder}/{self.filename.format(rank=rank)}"
        fs, local = fsspec.core.url_to_fs(path)
        if not fs.exists(local):
            return
        with fs.open(local, "rb") as f:
            for batch in pq.ParquetFile(f).iter_batches(batch_size=4096):
                for row in batch.to_pylist():
                    metadata = {**json.loads(row["metadata"]), "source": row["source"]}
                    yield Document(text=row["text"], id=row["id"], metadata=metadata)
