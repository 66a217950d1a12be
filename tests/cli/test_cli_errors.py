"""Bad input: one line on stderr naming file, record and problem; exit code 2; never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, TRAJECTORIES, require

from contextfold.cli import main


def _bad_traj(tmp_path: Path) -> Path:
    path = tmp_path / "broken.traj"
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}]
    path.write_text(json.dumps({"history": history}))
    return path


@pytest.mark.parametrize("command", [["count"], ["convert", "--to", "anthropic"]])
def test_malformed_file_gives_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    path = _bad_traj(tmp_path)
    assert main([*command, str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"contextfold: {path}: record 2: role: unknown role 'robot'")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "invalid JSON: Expecting property name"),
        ('{"history": [{"role": "user", "content": 7}]}', "record 0: content:"),
        ('[{"traj": [{"role": "tool", "content": "x"}]}]', "record 0: traj[0].tool_call_id:"),
    ],
)
def test_other_malformations(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str) -> None:
    path = tmp_path / "s.json"
    path.write_text(content)
    assert main(["count", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"contextfold: {path}: {expected}") and err.count("\n") == 1


def test_missing_file_and_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["count", str(tmp_path / "nope.traj")]) == 2
    assert capsys.readouterr().err == f"contextfold: {tmp_path / 'nope.traj'}: no such file or folder\n"
    assert main([]) == 2
    assert "usage: contextfold" in capsys.readouterr().err
    assert main(["count"]) == 2
    assert "the following arguments are required: SESSION" in capsys.readouterr().err
    assert main(["convert", "x", "--to", "xml"]) == 2
    assert "invalid choice: 'xml'" in capsys.readouterr().err


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-m", "contextfold", *args], capture_output=True, text=True, env=env, check=False, timeout=120
    )


def test_python_dash_m_runs_the_command(tmp_path: Path) -> None:
    session = TRAJECTORIES / "sweagent-claude4sonnet" / "sympy__sympy-19954.traj"
    require(session.is_file(), "shared SWE-agent data missing")
    done = _run("count", str(session), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["messages"] == 60

    bad = _bad_traj(tmp_path)
    done = _run("count", str(bad))
    assert done.returncode == 2
    assert done.stdout == ""
    roles = "assistant, developer, system, tool, user"
    assert done.stderr == f"contextfold: {bad}: record 2: role: unknown role 'robot' (expected one of {roles})\n"
