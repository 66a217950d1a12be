"""An events file with lines contextfold did not write never stops ``Archive.events()`` or ``contextfold status``.

Found by planting lines in an archived session's ``events.jsonl`` (red team, session 11): a line nested past the
JSON reader's depth raised ``RecursionError`` and a number of 5,000 digits ``ValueError`` (int's 4,300-digit cap,
not a ``JSONDecodeError``), so ``contextfold status`` ended in "internal error" (exit 70) for the whole archive;
a line holding valid JSON that is no object (``5``, ``[1]``) was returned as an event. Each is skipped, as a torn
line is.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contextfold.archive import Archive
from contextfold.cli import main
from contextfold.stores.archive_fs import FilesystemArchiveStore

NONCE = "rt11-event-lines-a4c9"
PLANTED = ["[" * 100_000 + "]" * 100_000, '{"n": ' + "9" * 5_000 + "}", "5", "[1]", '"text"']


def _archive(tmp_path: Path) -> Archive:
    store = FilesystemArchiveStore(tmp_path / "archive", fsync=False)
    lines = ['{"name": "compact.started", "n": 1}', *PLANTED, '{"name": "compact.completed", "n": 2}']
    store.write(NONCE, "events.jsonl", ("\n".join(lines) + "\n").encode())
    return Archive(store)


def test_planted_lines_are_skipped(tmp_path: Path) -> None:
    assert [e["n"] for e in _archive(tmp_path).events(NONCE)] == [1, 2]


def test_status_lists_the_session(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _archive(tmp_path)
    assert main(["status", "--archive", str(tmp_path / "archive"), "--json"]) == 0
    out = capsys.readouterr().out
    assert NONCE in out and '"events": 2' in out
