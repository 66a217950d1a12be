"""``contextfold gc``: retention of the tool output store and the archive, run now."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from contextfold.cache import ToolOutputCache
from contextfold.cli import main
from contextfold.stores.archive_fs import FilesystemArchiveStore
from contextfold.stores.local import LocalBlobStore

DAY = 24 * 3600.0


def test_gc_deletes_old_outputs_and_old_archived_sessions_only(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    now = time.time()
    with LocalBlobStore(tmp_path / "store") as store:
        stale = ToolOutputCache(store, session_id="old", clock=lambda: now - 40 * DAY).put("stale output\n")
        fresh = ToolOutputCache(store, session_id="new", clock=lambda: now).put("fresh output\n")
    archive = FilesystemArchiveStore(tmp_path / "archive", fsync=False)
    archive.write("old-session", "transcript-pre-compact-001.jsonl", b"{}\n")
    archive.write("new-session", "transcript-pre-compact-001.jsonl", b"{}\n")
    for f in (tmp_path / "archive" / "old-session").iterdir():
        os.utime(f, (now - 60 * DAY, now - 60 * DAY))
    code = main(["gc", "--store", f"local://{tmp_path / 'store'}", "--archive", str(tmp_path / "archive"),
                 "--max-age-days", "14"])
    assert code == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("tool outputs: deleted 1 (") and ", kept 1 (" in out[0]
    assert out[1] == "archive: deleted 1 session(s): old-session"
    with LocalBlobStore(tmp_path / "store") as store:
        assert not store.exists(stale.id) and store.exists(fresh.id)
    assert archive.sessions() == ["new-session"]


def test_gc_with_nothing_to_clean_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["gc", "--store", f"local://{tmp_path / 'none'}", "--archive", str(tmp_path / "none")])
    assert code == 4
    err = capsys.readouterr().err
    assert "no tool output store at" in err and "nothing to clean" in err and "Traceback" not in err
    assert not (tmp_path / "none").exists()


def test_gc_refuses_negative_limits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gc", "--archive", str(tmp_path), "--max-mb", "-1"]) != 0
    assert "--max-mb" in capsys.readouterr().err


def test_archive_prune_by_size_spares_live_sessions(tmp_path: Path) -> None:
    store = FilesystemArchiveStore(tmp_path, fsync=False)
    now = time.time()
    for n, age in enumerate((10 * DAY, 5 * DAY, 0.0)):
        store.write(f"s{n}", "transcript-pre-compact-001.jsonl", b"x" * 1_000)
        for f in (tmp_path / f"s{n}").iterdir():
            os.utime(f, (now - age, now - age))
    assert store.prune(max_age_s=None, max_bytes=500, live_s=DAY, now=now) == ["s0", "s1"]
    assert store.sessions() == ["s2"]  # still over 500 bytes, but written just now
