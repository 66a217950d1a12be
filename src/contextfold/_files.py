"""File writing shared by the stores, the JSONL exporter and the filesystem archive: private modes, appends, rotation.

What contextfold writes holds unredacted tool outputs (file contents, command output, environment dumps): the
files are the owner's alone (0600), the folders too (0700), and a ``.contextfold/`` folder carries a
``.gitignore`` so that none of it is committed by accident.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import stat
import time
from collections.abc import Iterable
from pathlib import Path

__all__ = ["DIR_MODE", "FILE_MODE", "GITIGNORE_NAME", "MAX_INPUT_BYTES", "TEMP_PREFIX", "InputTooLarge",
           "PrivateFolder", "UnsafePath", "append_bytes", "check_private_file", "private_dir", "private_file",
           "read_input", "remove_orphan_temps", "rotate"]

_log = logging.getLogger(__name__)

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


class UnsafePath(OSError):
    """A path contextfold will not use: a link it did not make, a file that is not a plain file, or not the owner's."""


# Names of the temporary files a PrivateFolder writes before renaming them into place.
TEMP_PREFIX = ".tmp-"
# Opened without following a link at the last component, never inherited by a child process.
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
# Group and other permission bits: a folder or file of ours has none of them.
_SHARED_BITS = 0o077


def _owned(info: os.stat_result, where: str) -> None:
    """Refuse what another user owns: they could swap its contents (or, for a folder, its entries) under us."""
    if info.st_uid != os.geteuid():
        raise UnsafePath(f"{where} belongs to another user (uid {info.st_uid}); contextfold writes only its own files")


class PrivateFolder:
    """A folder of ours opened through a descriptor: its files are read and written relative to it, no link followed.

    Open one with :meth:`open` (a folder ``name`` inside ``parent``; ``parent`` is the caller's and may be reached
    through links, ``name`` may not). A folder that is a symbolic link, or belongs to another user, is refused
    (:class:`UnsafePath`); one that others may read or write (a pre-created 0777 folder) is made 0700 first. Files
    are opened with ``O_NOFOLLOW`` and must be plain files of ours with one link: a planted link (symbolic or hard)
    can send neither a write nor a read elsewhere, and a FIFO cannot hang a read.
    """

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path

    @classmethod
    def open(cls, parent: Path, name: str, *, create: bool) -> PrivateFolder | None:
        """``parent/name`` opened (created 0700 when ``create``); None when it does not exist and not ``create``."""
        if create:
            private_dir(parent)
        try:
            parent_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, DIR_MODE, dir_fd=parent_fd)
            try:
                fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=parent_fd)
            except FileNotFoundError:
                return None
            except OSError as exc:  # ELOOP: a symbolic link; ENOTDIR: a file (or a link to one)
                if os.path.islink(parent / name):
                    raise UnsafePath(f"{parent / name} is a symbolic link; contextfold does not follow links it "
                                     "did not make") from exc
                raise
        finally:
            os.close(parent_fd)
        folder = cls(fd, parent / name)
        try:
            info = os.fstat(fd)
            _owned(info, str(folder.path))
            if info.st_mode & _SHARED_BITS:
                # Ours, but others could plant files in it (a pre-created 0777 folder): theirs no longer.
                os.fchmod(fd, DIR_MODE)
                _log.warning("%s was mode %o; made it 0700 (it holds tool outputs and transcripts)", folder.path,
                             stat.S_IMODE(info.st_mode))
        except BaseException:
            folder.close()
            raise
        return folder

    def close(self) -> None:
        """Release the descriptor (idempotent)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> PrivateFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- files ------------------------------------------------------------------------------------------------------
    def _open_file(self, name: str, flags: int, mode: int = FILE_MODE) -> int:
        """``name`` opened with ``flags``, checked to be a plain file of ours with a single link."""
        where = self.path / name
        try:
            fd = os.open(name, flags | _NOFOLLOW | os.O_NONBLOCK, mode, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafePath(f"{where} is a symbolic link; contextfold does not follow links it did not "
                                 "make") from exc
            if exc.errno == errno.ENXIO:  # a socket (or a FIFO opened to write with no reader)
                raise UnsafePath(f"{where} is not a regular file") from exc
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise UnsafePath(f"{where} is not a regular file")
            _owned(info, str(where))
            # More than one link: planted beside a file elsewhere, unless it is the temporary twin of an exclusive
            # write in progress (link, then unlink). None: replaced by a writer's rename after this open (a reader
            # then reads the whole old version, which is fine).
            if info.st_nlink > 1 and not (flags == os.O_RDONLY and info.st_nlink == 2 and self._has_temp_twin(info)):
                raise UnsafePath(f"{where} has {info.st_nlink} hard links; contextfold writes only files it made")
            if info.st_mode & _SHARED_BITS and flags & (os.O_WRONLY | os.O_RDWR):
                os.fchmod(fd, FILE_MODE)
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _has_temp_twin(self, info: os.stat_result) -> bool:
        """Whether a temporary file of this folder is the same file as ``info`` (an exclusive write linking it)."""
        with os.scandir(self.fd) as entries:
            for entry in entries:
                if entry.name.startswith(TEMP_PREFIX):
                    with contextlib.suppress(FileNotFoundError):
                        twin = entry.stat(follow_symlinks=False)
                        if (twin.st_ino, twin.st_dev) == (info.st_ino, info.st_dev):
                            return True
        return False

    def read(self, name: str) -> bytes | None:
        """The bytes of ``name``, or None when there is no such file."""
        try:
            fd = self._open_file(name, os.O_RDONLY)
        except FileNotFoundError:
            return None
        with os.fdopen(fd, "rb") as fh:
            return fh.read()

    def write(self, name: str, data: bytes | Iterable[bytes], *, exclusive: bool = False, fsync: bool = True) -> int:
        """Write ``name`` atomically: a 0600 temporary file in this folder, renamed over ``name``; returns the size.

        A link at ``name`` is replaced, never followed. ``exclusive``: FileExistsError when ``name`` exists.
        ``data``: the bytes, or pieces of them written as they come (a transcript streamed as it is encoded).
        """
        temp = f"{TEMP_PREFIX}{secrets.token_hex(8)}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, FILE_MODE, dir_fd=self.fd)
        size = 0
        try:
            with os.fdopen(fd, "wb") as fh:
                for chunk in (data,) if isinstance(data, bytes | bytearray | memoryview) else data:
                    size += fh.write(chunk)
                if fsync:
                    fh.flush()
                    os.fsync(fh.fileno())
            if exclusive:
                # link() fails when the target exists, which makes "create only if absent" atomic as well.
                os.link(temp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd, follow_symlinks=False)
            else:
                os.replace(temp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp, dir_fd=self.fd)
        if fsync:
            self.sync()
        return size

    def append(self, name: str, data: bytes, *, fsync: bool, max_bytes: int | None = None, keep: int = 0) -> None:
        """Append ``data`` to ``name`` (created 0600) with one ``O_APPEND`` write.

        Past ``max_bytes`` the file is rotated first, keeping ``keep`` older ones (as :func:`rotate` does).
        """
        if max_bytes is not None:
            self._rotate(name, max_bytes=max_bytes, keep=keep)
        fd = self._open_file(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def _rotate(self, name: str, *, max_bytes: int, keep: int) -> None:
        try:
            if os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_size <= max_bytes:
                return
            for n in range(keep, 0, -1):
                older = f"{name}.{n}"
                if n == keep:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(older, dir_fd=self.fd)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.replace(older, f"{name}.{n + 1}", src_dir_fd=self.fd, dst_dir_fd=self.fd)
            if keep > 0:
                os.replace(name, f"{name}.1", src_dir_fd=self.fd, dst_dir_fd=self.fd)
            else:
                os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            return  # another process rotated it first

    def names(self, *, plain_only: bool = True) -> list[str]:
        """The plain files in the folder (links and sub-folders left out), sorted.

        ``plain_only=False`` lists every entry but sub-folders: a link, FIFO or socket planted under a file's name
        too, so that a reader is told it cannot read it instead of not seeing it at all.
        """
        with os.scandir(self.fd) as entries:
            if plain_only:
                return sorted(e.name for e in entries if e.is_file(follow_symlinks=False))
            return sorted(e.name for e in entries if not e.is_dir(follow_symlinks=False))

    def remove_orphan_temps(self, prefix: str, *, grace_s: float = ORPHAN_GRACE_S) -> int:
        """Delete files named ``prefix…`` older than ``grace_s`` (left by a killed process); how many went."""
        removed = 0
        cutoff = time.time() - grace_s
        for name in self.names():
            if not name.startswith(prefix):
                continue
            with contextlib.suppress(FileNotFoundError):
                if os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(name, dir_fd=self.fd)
                    removed += 1
        return removed

    def sync(self) -> None:
        """Flush the folder's entries (a rename is durable only once its directory is on disk)."""
        with contextlib.suppress(OSError):
            os.fsync(self.fd)


def check_private_file(path: Path) -> None:
    """Refuse ``path`` unless it is missing or a plain file of ours with one link; make it 0600 if others may read it.

    A planted link above all is refused. For files a library opens by name (SQLite): checked right before the open,
    in a folder only its owner can change.
    """
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(f"{path} is a symbolic link; contextfold does not follow links it did not make") from exc
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePath(f"{path} is not a regular file")
        _owned(info, str(path))
        if info.st_nlink > 1:
            raise UnsafePath(f"{path} has {info.st_nlink} hard links; contextfold uses only files it made")
        if info.st_mode & _SHARED_BITS:
            os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


# The most a command reads from one input file: recorded sessions are megabytes; more is a mistake (or /dev/zero).
MAX_INPUT_BYTES = 512 * 1024 * 1024
_READ_CHUNK = 1024 * 1024


class InputTooLarge(OSError):
    """An input file over :data:`MAX_INPUT_BYTES`: reading it whole would exhaust memory."""


def read_input(path: str | os.PathLike[str], *, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a file a user named as input, refusing what would hang or exhaust memory.

    A regular file is read up to ``limit`` bytes; a pipe or FIFO too (``<(command)`` works), but a FIFO nobody
    writes to reads as empty instead of waiting forever; a device (``/dev/zero``, a terminal) or a socket is refused.

    Raises:
        IsADirectoryError, FileNotFoundError, PermissionError: as ``open`` does.
        UnsafePath: not a regular file or a pipe.
        InputTooLarge: over ``limit`` bytes.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # non-blocking: opening a FIFO never waits
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder", str(path))
        if not (stat.S_ISREG(info.st_mode) or stat.S_ISFIFO(info.st_mode)):
            device = stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
            kind = "a device" if device else "a socket or special file"
            raise UnsafePath(f"{kind}, not a regular file: give a file (or a pipe) to read")
        if stat.S_ISREG(info.st_mode) and info.st_size > limit:
            raise InputTooLarge(f"{info.st_size:,} bytes, over the {limit:,} a command reads")
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                chunk = os.read(fd, _READ_CHUNK)
            except BlockingIOError:  # a writer is connected but has not written yet: wait for it
                import select

                select.select([fd], [], [])
                continue
            if not chunk:  # end of file, or a FIFO with no writer
                if size == 0 and stat.S_ISFIFO(info.st_mode):
                    raise UnsafePath("a FIFO nothing was written to (contextfold reads what a writer already "
                                     "sends; it does not wait for one)")
                return b"".join(chunks)
            size += len(chunk)
            if size > limit:
                raise InputTooLarge(f"more than the {limit:,} bytes a command reads")
            chunks.append(chunk)
    finally:
        os.close(fd)
