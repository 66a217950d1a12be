"""The filesystem archive: ``{root}/{session_id}/transcript-pre-compact-001.jsonl``, ``summary-001.json``, ….

Whole files are written to a temporary file in the same directory, flushed to disk and renamed over the target,
so a reader (or a crash) never sees half a transcript. ``events.jsonl`` grows by appends of whole lines; a crash
mid-append can leave at most a torn last line, which :meth:`contextfold.archive.Archive.events` skips.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from .._files import append_bytes, private_dir, private_file, remove_orphan_temps, rotate
from ..archive import validate_session_id
from ..errors import StoreError

__all__ = ["FilesystemArchiveStore"]

_TEMP_PREFIX = ".tmp-"
# An appended file (events.jsonl) is rotated past this size, keeping this many older files (.1, .2): a session's
# event log stays under ~24 MiB however long it runs.
APPEND_MAX_BYTES = 8 * 1024 * 1024
APPEND_KEEP = 2
# Archive retention defaults: a session folder untouched for 30 days goes; past 2 GiB the oldest go first, but
# never one written within a day (a session that is still running). Transcripts are the only full record of what
# compaction removed, so they are kept longer than cached outputs.
ARCHIVE_MAX_AGE_S = 30 * 24 * 3600
ARCHIVE_MAX_BYTES = 2 * 1024**3
ARCHIVE_LIVE_S = 24 * 3600
# Automatic pruning (on a manager's close) runs at most this often per archive folder, so closing is cheap.
PRUNE_INTERVAL_S = 3600
_PRUNE_STAMP = ".pruned"
# File names are chosen by the archive, never by users; anything else is refused so a name cannot leave the folder.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,199}$")


def _check_name(name: str) -> str:
    if not _NAME_RE.match(name):
        raise ValueError(f"name {name!r}: use letters, digits, '.', '_' or '-', starting with a letter or digit")
    return name


class FilesystemArchiveStore:
    """An :class:`~contextfold.archive.ArchiveStore` in a local directory (created on first write).

    Args:
        root: the directory holding one sub-directory per session.
        fsync: flush each write to disk before it becomes visible (turn off only for tests or throwaway runs).
    """

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = True,
                 append_max_bytes: int = APPEND_MAX_BYTES, append_keep: int = APPEND_KEEP) -> None:
        self.root = Path(root)
        self.fsync = fsync
        self.append_max_bytes = append_max_bytes
        self.append_keep = append_keep
        self._opened: set[str] = set()

    def _dir(self, session_id: str) -> Path:
        return self.root / validate_session_id(session_id)

    def _open_dir(self, session_id: str) -> Path:
        """The session's folder, created 0700; the first time, temp files a killed writer left are removed."""
        folder = private_dir(self._dir(session_id))
        if session_id not in self._opened:
            remove_orphan_temps(folder, _TEMP_PREFIX)
            self._opened.add(session_id)
        return folder

    def write(self, session_id: str, name: str, data: bytes, *, exclusive: bool = False) -> None:
        """Write ``name`` atomically (temp file + rename); ``exclusive`` refuses to replace an existing file."""
        target = self._dir(session_id) / _check_name(name)
        try:
            folder = self._open_dir(session_id)
            fd, tmp = tempfile.mkstemp(prefix=_TEMP_PREFIX, dir=folder)  # 0600
        except OSError as exc:
            raise StoreError(f"archive {folder}: cannot write: {exc}") from exc
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                if self.fsync:
                    fh.flush()
                    os.fsync(fh.fileno())
            if exclusive:
                # link() fails when the target exists, which makes "create only if absent" atomic as well.
                os.link(tmp, target)
            else:
                os.replace(tmp, target)
        except FileExistsError:
            raise
        except OSError as exc:
            raise StoreError(f"archive {target}: cannot write: {exc}") from exc
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        if self.fsync:
            self._sync_dir(folder)

    def append(self, session_id: str, name: str, data: bytes) -> None:
        """Append ``data`` with one ``write`` on an ``O_APPEND`` descriptor (whole lines stay together).

        A file over ``append_max_bytes`` is rotated first (``name.1``, ``name.2``; the oldest is dropped).
        """
        target = self._dir(session_id) / _check_name(name)
        try:
            self._open_dir(session_id)
            rotate(target, max_bytes=self.append_max_bytes, keep=self.append_keep)
            append_bytes(target, data, fsync=self.fsync)
        except OSError as exc:
            raise StoreError(f"archive {target}: cannot append: {exc}") from exc

    def read(self, session_id: str, name: str) -> bytes | None:
        """The bytes of ``name``, or None."""
        target = self._dir(session_id) / _check_name(name)
        try:
            return target.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"archive {target}: cannot read: {exc}") from exc

    def names(self, session_id: str) -> list[str]:
        """The session's files (temporary files of writes in progress excluded)."""
        folder = self._dir(session_id)
        if not folder.is_dir():
            return []
        return sorted(p.name for p in folder.iterdir() if p.is_file() and not p.name.startswith(_TEMP_PREFIX))

    def sessions(self) -> list[str]:
        """Every session directory under the root."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))

    def prune(self, *, max_age_s: float | None = ARCHIVE_MAX_AGE_S, max_bytes: int | None = ARCHIVE_MAX_BYTES,
              live_s: float = ARCHIVE_LIVE_S, now: float | None = None) -> list[str]:
        """Delete whole session folders by age, then the oldest while over ``max_bytes``; returns their ids.

        A session's age is that of its newest file. Folders written within ``live_s`` are never deleted for size.
        """
        now = time.time() if now is None else now
        found: list[tuple[float, int, str]] = []
        for session in self.sessions():
            folder = self.root / session
            newest, size = 0.0, 0
            for entry in folder.iterdir():
                try:
                    info = entry.stat()
                except FileNotFoundError:
                    continue
                newest, size = max(newest, info.st_mtime), size + info.st_size
            found.append((newest, size, session))
        found.sort()
        removed: list[str] = []
        total = sum(size for _, size, _ in found)
        for newest, size, session in found:
            too_old = max_age_s is not None and now - newest > max_age_s
            too_big = max_bytes is not None and total > max_bytes and now - newest > live_s
            if too_old or too_big:
                shutil.rmtree(self.root / session, ignore_errors=True)
                removed.append(session)
                total -= size
        return removed

    def prune_if_due(self, now: float | None = None) -> list[str]:
        """:meth:`prune` with the defaults, at most once per ``PRUNE_INTERVAL_S`` for this folder (any process)."""
        now = time.time() if now is None else now
        stamp = self.root / _PRUNE_STAMP
        try:
            if now - stamp.stat().st_mtime < PRUNE_INTERVAL_S:
                return []
        except FileNotFoundError:
            if not self.root.is_dir():
                return []
        private_file(stamp)
        os.utime(stamp, (now, now))
        return self.prune(now=now)

    def close(self) -> None:
        """Nothing to release."""

    @staticmethod
    def _sync_dir(folder: Path) -> None:
        # The rename is durable only once the directory entry is on disk; not every platform can open a directory.
        try:
            fd = os.open(folder, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def __repr__(self) -> str:
        return f"FilesystemArchiveStore({str(self.root)!r})"
