"""``contextfold status`` on a filesystem archive where one session folder holds something that cannot be read.

Found planting, in one session folder of an archive of two, a FIFO or a socket where ``events.jsonl`` was, or bytes
that are no UTF-8 where its transcript was: ``status`` printed nothing but that session's error and exited 7, so one
bad folder (another program's, a torn copy) hid every other session of the archive. Now the readable sessions are
listed, the bad one is named on stderr and in the JSON's ``unreadable``, and the exit code stays 7 so that a script
(or an archive that cannot be read at all) still sees the failure. A FIFO is never opened for blocking reads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from planting import plant_unix_socket

from contextfold.archive import Archive
from contextfold.cli import main
from contextfold.cli._common import EXIT_BACKEND
from contextfold.messages import Message
from contextfold.redact import Redactor
from contextfold.stores.archive_fs import FilesystemArchiveStore

NONCE = "rt11b-status-5d1c"


def _plant_fifo(path: Path) -> None:
    os.mkfifo(path)


def _plant_socket(path: Path) -> None:
    plant_unix_socket(path)


def _plant_garbage(path: Path) -> None:
    path.write_bytes(b"\xff\x00" + NONCE.encode())


PLANTS: dict[str, tuple[str, Callable[[Path], None]]] = {
    "fifo as events": ("events.jsonl", _plant_fifo),
    "socket as events": ("events.jsonl", _plant_socket),
    "no UTF-8 as transcript": ("transcript-pre-compact-001.jsonl", _plant_garbage),
}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and Unix sockets")
@pytest.mark.parametrize("plant", list(PLANTS))
def test_one_unreadable_session_is_left_out_and_the_others_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], plant: str
) -> None:
    root = tmp_path / "a"  # short: a Unix socket's path is limited to ~100 bytes
    archive = Archive(FilesystemArchiveStore(root, fsync=False), redactor=Redactor(enabled=False))
    for session in ("good", "bad"):
        archive.archive_transcript(session, [Message("user", f"{NONCE} {session}")])
        archive.append_events(session, [{"type": "note", "nonce": NONCE}])
    name, make = PLANTS[plant]
    (root / "bad" / name).unlink()
    make(root / "bad" / name)

    assert main(["status", "--archive", str(root)]) == EXIT_BACKEND
    out, err = capsys.readouterr()
    assert "good" in out and "bad" not in out
    assert "session 'bad' left out" in err

    assert main(["status", "--archive", str(root), "--json"]) == EXIT_BACKEND
    result = json.loads(capsys.readouterr().out)
    assert [row["session"] for row in result["sessions"]] == ["good"]
    assert [row["session"] for row in result["unreadable"]] == ["bad"]
