"""The formcast command: subprocess runs of the console script (output parsed), and the other
grammar options through main() with the session model."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import lark
import pytest

from formcast import cli

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
LARK = 'start: "x=" DIGIT "+" DIGIT\nDIGIT: /[0-9]/\n'


def formcast_command() -> list[str]:
    script = Path(sys.executable).with_name("formcast")
    return [str(script)] if script.exists() else [sys.executable, "-m", "formcast.cli"]


def run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run(
        [*formcast_command(), *args], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.fixture
def schema_file(tmp_path):
    path = tmp_path / "person.json"
    path.write_text(json.dumps(SCHEMA))
    return str(path)


def test_generate_schema_subprocess(schema_file):
    done = run("generate", "--schema", schema_file, "--max-tokens", "40", "Ann is 30.")
    assert done.returncode == 0, done.stderr
    jsonschema.validate(json.loads(done.stdout), SCHEMA)


def test_compile_subprocess_json_report(schema_file):
    done = run("compile", "--schema", schema_file, "--json", "--text", '{"name":"Al","age":7}')
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["num_states"] > 0 and report["vocab_size"] == 49152
    masks = report["masks"]
    assert masks[0]["num_allowed"] >= 1 and all(m["is_next_allowed"] for m in masks)


def test_compile_text_report(in_process):
    code, out, _ = in_process("compile", "--regex", r"\d{2,5}", "--masks", "3")
    assert code == 0 and re.search(r"automaton: \d+ states", out)
    rows = re.findall(r"^\s+(\d+)\s+(\d+)\s+([y-])", out, re.M)
    assert [r[0] for r in rows] == ["0", "1", "2"]
    assert [r[2] for r in rows] == ["-", "-", "y"]  # EOS only once two digits are written


def test_bench_dry_run_subprocess():
    done = run("bench", "--dry-run", "--", "--quick")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("benchmarks/run_all.py --quick")


@pytest.fixture
def in_process(model, monkeypatch, capsys):
    monkeypatch.setattr(cli, "load_model", lambda name: model)

    def main(*args: str) -> tuple[int, str, str]:
        code = cli.main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return main


def test_generate_other_grammars_in_process(in_process, tmp_path):
    code, out, _ = in_process("generate", "--regex", r"[a-z]{3}", "--max-tokens", "8", "Word:")
    assert code == 0 and re.fullmatch(r"[a-z]{3}\n", out)
    code, out, _ = in_process("generate", "--choice", "yes", "--choice", "no", "Is ice cold?")
    assert code == 0 and out in ("yes\n", "no\n")
    grammar = tmp_path / "sum.lark"
    grammar.write_text(LARK)
    code, out, _ = in_process("generate", "--grammar", str(grammar), "--stream", "A sum:")
    assert code == 0
    lark.Lark(LARK).parse(out.rstrip("\n"))


def test_errors_exit_with_a_message(in_process, tmp_path):
    code, _, err = in_process("generate", "--regex", "(", "x")
    assert code == 1 and err.startswith("formcast: error:") and "position" in err
    code, _, err = in_process("generate", "--schema", str(tmp_path / "missing.json"), "x")
    assert code == 1 and "cannot read" in err
    code, _, err = in_process("generate", "--regex", "(abc ){4}", "--max-tokens", "1", "x")
    assert code == 1 and "token limit" in err
    with pytest.raises(SystemExit) as info:
        cli.main(["generate", "--regex", "a", "--choice", "b", "x"])
    assert info.value.code == 2
