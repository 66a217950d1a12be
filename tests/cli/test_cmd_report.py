"""``contextfold report``: the HTML page from a saved replay JSON, or one clear line when the file is not one."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from contextfold.cli import main


@pytest.fixture(scope="module")
def metrics(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import contextlib

    path = tmp_path_factory.mktemp("metrics") / "metrics.json"
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(io.StringIO()):
        assert main(["replay", "--demo", "--json", "--jobs", "1"]) == 0
    path.write_text(buffer.getvalue())
    return path


def test_report_from_a_saved_replay(tmp_path: Path, metrics: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(metrics), "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "django__django-13590" in page and "<svg" in page
    assert capsys.readouterr().err == f"contextfold: wrote the report to {out}\n"


def test_report_reads_standard_input(tmp_path: Path, metrics: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(metrics.read_text()))
    monkeypatch.chdir(tmp_path)
    assert main(["report", "-"]) == 0
    assert (tmp_path / "contextfold-report.html").is_file()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{oops", "invalid JSON: Expecting property name enclosed in double quotes (line 1 column 2)"),
        (json.dumps({"sessions": 1}), "turns: missing (expected the output of 'contextfold replay --json')"),
    ],
)
def test_a_file_that_is_not_a_replay_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    path = tmp_path / "m.json"
    path.write_text(content)
    assert main(["report", str(path), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err == f"contextfold: {path}: {expected}\n"
    assert not (tmp_path / "r.html").exists()


def test_a_missing_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "nope.json")]) == 4
    assert capsys.readouterr().err == f"contextfold: {tmp_path / 'nope.json'}: no such file\n"
