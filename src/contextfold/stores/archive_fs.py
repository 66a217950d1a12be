"""The filesystem archive: ``{root}/{session_id}/transcript-pre-compact-001.jsonl``, ``summary-001.json``, ….

Whole files are written to a temporary file in the same directory, flushed to disk and renamed over the target,
so a reader (or a crash) never sees half a transcript. ``events.jsonl`` grows by appends of whole lines; a crash
mid-append can leave at most a torn last line, which :meth:`contextfold.archive.Archive.events` skips.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from .._files import append_bytes
from ..archive import validate_session_id
from ..errors import StoreError

__all__ = ["FilesystemArchiveStore"]

_TEMP_PREFIX = ".tmp-"
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

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.root = Path(root)
        self.fsync = fsync

    def _dir(self, session_id: str) -> Path:
        return self.root / validate_session_id(session_id)

    def write(self, session_id: str, name: str, data: bytes, *, exclusive: bool = False) -> None:
        """Write ``name`` atomically (temp file + rename); ``exclusive`` refuses to replace an existing file."""
        folder = self._dir(session_id)
        target = folder / _check_name(name)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=_TEMP_PREFIX, dir=folder)
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
        """Append ``data`` with one ``write`` on an ``O_APPEND`` descriptor (whole lines stay together)."""
        folder = self._dir(session_id)
        target = folder / _check_name(name)
        try:
            folder.mkdir(parents=True, exist_ok=True)
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
