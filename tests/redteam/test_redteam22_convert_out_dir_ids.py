"""``convert --out-dir`` names each file after its session id, and those ids come from the (untrusted) session file.

Found on afa4c7c (red team, session 19): a tau-bench file whose ``task_id`` is ``"../../escaped"`` made
``convert --out-dir OUT`` write ``OUT/../escaped-0.jsonl`` — outside the folder the user named (any path ending in
``-<trial>.jsonl`` the file chose). Two entries with the same task and trial were written to one file, the second
over the first, without a word; with ``--session`` naming such an id only the first was written. A NUL in a task id
was an internal error (exit 70). Now every file lands inside ``--out-dir``, each session gets its own file, and
``--session`` that names several sessions says so.

Found on that fix (review of s19f): naming N sessions sharing one id tried N²/2 names (each copy restarted at ~2:
8,000 copies 95 s of CPU); ids ``q`` and ``q-0.jsonl/z`` made ``runs/q-0.jsonl`` both a file and a folder (exit 5
after one file was written); two ids cleaned to one name were renamed without a word.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextfold.cli import convert, main


def _entry(task_id: Any, trial: Any, text: str) -> dict[str, Any]:
    return {"task_id": task_id, "trial": trial, "reward": 1.0, "info": {},
            "traj": [{"role": "user", "content": text}, {"role": "assistant", "content": f"re: {text}"}]}


def _write(path: Path, entries: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(entries), encoding="utf-8")
    return path


def _contents(folder: Path) -> dict[str, str]:
    """Each written file (relative path) -> the user message it holds."""
    out = {}
    for file in sorted(p for p in folder.rglob("*.jsonl") if p.is_file()):  # (a folder may be named x.jsonl)
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


def test_names_tried_grow_linearly_with_the_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    tried = 0
    with_name = PurePosixPath.with_name

    def counting(self: PurePosixPath, name: str) -> PurePosixPath:
        nonlocal tried
        tried += 1
        return with_name(self, name)

    monkeypatch.setattr(PurePosixPath, "with_name", counting)
    sessions: Any = [SimpleNamespace(id="runs/1-0") for _ in range(2_000)] + [SimpleNamespace(id="runs/1-0~5")]
    files = convert.out_files(sessions)
    assert len(set(files)) == 2_001
    assert files[:3] == [PurePosixPath("runs/1-0.jsonl"), PurePosixPath("runs/1-0~2.jsonl"),
                         PurePosixPath("runs/1-0~3.jsonl")]
    assert PurePosixPath("runs/1-0~5.jsonl") not in files[:2_000]  # another session's name is skipped
    assert tried == 2_000  # s19f: 2,001,997 (each copy tried every number from 2)


@pytest.mark.parametrize(("first", "second", "files"), [
    ("q", "q-0.jsonl/z", {"runs/q-0.jsonl": "q", "runs/q-0.jsonl~2/z-0.jsonl": "q-0.jsonl/z"}),
    ("q-0.jsonl/z", "q", {"runs/q-0.jsonl/z-0.jsonl": "q-0.jsonl/z", "runs/q-0~2.jsonl": "q"}),
])
def test_an_id_naming_another_ids_file_as_its_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     first: str, second: str, files: dict[str, str]) -> None:
    source = _write(tmp_path / "runs.json", [_entry(first, 0, first), _entry(second, 0, second)])
    out = tmp_path / "out"
    assert main(["convert", str(source), "--to", "openai_chat", "--out-dir", str(out)]) == 0  # s19f: 5
    assert _contents(out) == files
    (renamed,) = [name for name, text in files.items() if text == second]
    assert capsys.readouterr().err == (
        f"contextfold: the session 'runs/{second}-0' would be written to runs/{second}-0.jsonl, another session's "
        f"file or folder: written to {renamed}\n")


def test_ids_cleaned_to_one_name_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _write(tmp_path / "runs.json", [_entry("a/../b", 0, "dots"), _entry("a/_/b", 0, "underscore")])
    out = tmp_path / "out"
    assert main(["convert", str(source), "--to", "openai_chat", "--out-dir", str(out)]) == 0
    assert _contents(out) == {"runs/a/_/b-0.jsonl": "dots", "runs/a/_/b-0~2.jsonl": "underscore"}
    assert capsys.readouterr().err == (  # s19f: nothing said
        "contextfold: 2 sessions' ids ('runs/a/../b-0', 'runs/a/_/b-0') make one file name runs/a/_/b-0.jsonl: "
        "written to runs/a/_/b-0.jsonl, runs/a/_/b-0~2.jsonl\n")


@given(st.lists(st.lists(st.sampled_from(["a", "/", ".", "~2", "-0", ".jsonl", "\x00", "_"]), max_size=6).map("".join),
                max_size=12))
def test_every_session_gets_a_file_no_other_file_is_under(ids: list[str]) -> None:
    sessions: Any = [SimpleNamespace(id=i) for i in ids]
    files = convert.out_files(sessions)
    assert len(set(files)) == len(files)
    folders = {folder for file in files for folder in file.parents}
    assert not folders & set(files)  # no file is another's folder
    assert all(".." not in file.parts and not file.is_absolute() for file in files)
