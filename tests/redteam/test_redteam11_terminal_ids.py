"""Session ids reach the terminal: ``contextfold status`` and ``gc`` print them, errors quote them.

A session id is whatever the client sent (the proxy takes it from a request header): ``"x\\x1b]0;owned\\x07"`` or an
id with a newline in it was written to the operator's terminal as it was, so a client could retitle the terminal,
clear the screen, or forge a row of the listing. Ids other than plain ones were printed by their archive key by
``gc`` (``_team_2falice_3a42``). Text shown to a person now has its control characters escaped, the way Python
writes them in a string literal, and gc prints ids, not keys.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from contextfold.archive import archive_key
from contextfold.cli import main
from contextfold.stores.archive_fs import FilesystemArchiveStore

HOSTILE = "rt11-term\x1b]0;owned\x07\nforged-row 9 9 9 9"
DAY = 24 * 3600.0


def _archived(root: Path, session_id: str, *, age_s: float = 0.0) -> None:
    store = FilesystemArchiveStore(root, fsync=False)
    store.write(archive_key(session_id), "transcript-pre-compact-001.jsonl",
                b'{"role":"user","content":"hi"}\n')
    for f in (root / archive_key(session_id)).iterdir():
        os.utime(f, (time.time() - age_s, time.time() - age_s))


def test_status_escapes_control_characters_of_a_session_id(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    _archived(tmp_path, HOSTILE)
    assert main(["status", "--archive", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    lines = out.splitlines()
    assert len(lines) == 2, lines  # the header and one row: no forged row
    assert lines[1].startswith("rt11-term\\x1b]0;owned\\x07\\nforged-row 9 9 9 9 ")


def test_gc_prints_the_ids_of_deleted_sessions_not_their_keys(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    _archived(tmp_path, "team/alice:42", age_s=60 * DAY)
    _archived(tmp_path, HOSTILE, age_s=60 * DAY)
    assert main(["gc", "--store", f"local://{tmp_path / 'no-store'}", "--archive", str(tmp_path),
                 "--archive-max-age-days", "14"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and out.count("\n") == 1, out
    assert out.startswith("archive: deleted 2 session(s): ")
    assert "team/alice:42" in out and "rt11-term\\x1b]0;owned\\x07\\nforged-row" in out
    assert "_team_2falice" not in out


def test_an_error_line_escapes_control_characters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["archive", "restore", "--archive", str(tmp_path), "rt11\x1b[2Jgone"]) != 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and err.count("\n") == 1, err
