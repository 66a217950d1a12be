"""What the embedded SQLite stores share: where the file goes, opening it in WAL mode, and transactions.

Each store keeps one connection (``check_same_thread=False``) behind a re-entrant lock: threads take turns, and
other processes are kept consistent by SQLite's own locking (WAL lets readers run during a write).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Self

from .._files import check_private_file, private_dir, private_file
from ..errors import StoreError

__all__ = ["BUSY_TIMEOUT_SECONDS", "DEFAULT_DIRECTORY", "SQLITE_SUFFIXES", "SQLiteFile"]

# Relative to the working directory, like .git: the cache and sessions belong to the project the agent works on.
DEFAULT_DIRECTORY = ".contextfold"
# A directory argument ending in one of these names the database file itself rather than its directory.
SQLITE_SUFFIXES = frozenset({".sqlite3", ".sqlite", ".db"})
# The database file and the files SQLite keeps beside it (write-ahead log, shared memory, rollback journal).
_COMPANIONS = ("", "-wal", "-shm", "-journal")
# Another process may hold the write lock briefly (WAL allows one writer); wait this long before failing.
BUSY_TIMEOUT_SECONDS = 30.0


def database_path(directory: str | Path | None, filename: str) -> Path:
    """The database file for a store's ``directory`` argument: ``<directory>/<filename>`` or the file named."""
    # Absolute from the start: a later chdir must not move the store.
    target = (Path(directory) if directory is not None else Path(DEFAULT_DIRECTORY)).absolute()
    return target if target.suffix in SQLITE_SUFFIXES else target / filename


class SQLiteFile:
    """One SQLite database in WAL mode, with a lifecycle (``close``, context manager) and transaction helpers.

    Subclasses name themselves in ``_what`` (used in every error) and call :meth:`_open` from ``__init__``.
    """

    _what: ClassVar[str] = "local store"
    path: Path
    _conn: sqlite3.Connection | None
    _lock: threading.RLock

    def _open(self, directory: str | Path | None, *, filename: str, schema: str, schema_version: int) -> None:
        """Open (creating when missing) the database and bring its schema to ``schema_version``."""
        self.path = database_path(directory, filename)
        self._lock = threading.RLock()
        self._conn = None
        try:
            private_dir(self.path.parent)
            # SQLite opens its files by name and follows links: a link planted as the database (or its journal)
            # would send the outputs elsewhere. Refused, as the archive refuses them (issue 21 §4).
            for companion in _COMPANIONS:
                check_private_file(Path(f"{self.path}{companion}"))
            private_file(self.path)  # 0600 before SQLite creates it; its -wal and -shm files copy the mode
            self._conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_SECONDS
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL is durable against a killed process in WAL mode (only an OS crash can lose the last commits).
            self._conn.execute("PRAGMA synchronous=NORMAL")
            # Deleted rows are overwritten, not left in free pages: retention deletes outputs and sessions that hold
            # secrets, and SQLite's own default (off) is what many builds keep (Debian's turns it on).
            self._conn.execute("PRAGMA secure_delete=ON")
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, schema_version):
                raise StoreError(f"{self.path}: schema version {version}, this contextfold reads {schema_version}")
            self._conn.executescript(schema)
            self._conn.execute(f"PRAGMA user_version={schema_version}")
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the {self._what} at {self.path}: {exc}") from exc

    # -- lifecycle ----------------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the database connection (idempotent)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"the {self._what} at {self.path} is closed")
        return self._conn

    # -- transactions -------------------------------------------------------------------------------------------------
    @contextmanager
    def _write(self, failure: str) -> Iterator[sqlite3.Connection]:
        """One write transaction, committed when the block ends and rolled back when it raises.

        ``BEGIN IMMEDIATE`` takes the write lock before the first read, so a check-then-write in the block cannot
        interleave with another process's. SQLite errors become :class:`StoreError` prefixed by ``failure``.
        """
        with self._lock:
            db = self._db()
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    yield db
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise StoreError(f"{failure}: {exc}") from exc

    @contextmanager
    def _snapshot(self, failure: str) -> Iterator[sqlite3.Connection]:
        """One read transaction, so that the reads in the block see a single version of the file."""
        with self._lock:
            db = self._db()
            try:
                db.execute("BEGIN")
                try:
                    yield db
                finally:
                    db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreError(f"{failure}: {exc}") from exc

    def _query(self, sql: str, params: tuple[object, ...] = ()) -> sqlite3.Cursor:
        """One statement outside an explicit transaction; SQLite errors become :class:`StoreError`."""
        try:
            return self._db().execute(sql, params)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: {exc}") from exc
