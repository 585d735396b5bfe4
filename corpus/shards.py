"""The corpus shard format every later stage reads: Parquet files of documents.

A corpus folder holds ``*.parquet`` files (written by ``kplm corpus clean`` and ``kplm pii scrub``) with the
columns of :data:`SCHEMA`: ``id``, ``text``, ``source`` and ``metadata`` (a JSON object as a string).
Files are read in sorted name order, so every reader sees documents in the same order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kplm.errors import KplmError

SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("metadata", pa.string(), nullable=False),
    ]
)


def shard_files(folder: str | Path) -> list[Path]:
    """The Parquet shard files directly in a corpus folder (or the file itself), sorted; error if none."""
    folder = Path(folder)
    if folder.is_file():
        return [folder]
    if not folder.is_dir():
        raise KplmError(f"corpus folder not found: {folder}")
    files = sorted(p for p in folder.glob("*.parquet") if not p.name.startswith("."))
    if not files:
        raise KplmError(f"{folder}: no .parquet corpus shards in this folder")
    return files


def iter_documents(
    folder: str | Path, columns: tuple[str, ...] = ("id", "text", "source", "metadata")
) -> Iterator[dict[str, Any]]:
    """Yield documents as dicts from every shard of ``folder``, streaming one record batch at a time."""
    for path in shard_files(folder):
        try:
            parquet = pq.ParquetFile(path)
        except (pa.ArrowInvalid, OSError) as e:
            raise KplmError(f"{path}: not a readable Parquet file ({e})") from None
        missing = [c for c in columns if c not in parquet.schema_arrow.names]
        if missing:
            raise KplmError(
                f"{path}: missing column '{missing[0]}' (has {', '.join(parquet.schema_arrow.names)})"
            )
        for batch in parquet.iter_batches(columns=list(columns), batch_size=4096):
            yield from batch.to_pylist()


def iter_texts(folder: str | Path) -> Iterator[str]:
    """Yield only the ``text`` of every document of a corpus folder."""
    for doc in iter_documents(folder, columns=("text",)):
        yield doc["text"]


class ShardWriter:
    """Write documents to one Parquet file in row groups, atomically (temporary name, then rename)."""

    def __init__(self, path: str | Path, row_group_size: int = 8192):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.path.with_name(f".{self.path.name}.tmp")
        self._writer = pq.ParquetWriter(self._tmp, SCHEMA, compression="zstd")
        self._rows: list[dict[str, Any]] = []
        self._row_group_size = row_group_size
        self.count = 0

    def write(self, *, id: str, text: str, source: str, metadata: dict[str, Any] | str) -> None:
        if not isinstance(metadata, str):
            metadata = json.dumps(metadata, ensure_ascii=False, sort_keys=True, default=str)
        self._rows.append({"id": id, "text": text, "source": source, "metadata": metadata})
        self.count += 1
        if len(self._rows) >= self._row_group_size:
            self._flush()

    def _flush(self) -> None:
        if self._rows:
            self._writer.write_table(pa.Table.from_pylist(self._rows, schema=SCHEMA))
            self._rows = []

    def close(self) -> None:
        self._flush()
        self._writer.close()
        self._tmp.replace(self.path)

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self._writer.close()
            self._tmp.unlink(missing_ok=True)
