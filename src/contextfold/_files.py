"""File writing shared by the stores, the JSONL exporter and the filesystem archive: private modes, appends, rotation.

What contextfold writes holds unredacted tool outputs (file contents, command output, environment dumps): the
files are the owner's alone (0600), the folders too (0700), and a ``.contextfold/`` folder carries a
``.gitignore`` so that none of it is committed by accident.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

__all__ = ["DIR_MODE", "FILE_MODE", "GITIGNORE_NAME", "append_bytes", "private_dir", "private_file",
           "remove_orphan_temps", "rotate"]

# Owner only: tool outputs, transcripts and events are as sensitive as the files the agent read.
FILE_MODE = 0o600
DIR_MODE = 0o700
# A temporary file older than this is an orphan of a killed process: a live write finishes in well under a second.
ORPHAN_GRACE_S = 60.0
# The folder name the embedded defaults use (relative to the working directory, like .git).
STATE_DIR_NAME = ".contextfold"
GITIGNORE_NAME = ".gitignore"
# Ignore everything in the folder, the .gitignore included, so `git add -A` never picks any of it up.
_GITIGNORE_TEXT = "# created by contextfold: tool outputs, transcripts and events stay out of version control\n*\n"


def private_dir(path: Path) -> Path:
    """Create ``path`` and its missing parents with mode 0700; a ``.contextfold`` folder gets its ``.gitignore``.

    Folders that already exist keep their mode (they may be the user's own), except a ``.contextfold`` folder,
    which is ours.
    """
    missing: list[Path] = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue  # another process made it meanwhile
        os.chmod(folder, DIR_MODE)  # mkdir's mode is filtered by the umask
    for folder in (path, *path.parents):
        if folder.name == STATE_DIR_NAME:
            _ensure_gitignore(folder)
            break
    return path


def _ensure_gitignore(folder: Path) -> None:
    with contextlib.suppress(PermissionError):  # someone else's folder: leave its mode alone
        os.chmod(folder, DIR_MODE)  # ours even when an older version made it 0755
    target = folder / GITIGNORE_NAME
    if target.exists():
        return
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return
    try:
        os.write(fd, _GITIGNORE_TEXT.encode())
    finally:
        os.close(fd)


def private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 when missing (before SQLite opens it, which would use the umask)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return
    os.close(fd)


def append_bytes(path: Path, data: bytes, *, fsync: bool) -> None:
    """Append ``data`` to ``path`` (created 0600 if missing) with one ``O_APPEND`` write.

    O_APPEND makes each write land whole at the end, so concurrent appenders never interleave within a batch; the
    loop only covers a short write (disk nearly full, a signal), where finishing the batch beats losing its tail.
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def rotate(path: Path, *, max_bytes: int, keep: int) -> bool:
    """When ``path`` is over ``max_bytes``, shift it to ``path.1`` (``.1`` to ``.2``, …, dropping ``.keep``).

    Returns whether it rotated. Renames are atomic, so a concurrent appender either lands in the old file (now
    ``.1``) or creates a fresh one: no line is torn. Two processes rotating at once lose at most one old file.
    """
    try:
        if path.stat().st_size <= max_bytes:
            return False
    except FileNotFoundError:
        return False
    try:
        for n in range(keep, 0, -1):
            older = path.with_name(f"{path.name}.{n}")
            if n == keep:
                older.unlink(missing_ok=True)
            else:
                newer = path.with_name(f"{path.name}.{n + 1}")
                if older.exists():
                    os.replace(older, newer)
        if keep > 0:
            os.replace(path, path.with_name(f"{path.name}.1"))
        else:
            path.unlink(missing_ok=True)
    except FileNotFoundError:
        return False  # another process rotated it first
    return True


def remove_orphan_temps(folder: Path, prefix: str, *, grace_s: float = ORPHAN_GRACE_S) -> int:
    """Delete files named ``prefix…`` in ``folder`` older than ``grace_s`` (left by a killed process).

    Returns how many were removed. The grace period spares a temp file another process is writing right now
    (writes finish in well under a second).
    """
    removed = 0
    try:
        entries = list(folder.iterdir())
    except OSError:
        return 0
    cutoff = time.time() - grace_s
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        try:
            if entry.is_file() and entry.stat().st_mtime < cutoff:
                entry.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed
