"""The embedded :class:`~contextfold.stores.session.SessionStore`: one SQLite file (WAL), shared by local processes.

A save is one ``BEGIN IMMEDIATE`` transaction that checks the version and writes, so two processes saving from the
same version serialise on SQLite's write lock and the second one sees the moved version and gets
:class:`~contextfold.stores.session.SessionConflict`. Like the Redis store, it rewrites only the suffix that changed
when the file still holds the state this process last saw.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from ..errors import StoreError
from ..messages import Message
from .session import (
    SaveTracker,
    SessionConflict,
    SessionStore,
    check_session_id,
    check_version,
    checked_messages,
    decode_message,
    encode_message,
    new_token,
)

__all__ = ["DEFAULT_SESSIONS_FILENAME", "LocalSessionStore"]

# Relative to the working directory, next to the tool output cache (see stores/local.py).
DEFAULT_DIRECTORY = ".contextfold"
# Its own file: sessions are rewritten at every turn, tool outputs rarely; apart, neither waits on the other's lock.
DEFAULT_SESSIONS_FILENAME = "sessions.sqlite3"
# Another process may hold the write lock while it saves; wait this long before reporting the store as stuck.
BUSY_TIMEOUT_SECONDS = 30.0
# Bumped whenever the schema changes, so that an old file is recognised instead of misread.
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    token TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS session_messages (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
"""


class LocalSessionStore(SessionStore):
    """Session histories in ``<directory>/sessions.sqlite3``, safe for threads and processes.

    Args:
        directory: Where the database lives (created when missing); ``.contextfold/`` under the working directory
            by default. A path ending in ``.sqlite3``, ``.sqlite`` or ``.db`` names the file itself.

    Example:
        >>> import tempfile
        >>> from contextfold.messages import Message
        >>> with LocalSessionStore(tempfile.mkdtemp()) as store:
        ...     store.save("s1", [Message("user", "hi")], expected_version=0)
        ...     store.load("s1")[1]
        1
        1
    """

    def __init__(self, directory: str | Path | None = None) -> None:
        target = (Path(directory) if directory is not None else Path(DEFAULT_DIRECTORY)).absolute()
        self.path = target if target.suffix in {".sqlite3", ".sqlite", ".db"} else target / DEFAULT_SESSIONS_FILENAME
        self._lock = threading.RLock()
        self._tracker = SaveTracker()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn: sqlite3.Connection | None = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_SECONDS
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL is durable against a killed process in WAL mode; only an OS crash can lose the last saves.
            self._conn.execute("PRAGMA synchronous=NORMAL")
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                raise StoreError(f"{self.path}: schema version {version}, this contextfold reads {SCHEMA_VERSION}")
            self._conn.executescript(_SCHEMA)
            self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the local session store at {self.path}: {exc}") from exc

    # -- lifecycle ----------------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the database connection (idempotent)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> LocalSessionStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"the local session store at {self.path} is closed")
        return self._conn

    # -- SessionStore -------------------------------------------------------------------------------------------------
    def load(self, session_id: str) -> tuple[list[Message], int]:
        """The session's messages and version, read from one snapshot; ``([], 0)`` when never saved."""
        check_session_id(session_id)
        with self._lock:
            db = self._db()
            try:
                db.execute("BEGIN")
                try:
                    head = db.execute("SELECT version, token FROM sessions WHERE id = ?", (session_id,)).fetchone()
                    rows = db.execute(
                        "SELECT data FROM session_messages WHERE session_id = ? ORDER BY seq", (session_id,)
                    ).fetchall()
                finally:
                    db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot load session {session_id!r} from {self.path}: {exc}") from exc
        messages = [decode_message(r[0], session_id, i) for i, r in enumerate(rows)]
        if head is None:
            return messages, 0
        self._tracker.remember(session_id, str(head[1]), messages)
        return messages, int(head[0])

    def save(self, session_id: str, messages: Sequence[Message], expected_version: int) -> int:
        """Replace the session's messages if it is still at ``expected_version``; returns the new version.

        Raises:
            SessionConflict: when another writer saved the session since ``expected_version``.
        """
        check_session_id(session_id)
        check_version(expected_version)
        frozen = checked_messages(messages)
        known_token, same = self._tracker.common_prefix(session_id, frozen)
        token = new_token()
        with self._lock:
            db = self._db()
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    head = db.execute("SELECT version, token FROM sessions WHERE id = ?", (session_id,)).fetchone()
                    actual = 0 if head is None else int(head[0])
                    if actual != expected_version:
                        raise SessionConflict(session_id, expected_version, actual)
                    keep = same if head is not None and head[1] == known_token else 0
                    db.execute("DELETE FROM session_messages WHERE session_id = ? AND seq >= ?", (session_id, keep))
                    db.executemany(
                        "INSERT INTO session_messages (session_id, seq, data) VALUES (?, ?, ?)",
                        ((session_id, keep + i, encode_message(m)) for i, m in enumerate(frozen[keep:])),
                    )
                    db.execute(
                        "INSERT OR REPLACE INTO sessions (id, version, token) VALUES (?, ?, ?)",
                        (session_id, actual + 1, token),
                    )
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise StoreError(f"cannot save session {session_id!r} to {self.path}: {exc}") from exc
        self._tracker.remember(session_id, token, frozen)
        return actual + 1

    def delete(self, session_id: str) -> bool:
        """Forget the session and its messages in one transaction."""
        check_session_id(session_id)
        self._tracker.forget(session_id)
        with self._lock:
            db = self._db()
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    db.execute("DELETE FROM session_messages WHERE session_id = ?", (session_id,))
                    found = db.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount > 0
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise StoreError(f"cannot delete session {session_id!r} from {self.path}: {exc}") from exc
        return found
