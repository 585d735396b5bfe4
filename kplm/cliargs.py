"""Command-line flags generated from config dataclasses, so a config is the CLI schema too.

Every scalar field of a config dataclass becomes ``--field-name``; its help text comes from
``field(metadata={"help": ...})`` and its default is shown. Lists take several values, ``Literal`` fields
become choices, booleans get ``--flag/--no-flag``. Nested dataclasses are set through a YAML file only.
Values pass through :func:`kplm.config.build`, so the CLI and YAML configs are validated identically.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import types
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from kplm.config import build
from kplm.errors import KplmError

T = TypeVar("T")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _scalar_type(tp: Any) -> Any:
    """Strip ``X | None`` and return the underlying type."""
    if get_origin(tp) in (Union, types.UnionType):
        options = [a for a in get_args(tp) if a is not type(None)]
        if len(options) == 1:
            return options[0]
    return tp


def add_config_arguments(parser: argparse.ArgumentParser, cls: type, *, skip: tuple[str, ...] = ()) -> None:
    """Add one flag per scalar field of dataclass ``cls`` to ``parser`` (defaults stay unset: None)."""
    hints = get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init or f.name in skip:
            continue
        tp = _scalar_type(hints[f.name])
        if dataclasses.is_dataclass(tp):
            continue
        help_text = f.metadata.get("help", "")
        default = f.default if f.default is not dataclasses.MISSING else None
        if f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if not required and default not in (None, "", [], ()):
            help_text += (
                f" (default: {' '.join(map(str, default)) if isinstance(default, list | tuple) else default})"
            )
        kwargs: dict[str, Any] = {"dest": f.name, "help": help_text, "default": None}
        origin = get_origin(tp)
        if tp is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif origin is Literal:
            kwargs["choices"] = list(get_args(tp))
            kwargs["type"] = type(get_args(tp)[0])
        elif origin in (list, tuple):
            (item,) = get_args(tp)[:1] or (str,)
            kwargs["nargs"] = "+"
            kwargs["type"] = _scalar_type(item) if _scalar_type(item) in (int, float) else str
            kwargs["metavar"] = f.name.upper().rstrip("S")
        elif tp in (int, float):
            kwargs["type"] = tp
            kwargs["metavar"] = tp.__name__.upper()
        else:
            kwargs["type"] = str
            kwargs["metavar"] = "PATH" if tp is Path else f.name.upper()
        if required:
            kwargs["help"] = help_text + " (required)"
        parser.add_argument(_flag(f.name), **kwargs)


def config_from_args(cls: type[T], args: argparse.Namespace, base: dict[str, Any] | None = None) -> T:
    """Build ``cls`` from ``base`` (e.g. a YAML section) overridden by the flags the user gave."""
    data = dict(base or {})
    for f in dataclasses.fields(cls):
        value = getattr(args, f.name, None)
        if value is not None:
            data[f.name] = value
    try:
        return build(cls, data, where="arguments")
    except KplmError as e:
        # name the flag the user typed: "arguments.min_chars: ..." → "--min-chars: ..."
        message = re.sub(r"^arguments\.(\w+)", lambda m: _flag(m.group(1)), str(e))
        raise KplmError(message) from None
