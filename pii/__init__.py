"""kplm.pii: detect and pseudonymise Korean personal information before pretraining.

- :func:`kplm.pii.detect.detect` finds scored, typed, non-overlapping spans of the 13 types of
  :data:`PII_TYPES` (RRN, FRN, PHONE, EMAIL, CARD, ACCOUNT, BRN, PASSPORT, DRIVER_LICENSE, IP, URL, ADDRESS,
  PERSON) with compiled regexes, checksum/date/Luhn validators and Korean context words; PERSON optionally
  also from MeCab-ko (``person="mecab"``) or from a learned CRF tagger (``person="crf"``,
  ``person_model=PATH``; :mod:`kplm.pii.person_crf`, trained by ``kplm pii train-person``).
- :func:`kplm.pii.scrub.scrub` rewrites them: ``tag`` (``[PHONE]`` placeholders, see ``PLACEHOLDERS``),
  ``mask`` (``***`` of the same length) or ``surrogate`` (format-preserving fakes keyed by a secret HMAC).
- :class:`kplm.pii.step.PiiScrubStep` does both inside a datatrove pipeline (imported from its module, so
  that importing :mod:`kplm.pii` does not import datatrove).
- :func:`kplm.pii.files.detect_file` / :func:`kplm.pii.files.scrub_file` work on JSON Lines files.
- :func:`kplm.pii.evaluate.evaluate` scores the detector (precision, recall, F2, leak recall) on the
  shipped labelled set (:mod:`kplm.pii.evalset`) and KLUE-NER dev.
"""

from kplm.pii.detect import DETECTABLE_TYPES, PII_TYPES, PiiSpan, detect
from kplm.pii.scrub import PLACEHOLDERS, POLICIES, scrub

__all__ = ["DETECTABLE_TYPES", "PII_TYPES", "PLACEHOLDERS", "POLICIES", "PiiSpan", "detect", "scrub"]
