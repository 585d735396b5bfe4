"""Document-level exact dedup (``exact_dedup_v1``): datatrove's three exact-dedup steps, with the per-document
overhead of its first and third step removed.

Datatrove's ``ExactDedupSignature`` and ``ExactDedupFilter`` update two or three stats counters and enter a
timing context for every document, and the filter computes document length stats; on short texts (reviews,
comments) that costs more than hashing. These subclasses do the same work with the same files and the same
output (kept documents get ``duplicate_count`` in their metadata, duplicates go to the exclusion writer) and
count their stats once per rank. The signatures are bucketed by hash range (``finder_workers``) so that
datatrove's ``ExactFindDedups`` runs as one task per bucket, in parallel.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np
from datatrove.data import DocumentsPipeline
from datatrove.pipeline.dedup.exact_dedup import (
    ExactDedupFilter,
    ExactDedupSignature,
    get_sig_dtype,
)
from datatrove.utils.typeshelper import ExtensionHelperSD, StatHints


class FastExactDedupSignature(ExactDedupSignature):
    """Stage 1: one ``(hash, priority, index)`` signature per document, saved per hash bucket."""

    name = "kplm exact-dedup signatures"

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        getter, hash_fc, priority = self.config.content_getter, self.hash_fc, self.config.document_priority
        if priority is None:
            signatures = [(hash_fc(getter(doc)), 1, i) for i, doc in enumerate(data)]
        else:
            signatures = [(hash_fc(getter(doc)), priority(doc), i) for i, doc in enumerate(data)]
        self.stat_update(StatHints.total, value=len(signatures))
        self.save_hashes(rank, signatures)
        yield from ()


class FastExactDedupFilter(ExactDedupFilter):
    """Stage 3: drop the documents stage 2 listed for this rank; the others get ``duplicate_count``."""

    name = "kplm exact-dedup filter"

    def _load(self, rank: int) -> tuple[set[int], dict[int, int]]:
        folders = self.data_folder.list_files(include_directories=True, recursive=False)
        dup_dtype = get_sig_dtype(self.config.hash_config)[2]
        count_dtype = np.dtype([("doc", "<u4"), ("count", "<u4")])
        duplicates: set[int] = set()
        counts: dict[int, int] = {}
        with ThreadPoolExecutor() as pool:
            for suffix, reader, dtype in (
                (ExtensionHelperSD.stage_2_duplicates, self.read_duplicates, dup_dtype),
                (ExtensionHelperSD.stage_2_counts, self.read_duplicate_counts, count_dtype),
            ):
                files = [f"{folder}/{rank:05d}{suffix}" for folder in folders]
                files = [f for f in files if self.data_folder.exists(f)]
                for array in pool.map(partial(reader, dup_dtype=dtype), self.data_folder.open_files(files)):
                    if suffix == ExtensionHelperSD.stage_2_duplicates:
                        duplicates.update(array.tolist())
                    else:
                        counts.update(zip(array["doc"].tolist(), array["count"].tolist(), strict=True))
        return duplicates, counts

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        duplicates, counts = self._load(rank)
        kept = dropped = 0
        with self.exclusion_writer if self.exclusion_writer else contextlib.nullcontext() as writer:
            for doc_idx, doc in enumerate(data):
                if doc_idx in duplicates:
                    dropped += 1
                    if writer:
                        writer.write(doc, rank=rank)
                    continue
                kept += 1
                doc.metadata["duplicate_count"] = counts.get(doc_idx, 0)
                yield doc
        self.stat_update(StatHints.total, value=kept + dropped)
        self.stat_update(StatHints.forwarded, value=kept)
        self.stat_update(StatHints.dropped, value=dropped)
