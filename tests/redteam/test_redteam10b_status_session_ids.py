"""``contextfold status`` on an archive holding a session whose id the archive encodes (``team/alice:42``).

Session ids other than letters, digits, ``.``, ``_`` and ``-`` (a user's e-mail, ``tenant/user:n``, what a proxy
client sends) are kept under an encoded folder name (``_team_2falice_3a42``). ``status`` listed each session's files
by its id instead of that key, so one such session anywhere in the archive made the whole listing fail: exit 70,
``contextfold: internal error: ValueError: session_id 'team/alice:42': use 1-200 letters, digits, ...``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextfold.cli import main
from contextfold.manager import ContextManager

SESSIONS = ["team/alice:42", "bob@example.com", "Plain-Id_1"]


def test_status_lists_sessions_whose_ids_are_encoded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for sid in SESSIONS:
        cm = ContextManager(model="gpt-4o", store="memory", archive=str(tmp_path), session_id=sid)
        cm.add([{"role": "user", "content": "rt10b-status " + "hello " * 50}, {"role": "assistant", "content": "ok"}])
        cm.add([{"role": "user", "content": "more " * 50}])
        cm.compact(force=True)
        cm.close()
    capsys.readouterr()
    assert main(["status", "--archive", str(tmp_path), "--json"]) == 0
    rows = {r["session"]: r for r in json.loads(capsys.readouterr().out)["sessions"]}
    assert sorted(rows) == sorted(SESSIONS)
    plain = rows["Plain-Id_1"]
    for sid in SESSIONS:
        assert {**rows[sid], "session": None} == {**plain, "session": None}, rows[sid]
        assert rows[sid]["compactions"] == 1 and rows[sid]["events"] > 0
