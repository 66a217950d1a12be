"""Archive retention under links it did not make: a planted link must neither stop retention nor steer it.

Found by planting links in an archive folder (red team, session 11): ``FilesystemArchiveStore.prune`` stat'ed
every entry of a session folder *through* links, so

- a link loop (``ln -s loop loop``) in one session folder raised ``OSError: Too many levels of symbolic links``:
  ``contextfold gc`` stopped with exit 5 and every ``ContextManager.close()`` sharing the archive raised it, and no
  session was ever pruned again (the archive grew without bound);
- a link to a large file elsewhere counted that file's size as the session's, so the oldest real sessions were
  deleted to make room for bytes the archive does not hold;
- a link to a file written recently made an abandoned session look live, so it was never deleted for age;
- a dangling ``.pruned`` stamp link made every ``prune_if_due`` (so every ``close()``) raise ``FileNotFoundError``.
"""

from __future__ import annotations

import os
from pathlib import Path

from contextfold.stores.archive_fs import FilesystemArchiveStore

DAY = 24 * 3600.0
NONCE = "rt11-prune-5f2c"


def _session(store: FilesystemArchiveStore, name: str, age_s: float, now: float, size: int = 10) -> Path:
    store.write(name, "transcript-pre-compact-001.jsonl", b"x" * size)
    folder = store.root / name
    for entry in folder.iterdir():
        os.utime(entry, (now - age_s, now - age_s))
    return folder


def test_a_link_loop_in_one_session_folder_does_not_stop_retention(tmp_path: Path) -> None:
    now = 2_000_000_000.0
    store = FilesystemArchiveStore(tmp_path / "archive", fsync=False)
    folder = _session(store, f"{NONCE}-old", 90 * DAY, now)
    _session(store, f"{NONCE}-older", 91 * DAY, now)
    (folder / "loop").symlink_to(folder / "loop")
    removed = store.prune(now=now)
    assert sorted(removed) == sorted([f"{NONCE}-old", f"{NONCE}-older"])


def test_a_link_to_a_large_file_elsewhere_does_not_count_against_the_archive(tmp_path: Path) -> None:
    now = 2_000_000_000.0
    big = tmp_path / "elsewhere.bin"
    with big.open("wb") as fh:
        fh.truncate(50_000_000)  # sparse: 50 MB in size, nothing on disk
    store = FilesystemArchiveStore(tmp_path / "archive", fsync=False)
    _session(store, f"{NONCE}-keep", 3 * DAY, now)
    planted = _session(store, f"{NONCE}-planted", 2 * DAY, now)
    (planted / "big").symlink_to(big)
    assert store.prune(max_age_s=None, max_bytes=1_000_000, now=now) == []
    assert big.exists()


def test_a_link_to_a_fresh_file_does_not_keep_an_abandoned_session(tmp_path: Path) -> None:
    now = 2_000_000_000.0
    fresh = tmp_path / "fresh.txt"
    fresh.write_text("written now")
    os.utime(fresh, (now, now))
    store = FilesystemArchiveStore(tmp_path / "archive", fsync=False)
    folder = _session(store, f"{NONCE}-abandoned", 90 * DAY, now)
    (folder / "fresh").symlink_to(fresh)
    assert store.prune(now=now) == [f"{NONCE}-abandoned"]
    assert fresh.read_text() == "written now"


def test_a_dangling_stamp_link_does_not_make_every_close_fail(tmp_path: Path) -> None:
    now = 2_000_000_000.0
    store = FilesystemArchiveStore(tmp_path / "archive", fsync=False)
    _session(store, f"{NONCE}-old", 90 * DAY, now)
    (store.root / ".pruned").symlink_to(tmp_path / "nowhere")
    assert store.prune_if_due(now=now) == [f"{NONCE}-old"]
    assert not (tmp_path / "nowhere").exists()


def test_the_stamp_link_does_not_touch_the_file_it_points_at(tmp_path: Path) -> None:
    now = 2_000_000_000.0
    victim = tmp_path / "victim.txt"
    victim.write_text("mine")
    os.utime(victim, (1_000.0, 1_000.0))
    store = FilesystemArchiveStore(tmp_path / "archive", fsync=False)
    _session(store, f"{NONCE}-recent", 1 * DAY, now)
    (store.root / ".pruned").symlink_to(victim)
    store.prune_if_due(now=now)
    assert victim.stat().st_mtime == 1_000.0
