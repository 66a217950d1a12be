"""``convert --out-dir`` names each file after its session id, and those ids come from the (untrusted) session file.

Found on afa4c7c (red team, session 19): a tau-bench file whose ``task_id`` is ``"../../escaped"`` made
``convert --out-dir OUT`` write ``OUT/../escaped-0.jsonl`` — outside the folder the user named (any path ending in
``-<trial>.jsonl`` the file chose). Two entries with the same task and trial were written to one file, the second
over the first, without a word; with ``--session`` naming such an id only the first was written. A NUL in a task id
was an internal error (exit 70). Now every file lands inside ``--out-dir``, each session gets its own file, and
``--session`` that names several sessions says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextfold.cli import main


def _entry(task_id: Any, trial: Any, text: str) -> dict[str, Any]:
    return {"task_id": task_id, "trial": trial, "reward": 1.0, "info": {},
            "traj": [{"role": "user", "content": text}, {"role": "assistant", "content": f"re: {text}"}]}


def _write(path: Path, entries: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(entries), encoding="utf-8")
    return path


def _contents(folder: Path) -> dict[str, str]:
    """Each written file (relative path) -> the user message it holds."""
    out = {}
    for file in sorted(folder.rglob("*.jsonl")):
        first = json.loads(file.read_text(encoding="utf-8").splitlines()[0])
        out[file.relative_to(folder).as_posix()] = first["content"]
    return out


@pytest.mark.parametrize("task_id", ["../../escaped", "../../../../escaped", "a/../../../escaped", "/abs/escaped"])
def test_every_file_lands_inside_the_out_dir(tmp_path: Path, task_id: str) -> None:
    source = _write(tmp_path / "runs.json", [_entry(task_id, 0, "hostile")])
    out = tmp_path / "a" / "b" / "c" / "out"  # deep enough that on afa4c7c every escape stayed under tmp_path
    assert main(["convert", str(source), "--to", "openai_chat", "--out-dir", str(out)]) == 0
    inside = _contents(out)
    assert list(inside.values()) == ["hostile"]
    # Nothing anywhere else under the test's folder but the input and the out dir.
    stray = [p for p in tmp_path.rglob("*.jsonl") if out not in p.parents]
    assert stray == []


def test_a_nul_in_an_id_is_no_internal_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _write(tmp_path / "runs.json", [_entry("a\x00b", 0, "nul")])
    assert main(["convert", str(source), "--to", "anthropic", "--out-dir", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().err == ""
    assert list(_contents(tmp_path / "out").values()) == ["nul"]


def test_sessions_sharing_an_id_each_get_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _write(tmp_path / "runs.json", [_entry(1, 0, "first"), _entry(1, 0, "second"), _entry(2, 0, "other")])
    out = tmp_path / "out"
    assert main(["convert", str(source), "--to", "openai_chat", "--out-dir", str(out)]) == 0
    assert _contents(out) == {"runs/1-0.jsonl": "first", "runs/1-0~2.jsonl": "second", "runs/2-0.jsonl": "other"}
    err = capsys.readouterr().err
    assert err == "contextfold: 2 sessions have the id 'runs/1-0': written to runs/1-0.jsonl, runs/1-0~2.jsonl\n"


def test_a_renamed_file_never_takes_another_sessions_name(tmp_path: Path) -> None:
    # "x~2" is a real id here: the second "x" must not be written over it.
    source = _write(tmp_path / "runs.json", [_entry("x", "", "a"), _entry("x", "", "b"), _entry("x~2", "", "c")])
    out = tmp_path / "out"
    assert main(["convert", str(source), "--to", "openai_chat", "--out-dir", str(out)]) == 0
    assert sorted(_contents(out).values()) == ["a", "b", "c"]


def test_session_naming_several_sessions_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _write(tmp_path / "runs.json", [_entry(1, 0, "first"), _entry(1, 0, "second")])
    assert main(["convert", str(source), "--to", "openai_chat", "--session", "runs/1-0"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"contextfold: {source}: 2 sessions have the id 'runs/1-0': write each to its own file with "
                   "--out-dir DIR\n")
