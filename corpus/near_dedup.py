"""Near-duplicate removal (``minhash_dedup_v1``) with datatrove's MinHash/LSH over character n-grams.

Korean has no reliable word boundaries for shingling (spacing varies between writers, particles attach to
words), so documents are shingled into character ``n``-grams of their casefolded text with whitespace removed
(5-grams by default). Datatrove runs the four MinHash stages: signatures per rank, LSH buckets (one task per
band), union-find clustering, then a filter that keeps one document per cluster and sends the others to the
``minhash_dedup_v1`` exclusion writer. With ``b`` bands of ``r`` hashes two documents become candidates with
probability ``1 - (1 - J^r)^b`` for Jaccard similarity ``J``; the default 14 × 8 puts the 50 % point near
``J ≈ 0.72``.
"""

from __future__ import annotations

import re

import numpy as np
from datatrove.io import get_datafolder
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupFilter,
    MinhashDedupSignature,
)
from datatrove.utils.hashing import HashConfig, create_hash_func

RULE = "minhash_dedup_v1"
_NOT_WORD = re.compile(r"[\W_]+")


def char_shingles(text: str, n: int) -> list[str]:
    """The distinct character ``n``-grams of ``text`` casefolded with whitespace, punctuation and symbols
    removed (in first-seen order); a text shorter than ``n`` yields its whole self, an empty text nothing."""
    chars = _NOT_WORD.sub("", text.casefold())
    if len(chars) <= n:
        return [chars] if chars else []
    return list(dict.fromkeys(chars[i : i + n] for i in range(len(chars) - n + 1)))


def minhash_config(buckets: int, hashes_per_bucket: int, ngram: int) -> MinhashConfig:
    """Datatrove's MinHash settings for kplm (64-bit xxhash, fixed seed)."""
    return MinhashConfig(
        n_grams=ngram,
        num_buckets=buckets,
        hashes_per_bucket=hashes_per_bucket,
        hash_config=HashConfig(precision=64, hash_fc="xxhash"),
        seed=1,
    )


class CharMinhashSignature(MinhashDedupSignature):
    """Datatrove's MinHash signature stage, shingling character n-grams instead of words (no word
    tokenizer is loaded)."""

    name = "kplm char-n-gram minhash signatures"

    def __init__(self, output_folder: str, config: MinhashConfig):
        PipelineStep.__init__(self)  # the parent's __init__ would load a spaCy word tokenizer
        self.output_folder = get_datafolder(output_folder)
        self.config = config
        self.num_hashes = config.num_buckets * config.hashes_per_bucket
        self._parameters = None
        self._hash_func = create_hash_func(config.hash_config, bytes)
        self.language = "ko"
        self.word_tokenizer = None
        self.skip_existing_sigs = False

    def get_shingles(self, text: str) -> np.ndarray:
        hash_func = self._hash_func
        grams = char_shingles(text, self.config.n_grams)
        hashes = (hash_func(gram.encode("utf-8")) for gram in grams)
        return np.fromiter(hashes, dtype=np.uint64, count=len(grams)).reshape((-1, 1))


def signature_step(folder: str, config: MinhashConfig) -> CharMinhashSignature:
    return CharMinhashSignature(folder, config)


def bucket_step(signatures: str, buckets_folder: str, config: MinhashConfig) -> MinhashDedupBuckets:
    return MinhashDedupBuckets(input_folder=signatures, output_folder=buckets_folder, config=config)


def cluster_step(buckets_folder: str, remove_folder: str, config: MinhashConfig) -> MinhashDedupCluster:
    return MinhashDedupCluster(input_folder=buckets_folder, output_folder=remove_folder, config=config)


def filter_step(remove_folder: str, exclusion_writer) -> MinhashDedupFilter:
    return MinhashDedupFilter(input_folder=remove_folder, exclusion_writer=exclusion_writer)
