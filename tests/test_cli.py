"""The kplm command line: help, and one-line errors (no traceback) for bad input to every command."""

import json
import subprocess
import sys

import pytest

from kplm.cli import COMMANDS, main


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kplm.cli", *args], capture_output=True, text=True, timeout=300
    )


def assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("kplm: error:")]
    assert len(errors) == 1, result.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]


def test_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for words in COMMANDS:
        assert " ".join(words) in out
    assert "kplm run" in out or "run [CONFIG]" in out


@pytest.mark.parametrize("words", [*COMMANDS, ("run",)])
def test_each_command_has_help(words, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*words, "--help"])
    assert exit_.value.code == 0
    assert "--" in capsys.readouterr().out


def test_unknown_command(capsys):
    assert main(["frobnicate"]) == 2
    assert "unknown command 'frobnicate'" in capsys.readouterr().err


@pytest.fixture
def bad_utf8_jsonl(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes('{"text": "좋은 문장입니다 정말로요"}\n'.encode() + b'{"text": "\xff\xfe"}\n')
    return path


def test_corpus_clean_errors(tmp_path, bad_utf8_jsonl):
    assert_one_line_error(
        run_cli(
            "corpus", "clean", "--input", str(tmp_path / "missing.jsonl"), "--output", str(tmp_path / "o")
        ),
        "input not found",
        "missing.jsonl",
    )
    assert_one_line_error(
        run_cli(
            "corpus",
            "clean",
            "--input",
            str(bad_utf8_jsonl),
            "--output",
            str(tmp_path / "o"),
            "--min-hangul-ratio",
            "3",
        ),
        "--min-hangul-ratio",
    )
    config = tmp_path / "clean.yaml"
    config.write_text(
        f"input: [{bad_utf8_jsonl}]\noutput: {tmp_path / 'o'}\nmin_chars: ten\n", encoding="utf-8"
    )
    assert_one_line_error(run_cli("corpus", "clean", "--config", str(config)), "min-chars", "ten")
    # an invalid UTF-8 line is quarantined with file and line, not fatal
    result = run_cli("corpus", "clean", "--input", str(bad_utf8_jsonl), "--output", str(tmp_path / "ok"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["quarantined_by_reason"] == {"invalid_utf8": 1}
    assert f"{bad_utf8_jsonl}:2" in (tmp_path / "ok" / "quarantine" / "00000.jsonl").read_text()


def test_pii_errors(tmp_path, bad_utf8_jsonl):
    assert_one_line_error(
        run_cli(
            "pii", "scrub", "--input", str(tmp_path / "nope.jsonl"), "--output", str(tmp_path / "o.jsonl")
        ),
        "not found",
        "nope.jsonl",
    )
    assert_one_line_error(
        run_cli("pii", "detect", "--input", str(bad_utf8_jsonl), "--output", str(tmp_path / "o.jsonl")),
        f"{bad_utf8_jsonl}:2",
        "invalid UTF-8",
    )
    assert_one_line_error(
        run_cli(
            "pii",
            "scrub",
            "--input",
            str(bad_utf8_jsonl),
            "--output",
            str(tmp_path / "o.jsonl"),
            "--types",
            "PHONEY",
        ),
        "PHONEY",
    )


def test_tokenizer_errors(tmp_path):
    assert_one_line_error(
        run_cli(
            "tokenizer", "train", "--input", str(tmp_path / "none.txt"), "--output", str(tmp_path / "tok")
        ),
        "none.txt",
    )
    assert_one_line_error(
        run_cli(
            "tokenizer",
            "train",
            "--input",
            str(tmp_path),
            "--output",
            str(tmp_path / "tok"),
            "--vocab-size",
            "-5",
        ),
        "--vocab-size",
    )


def test_pack_and_export_errors(tmp_path):
    assert_one_line_error(
        run_cli(
            "pack",
            "--corpus",
            str(tmp_path / "c"),
            "--tokenizer",
            str(tmp_path / "t"),
            "--output",
            str(tmp_path / "p"),
        ),
    )
    assert_one_line_error(
        run_cli("export", "--checkpoint", str(tmp_path / "ckpt"), "--output", str(tmp_path / "m")), "ckpt"
    )


def test_run_config_errors(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("sources: [x.jsonl]\npretrain:\n  max_steps: ten\n", encoding="utf-8")
    assert_one_line_error(run_cli("run", str(config)), "run.yaml", "pretrain.max_steps")
    config.write_text("sources: [x.jsonl]\ncorpus:\n  min_charz: 3\n", encoding="utf-8")
    assert_one_line_error(run_cli("run", str(config)), "corpus.min_charz", "did you mean 'min_chars'")
    config.write_text("sources: [x.jsonl]\ncorpus:\n  input: [y]\n", encoding="utf-8")
    assert_one_line_error(run_cli("run", str(config)), "corpus.input", "set by the runner")
    config.write_text("sources: [x.jsonl\n", encoding="utf-8")
    assert_one_line_error(run_cli("run", str(config)), "invalid YAML")
    assert_one_line_error(run_cli("run", str(tmp_path / "absent.yaml")), "config file not found")
