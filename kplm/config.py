"""The one configuration mechanism of kplm: typed, keyword-only dataclasses loaded from YAML.

Each component owns its config dataclass (``CleanConfig`` in ``corpus``, ``PretrainConfig`` in
``training`` …) and validates it in ``__post_init__`` by raising ``ValueError("field: why")``.
:func:`build` turns plain data (a YAML mapping, CLI flags) into such a dataclass, checking every key and
type on the way, and reports problems as :class:`~kplm.errors.KplmError` naming the full field path,
e.g. ``run.yaml: pretrain.max_steps: expected int, got 'ten'``.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

import yaml

from kplm.errors import KplmError

T = TypeVar("T")


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping from ``path`` with clear errors for missing files and syntax errors."""
    path = Path(path)
    if not path.is_file():
        raise KplmError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise KplmError(f"{path}: not valid UTF-8 (byte {e.start})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(e, "problem", None) or str(e)
        raise KplmError(f"{where}: invalid YAML: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise KplmError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def build(cls: type[T], data: Mapping[str, Any] | None, where: str = "config") -> T:
    """Build dataclass ``cls`` from ``data``, checking keys, types and the class's own validation.

    ``where`` prefixes every error message (a file name and/or the path of the enclosing field).
    """
    if data is None:
        data = {}
    if isinstance(data, cls):
        return data
    if not isinstance(data, Mapping):
        raise KplmError(f"{where}: expected a mapping, got {_describe(data)}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [k for k in data if k not in fields]
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(str(key), fields, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else f" (known: {', '.join(sorted(fields))})"
        raise KplmError(f"{where}.{key}: unknown key{hint}")
    hints = get_type_hints(cls)
    kwargs = {}
    for name, value in data.items():
        kwargs[name] = _coerce(hints[name], value, f"{where}.{name}")
    missing = [
        n
        for n, f in fields.items()
        if n not in kwargs and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise KplmError(f"{where}.{missing[0]}: required but not given")
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as e:
        raise KplmError(f"{where}.{e}" if _names_field(str(e), fields) else f"{where}: {e}") from None


def _names_field(message: str, fields: Mapping[str, Any]) -> bool:
    return message.split(":", 1)[0].strip() in fields


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}"


def _coerce(tp: Any, value: Any, where: str) -> Any:
    """Check ``value`` against type ``tp``; convert where lossless (int → float, str → Path)."""
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        options = get_args(tp)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _coerce(option, value, where)
            except KplmError as e:
                errors.append(str(e))
        raise KplmError(
            errors[0] if len(errors) == 1 else f"{where}: {_describe(value)} matches none of {tp}"
        )
    if origin is Literal:
        allowed = get_args(tp)
        if value not in allowed:
            raise KplmError(f"{where}: must be one of {', '.join(map(repr, allowed))}, got {value!r}")
        return value
    if origin in (list, tuple, typing.Sequence):
        if isinstance(value, str) or not isinstance(value, list | tuple):
            raise KplmError(f"{where}: expected a list, got {_describe(value)}")
        (item_tp, *_) = get_args(tp) or (Any,)
        items = [_coerce(item_tp, v, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, Mapping):
            raise KplmError(f"{where}: expected a mapping, got {_describe(value)}")
        _, val_tp = get_args(tp) or (Any, Any)
        return {str(k): _coerce(val_tp, v, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return build(tp, value, where)
    if tp is bool:
        if not isinstance(value, bool):
            raise KplmError(f"{where}: expected true or false, got {_describe(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise KplmError(f"{where}: expected an integer, got {_describe(value)}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise KplmError(f"{where}: expected a number, got {_describe(value)}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise KplmError(f"{where}: expected a string, got {_describe(value)}")
        return value
    if tp is Path:
        if not isinstance(value, str | Path):
            raise KplmError(f"{where}: expected a path, got {_describe(value)}")
        return Path(value)
    return value


def to_dict(obj: Any) -> Any:
    """Plain-data view of a config (dataclasses, paths and tuples converted) for JSON/YAML records."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_dict(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def fingerprint(*parts: Any) -> str:
    """A short stable hash of configs and other plain data: equal inputs give equal fingerprints."""
    blob = json.dumps([to_dict(p) for p in parts], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]
