"""Rewrite detected PII spans: typed placeholders, same-length masks or format-preserving surrogates.

Policies:

- ``tag``: each span becomes its type's placeholder from :data:`PLACEHOLDERS` (``[PHONE]``, ``[EMAIL]`` …).
  The tokenizer stage adds these strings as whole tokens, so pretraining sees one symbol per entity.
- ``mask``: each letter or digit of the span becomes ``*``; separators (``-``, ``.``, spaces, ``@``,
  brackets, ``+``) stay, so the text keeps its length and layout: ``010-****-****`` style.
- ``surrogate``: each span becomes a realistic fake of the same format (valid checksums), derived from an
  HMAC of the value, so one value maps to one fake throughout a run (see :mod:`kplm.pii.surrogate`).
  Types without a fake generator fall back to their placeholder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from kplm.pii.detect import PII_TYPES, PiiSpan
from kplm.pii.surrogate import Surrogator

Policy = Literal["tag", "mask", "surrogate"]
POLICIES: tuple[str, ...] = ("tag", "mask", "surrogate")

#: Placeholder text of every PII type under the ``tag`` policy (add these as special tokens).
PLACEHOLDERS: dict[str, str] = {t: f"[{t}]" for t in PII_TYPES}

_default_surrogator: Surrogator | None = None


def default_surrogator() -> Surrogator:
    """The process-wide surrogator used when :func:`scrub` is not given one (keyed once per process)."""
    global _default_surrogator
    if _default_surrogator is None:
        _default_surrogator = Surrogator()
    return _default_surrogator


def mask_text(value: str) -> str:
    """``value`` with every letter and digit replaced by ``*`` and every other character kept."""
    return "".join("*" if ch.isalnum() else ch for ch in value)


def replacement(value: str, kind: str, policy: Policy, surrogator: Surrogator | None = None) -> str:
    """What one PII ``value`` of type ``kind`` becomes under ``policy``."""
    if policy == "tag":
        return PLACEHOLDERS.get(kind, f"[{kind}]")
    if policy == "mask":
        return mask_text(value)
    if policy == "surrogate":
        fake = (surrogator or default_surrogator()).fake(kind, value)
        return fake if fake is not None else PLACEHOLDERS.get(kind, f"[{kind}]")
    raise ValueError(f"policy: must be one of {', '.join(POLICIES)}, got {policy!r}")


def scrub(
    text: str,
    spans: Sequence[PiiSpan],
    policy: Policy = "tag",
    *,
    surrogator: Surrogator | None = None,
) -> str:
    """``text`` with every span rewritten under ``policy``; spans must be sorted and non-overlapping.

    ``surrogator`` keys the ``surrogate`` policy; by default a per-process one is used (set
    ``KPLM_PII_SECRET`` to make its fakes identical across processes and runs).
    """
    if policy not in POLICIES:
        raise ValueError(f"policy: must be one of {', '.join(POLICIES)}, got {policy!r}")
    parts: list[str] = []
    pos = 0
    for span in spans:
        if span.start < pos or span.end > len(text) or span.start >= span.end:
            raise ValueError(
                f"spans: [{span.start}, {span.end}) is out of order, overlapping or outside the text"
            )
        parts.append(text[pos : span.start])
        parts.append(replacement(text[span.start : span.end], span.type, policy, surrogator))
        pos = span.end
    parts.append(text[pos:])
    return "".join(parts)
