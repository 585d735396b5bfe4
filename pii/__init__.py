"""kplm.pii: detect and pseudonymise Korean personal information before pretraining.

- :func:`kplm.pii.detect.detect` finds scored, typed, non-overlapping spans (RRN, FRN, PHONE, EMAIL, CARD,
  BRN, IP) with compiled regexes, checksum/date/Luhn validators and Korean context words.
- :func:`kplm.pii.scrub.scrub` rewrites them: ``tag`` (``[PHONE]`` placeholders, see ``PLACEHOLDERS``),
  ``mask`` (``***`` of the same length) or ``surrogate`` (format-preserving fakes keyed by a secret HMAC).
- :class:`kplm.pii.step.PiiScrubStep` does both inside a datatrove pipeline (imported from its module, so
  that importing :mod:`kplm.pii` does not import datatrove).
- :func:`kplm.pii.files.detect_file` / :func:`kplm.pii.files.scrub_file` work on JSON Lines files.
"""

from kplm.pii.detect import DETECTABLE_TYPES, PII_TYPES, PiiSpan, detect
from kplm.pii.scrub import PLACEHOLDERS, POLICIES, scrub

__all__ = ["DETECTABLE_TYPES", "PII_TYPES", "PLACEHOLDERS", "POLICIES", "PiiSpan", "detect", "scrub"]
