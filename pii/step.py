"""The PII stage as a datatrove pipeline step: detect and scrub personal information in ``doc.text``.

``PiiScrubStep`` fits anywhere in a datatrove pipeline (after a reader and the cleaning filters, before a
writer). It stores per-type counts — never the values — in ``doc.metadata["pii"]`` and reports them as
``pii_<TYPE>`` stats plus ``docs_with_pii``. The counts dict always has one key per searched type (zeros
included, fixed order): datatrove's ParquetWriter fixes its schema from the first batch, and documents
whose metadata had different keys would fail to write. It holds only plain settings, compiled ``re`` patterns
(module level) and a :class:`~kplm.pii.surrogate.Surrogator`, so it pickles for multi-process executors;
the surrogate key travels inside the pickle (so all workers fake alike) but never into ``executor.json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from datatrove.data import DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.utils.typeshelper import StatHints

from kplm.errors import KplmError
from kplm.pii.detect import check_person, check_types, detect
from kplm.pii.scrub import POLICIES, Policy, scrub
from kplm.pii.surrogate import Surrogator


class PiiScrubStep(PipelineStep):
    """Replace the PII of every document's text under ``policy`` (``tag``, ``mask`` or ``surrogate``).

    Args:
        policy: how spans are rewritten (see :mod:`kplm.pii.scrub`).
        types: PII types to look for; None means every detectable type.
        min_score: detections scoring below this are left alone.
        surrogate_secret: HMAC key of the ``surrogate`` policy; None reads ``KPLM_PII_SECRET`` or draws one.
        person: PERSON detector, ``context`` (title-anchored, fast), ``mecab`` (+ MeCab-ko person nouns) or
            ``crf`` (+ the learned tagger of :mod:`kplm.pii.person_crf`).
        person_model: the model file of ``person="crf"`` (only its path is kept: the step still pickles, and
            each worker process loads the model once, on first use).
    """

    name = "🔒 PII scrub"
    type = "✂️ - FORMAT"

    def __init__(
        self,
        policy: Policy = "tag",
        types: Sequence[str] | None = None,
        min_score: float = 0.5,
        surrogate_secret: bytes | str | None = None,
        person: str = "context",
        person_model: str | None = None,
    ):
        super().__init__()
        if policy not in POLICIES:
            raise ValueError(f"policy: must be one of {', '.join(POLICIES)}, got {policy!r}")
        if not 0.0 <= min_score <= 1.0:
            raise ValueError(f"min_score: must be between 0 and 1, got {min_score}")
        self.policy = policy
        self.types = list(check_types(types)) if types is not None else None
        self.counted_types = list(check_types(types))  # keys of doc.metadata["pii"], in order
        self.min_score = float(min_score)
        check_person(person, person_model)
        self.person = person
        self.person_model = str(person_model) if person_model else None
        if person == "crf" and not Path(self.person_model).is_file():  # type: ignore[arg-type]
            raise KplmError(
                f"person model not found: {self.person_model} (train one with kplm pii train-person)"
            )
        self.surrogator = Surrogator(surrogate_secret) if policy == "surrogate" else None

    def scrub_text(self, text: str) -> tuple[str, dict[str, int]]:
        """``text`` scrubbed, and how many spans of each searched type were replaced (zeros included)."""
        spans = detect(
            text,
            types=self.types,
            min_score=self.min_score,
            person=self.person,
            person_model=self.person_model,
        )
        counts = dict.fromkeys(self.counted_types, 0)
        for span in spans:
            counts[span.type] += 1
        if not spans:
            return text, counts
        return scrub(text, spans, self.policy, surrogator=self.surrogator), counts

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        """Scrub each document in place and pass it on."""
        for doc in data:
            self.stat_update(StatHints.total)
            with self.track_time():
                doc.text, counts = self.scrub_text(doc.text)
            doc.metadata["pii"] = counts
            if any(counts.values()):
                self.stat_update("docs_with_pii")
                for kind, n in counts.items():
                    if n:
                        self.stat_update(f"pii_{kind}", value=n)
            yield doc
