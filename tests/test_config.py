"""The config mechanism: YAML and flags become validated dataclasses, errors name the field."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from kplm.config import build, fingerprint, load_yaml
from kplm.errors import KplmError


@dataclass(kw_only=True)
class Inner:
    size: Literal["tiny", "base"] = "tiny"


@dataclass(kw_only=True)
class Outer:
    path: Path
    steps: int = 10
    ratio: float = 0.5
    names: list[str] = field(default_factory=list)
    inner: Inner = field(default_factory=Inner)

    def __post_init__(self):
        if self.steps < 1:
            raise ValueError(f"steps: must be positive, got {self.steps}")


def test_build_converts_and_nests():
    cfg = build(Outer, {"path": "a/b", "ratio": 1, "names": ["x"], "inner": {"size": "base"}})
    assert cfg.path == Path("a/b") and cfg.ratio == 1.0 and cfg.inner.size == "base"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"path": "p", "stepz": 3}, "run.yaml.stepz: unknown key (did you mean 'steps'?)"),
        ({"path": "p", "steps": "ten"}, "run.yaml.steps: expected an integer, got str 'ten'"),
        ({"path": "p", "steps": True}, "run.yaml.steps: expected an integer"),
        ({"path": "p", "steps": 0}, "run.yaml.steps: must be positive, got 0"),
        (
            {"path": "p", "inner": {"size": "huge"}},
            "run.yaml.inner.size: must be one of 'tiny', 'base', got 'huge'",
        ),
        ({"path": "p", "names": "x"}, "run.yaml.names: expected a list"),
        ({}, "run.yaml.path: required but not given"),
    ],
)
def test_build_errors_name_the_field(data, message):
    with pytest.raises(KplmError) as err:
        build(Outer, data, where="run.yaml")
    assert str(err.value).startswith(message)


def test_load_yaml_errors(tmp_path):
    with pytest.raises(KplmError, match="config file not found"):
        load_yaml(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\nb: 3\n", encoding="utf-8")
    with pytest.raises(KplmError, match=r"bad.yaml:\d+: invalid YAML"):
        load_yaml(bad)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("a: '\ud55c'".encode("utf-8", "surrogatepass")[:-2] + b"\xff'")
    with pytest.raises(KplmError, match="not valid UTF-8"):
        load_yaml(latin)


def test_fingerprint_is_stable_and_sensitive():
    a = Outer(path=Path("p"))
    assert fingerprint(a) == fingerprint(Outer(path=Path("p")))
    assert fingerprint(a) != fingerprint(Outer(path=Path("p"), steps=11))
