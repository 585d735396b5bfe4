"""Shared test settings: offline Hugging Face and wandb, and the location of ../shared/data."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
SAMPLE_CORPUS = REPO / "corpus" / "sample" / "kplm_sample_ko.jsonl"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The read-only shared datasets (NSMC, KLUE dev sets, reference vocabularies)."""
    if not (SHARED_DATA / "nsmc" / "reviews.jsonl.gz").exists():
        pytest.fail(f"shared data not found at {SHARED_DATA}: tests read it from ../shared/data")
    return SHARED_DATA
