"""The filesystem archive: ``{root}/{session_id}/transcript-pre-compact-001.jsonl``, ``summary-001.json``, ….

Whole files are written to a temporary file in the same directory, flushed to disk and renamed over the target,
so a reader (or a crash) never sees half a transcript. ``events.jsonl`` grows by appends of whole lines; a crash
mid-append can leave at most a torn last line, which :meth:`contextfold.archive.Archive.events` skips.

Session folders and their files are reached through a folder descriptor, never through a link the archive did not
make: a symbolic link planted as a session folder or as ``events.jsonl`` is refused, not followed, and a session
folder others may write is made 0700 first (:class:`contextfold._files.PrivateFolder`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import time
from collections.abc import Iterable
from pathlib import Path

from .._files import TEMP_PREFIX, PrivateFolder, UnsafePath, private_file
from ..archive import validate_session_id
from ..errors import CorruptRecord, StoreError

__all__ = ["FilesystemArchiveStore", "folder_name"]

_TEMP_PREFIX = TEMP_PREFIX  # the folder's own temporary files (left by a killed writer)
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


# A session's folder is named by its key (what ``archive_key`` makes of its id: letters, digits, ".", "_", "-"),
# but two keys that differ only in case (``Alice``/``alice``, ``_Org_3a42``/``_org_3a42``) would share one folder on
# a case-insensitive file system (macOS and Windows by default): a key holding capitals is kept lower-cased with the
# positions of its capitals in hex after a "+", which no key holds (``Alice`` -> ``alice+1``). At most
# 200 + 1 + 50 characters, under every file system's 255.
_CAPITALS = re.compile(r"[A-Z]")
_CASED_RE = re.compile(r"^(?P<body>[a-z0-9_][a-z0-9._\-]{0,199})\+(?P<mask>[1-9a-f][0-9a-f]{0,49})$")


def folder_name(key: str) -> str:
    """The folder of the session ``key``: the key itself, or lower-cased with its capitals' positions after "+"."""
    checked = validate_session_id(key)
    if not _CAPITALS.search(checked):
        return checked
    mask = sum(1 << i for i, c in enumerate(checked) if "A" <= c <= "Z")
    return f"{checked.lower()}+{mask:x}"


def _key_of_folder(name: str) -> str | None:
    """The session key a folder holds (:func:`folder_name` undone); None for a folder that is no session's."""
    if "+" not in name:
        try:
            return validate_session_id(name)  # (also a folder an earlier version named with capitals)
        except ValueError:
            return None
    found = _CASED_RE.fullmatch(name)
    if found is None:
        return None
    body, mask = found["body"], int(found["mask"], 16)
    key = "".join(c.upper() if mask >> i & 1 else c for i, c in enumerate(body))
    return key if mask >> len(body) == 0 and folder_name(key) == name else None


def _check_name(name: str) -> str:
    if not _NAME_RE.fullmatch(name):
        raise ValueError(f"name {name!r}: use letters, digits, '.', '_' or '-', starting with a letter or digit")
    return name


def _age_and_size(folder: Path) -> tuple[float, int] | None:
    """The newest modification time and total size of the regular files in ``folder``; None if it cannot be read.

    Entries are looked at, never through: a link planted in a session folder (a loop, a large file elsewhere, a file
    written a moment ago) neither stops retention nor steers which sessions it deletes. A folder that cannot be
    listed is left alone, the others are still pruned.
    """
    newest, size = 0.0, 0
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISREG(info.st_mode):
                    newest, size = max(newest, info.st_mtime), size + info.st_size
    except OSError:
        return None
    return newest, size


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
        return self.root / folder_name(session_id)

    def _folder(self, session_id: str, *, create: bool) -> PrivateFolder | None:
        """The session's folder through a descriptor (created 0700 when ``create``; None when missing otherwise).

        The root is the caller's and may be reached through links; the session folder and its files may not (see
        :class:`~contextfold._files.PrivateFolder`). The first time, temp files a killed writer left are removed.
        """
        name = folder_name(session_id)
        if name != session_id and session_id not in self._opened:
            self._adopt_legacy(session_id, name)
        folder = PrivateFolder.open(self.root, name, create=create)
        if folder is not None and session_id not in self._opened:
            folder.remove_orphan_temps(_TEMP_PREFIX)
            self._opened.add(session_id)
        return folder

    def _adopt_legacy(self, key: str, name: str) -> None:
        """Move the folder an earlier version named ``key`` as it is (capitals and all) to its name now, ``name``.

        Only a folder listed under exactly ``key`` is moved (on a case-insensitive file system ``alice``'s folder
        also answers to ``Alice``); a concurrent move by another process is fine.
        """
        if os.path.lexists(self.root / name):
            return
        try:
            listed = key in os.listdir(self.root)
        except (FileNotFoundError, NotADirectoryError):
            return
        if listed and not os.path.islink(self.root / key):
            with contextlib.suppress(FileNotFoundError, FileExistsError):
                os.rename(self.root / key, self.root / name)

    def write(self, session_id: str, name: str, data: bytes, *, exclusive: bool = False) -> None:
        """Write ``name`` atomically (temp file + rename); ``exclusive`` refuses to replace an existing file."""
        target = self._dir(session_id) / _check_name(name)
        try:
            folder = self._folder(session_id, create=True)
            assert folder is not None  # created
            with folder:
                folder.write(name, data, exclusive=exclusive, fsync=self.fsync)
        except FileExistsError:
            raise
        except OSError as exc:
            raise StoreError(f"archive {target}: cannot write: {exc}") from exc

    def write_chunks(self, session_id: str, name: str, chunks: Iterable[bytes], *, exclusive: bool = False) -> int:
        """:meth:`write` of the pieces of ``chunks`` joined, each written as it comes; returns the size."""
        target = self._dir(session_id) / _check_name(name)
        try:
            folder = self._folder(session_id, create=True)
            assert folder is not None  # created
            with folder:
                return folder.write(name, chunks, exclusive=exclusive, fsync=self.fsync)
        except FileExistsError:
            raise
        except OSError as exc:
            raise StoreError(f"archive {target}: cannot write: {exc}") from exc

    def append(self, session_id: str, name: str, data: bytes) -> None:
        """Append ``data`` with one ``write`` on an ``O_APPEND`` descriptor (whole lines stay together).

        A file over ``append_max_bytes`` is rotated first (``name.1``, ``name.2``; the oldest is dropped).
        """
        target = self._dir(session_id) / _check_name(name)
        try:
            folder = self._folder(session_id, create=True)
            assert folder is not None  # created
            with folder:
                folder.append(name, data, fsync=self.fsync, max_bytes=self.append_max_bytes, keep=self.append_keep)
        except OSError as exc:
            raise StoreError(f"archive {target}: cannot append: {exc}") from exc

    def read(self, session_id: str, name: str) -> bytes | None:
        """The bytes of ``name``, or None."""
        target = self._dir(session_id) / _check_name(name)
        try:
            folder = self._folder(session_id, create=False)
            if folder is None:
                return None
            with folder:
                return folder.read(name)
        except UnsafePath as exc:  # a link, FIFO or socket planted under the name: no outage, it stays as it is
            raise CorruptRecord(f"archive {target}: cannot read: {exc}") from exc
        except OSError as exc:
            raise StoreError(f"archive {target}: cannot read: {exc}") from exc

    def names(self, session_id: str) -> list[str]:
        """The session's files (temporary files of writes in progress and folders excluded).

        A link, FIFO or socket planted under a file's name is listed (reading it raises ``CorruptRecord``): left out,
        a transcript replaced by one vanished from every listing and restore without a word.
        """
        try:
            folder = self._folder(session_id, create=False)
            if folder is None:
                return []
            with folder:
                return [n for n in folder.names(plain_only=False) if not n.startswith(_TEMP_PREFIX)]
        except NotADirectoryError:
            return []
        except OSError as exc:
            raise StoreError(f"archive {self._dir(session_id)}: cannot list: {exc}") from exc

    def sessions(self) -> list[str]:
        """Every session directory under the root (links to folders are not sessions of this archive)."""
        if not self.root.is_dir():
            return []
        return sorted({key for key, _ in self._session_folders()})

    def _session_folders(self) -> list[tuple[str, Path]]:
        """Each session folder under the root with its key (a folder an earlier version named is listed as it is)."""
        if not self.root.is_dir():
            return []
        with os.scandir(self.root) as entries:
            named = [(_key_of_folder(e.name), self.root / e.name) for e in entries
                     if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")]
        return [(key, path) for key, path in named if key is not None]

    def prune(self, *, max_age_s: float | None = ARCHIVE_MAX_AGE_S, max_bytes: int | None = ARCHIVE_MAX_BYTES,
              live_s: float = ARCHIVE_LIVE_S, now: float | None = None) -> list[str]:
        """Delete whole session folders by age, then the oldest while over ``max_bytes``; returns their ids.

        A session's age is that of its newest file. Folders written within ``live_s`` are never deleted for size.
        """
        now = time.time() if now is None else now
        found: list[tuple[float, int, str, Path]] = []
        for session, folder in self._session_folders():
            measured = _age_and_size(folder)
            if measured is not None:
                found.append((*measured, session, folder))
        found.sort()
        removed: list[str] = []
        total = sum(size for _, size, _, _ in found)
        for newest, size, session, folder in found:
            too_old = max_age_s is not None and now - newest > max_age_s
            too_big = max_bytes is not None and total > max_bytes and now - newest > live_s
            if too_old or too_big:
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(session)
                total -= size
        return removed

    def prune_if_due(self, now: float | None = None) -> list[str]:
        """:meth:`prune` with the defaults, at most once per ``PRUNE_INTERVAL_S`` for this folder (any process)."""
        now = time.time() if now is None else now
        stamp = self.root / _PRUNE_STAMP
        try:
            if now - stamp.lstat().st_mtime < PRUNE_INTERVAL_S:
                return []
        except FileNotFoundError:
            if not self.root.is_dir():
                return []
        private_file(stamp)
        # A link planted as the stamp is stamped itself: following it would touch (or fail on) a file elsewhere.
        os.utime(stamp, (now, now), follow_symlinks=False)
        return self.prune(now=now)

    def close(self) -> None:
        """Nothing to release."""

    def __repr__(self) -> str:
        return f"FilesystemArchiveStore({str(self.root)!r})"
