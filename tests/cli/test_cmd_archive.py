"""``contextfold archive restore`` and ``contextfold status`` on the archive a replay leaves on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import TRAJECTORIES, require

from contextfold.cli import main
from contextfold.formats import get_format
from contextfold.importers._files import load_sessions

TAU = TRAJECTORIES / "taubench-airline" / "gpt-4o-airline.json"
TAU_ID = "gpt-4o-airline/3-0"


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require(TAU.is_file(), f"shared data not found: {TAU}")
    root = tmp_path_factory.mktemp("replayed")
    one = root / "session.json"
    # One tau-bench entry in a file of its own, so the replay stays quick.
    one.write_text(json.dumps([json.loads(TAU.read_text())[3]]))
    paths = {"file": one, "archive": root / "archive", "store": root / "store"}
    code = main(["replay", str(one), "--window", "4000", "--archive", str(paths["archive"]), "--store",
                 f"local://{paths['store']}", "--jobs", "1"])
    assert code == 0
    return paths


def test_status_lists_what_the_replay_archived(replayed: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["status", "--archive", str(replayed["archive"]), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["sessions"]
    assert row["session"] == "session/3-0"  # (the recorded id: the archive names it by its reversible encoding)
    assert row["compactions"] >= 2 and row["summaries"] >= 1 and row["latest_transcript_messages"] > 0


def test_restore_gives_back_the_archived_part_of_the_history(
    replayed: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "restored.jsonl"
    # The session's own id works too: it is mapped to the archive's id.
    assert main(["archive", "restore", "session/3-0", "--archive", str(replayed["archive"]), "--store",
                 f"local://{replayed['store']}", "-o", str(out)]) == 0
    got = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    original = get_format("openai_chat").encode(load_sessions(replayed["file"])[0].messages)
    # The archive holds everything up to the latest compaction; what came after lives only in the live view.
    assert 0 < len(got) <= len(original)
    assert got == original[: len(got)]
    assert "restored" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "code", "expected"),
    [
        (["archive", "restore", "nope", "--archive", "{archive}"], 4,
         "contextfold: SESSION: no session 'nope' in the archive {archive} (it has: session/3-0)\n"),
        (["archive", "restore", "x", "--archive", "{missing}"], 4,
         "contextfold: --archive: no archive at '{missing}' (no such directory)\n"),
        (["status", "--archive", "{missing}"], 4,
         "contextfold: --archive: no archive at '{missing}' (no such directory)\n"),
        (["archive"], 2, "contextfold: archive: missing: 'restore' (see contextfold archive --help)\n"),
    ],
)
def test_bad_input_is_one_line_and_its_exit_code(
    replayed: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int,
    expected: str,
) -> None:
    values = {"archive": replayed["archive"], "missing": tmp_path / "missing"}
    capsys.readouterr()
    assert main([a.format(**values) for a in argv]) == code
    out, err = capsys.readouterr()
    assert out == "" and err == expected.format(**values)


def test_status_of_an_empty_archive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--archive", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"no sessions in {tmp_path}\n"
