"""The embedded :class:`~contextfold.stores.session.SessionStore`: one SQLite file (WAL), shared by local processes.

A save is one ``BEGIN IMMEDIATE`` transaction that checks the version and writes, so two processes saving from the
same version serialise on SQLite's write lock and the second one sees the moved version and gets
:class:`~contextfold.stores.session.SessionConflict`. Like the Redis store, it rewrites only the suffix that changed
when the file still holds the state this process last saw.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..messages import Message
from ._records import stored_count, stored_text
from ._sqlite import SQLiteFile
from .session import (
    SaveTracker,
    SessionConflict,
    SessionState,
    SessionStore,
    check_marks,
    check_session_id,
    check_version,
    checked_messages,
    decode_message,
    encode_message,
    new_token,
)

__all__ = ["DEFAULT_SESSIONS_FILENAME", "LocalSessionStore"]

# Its own file: sessions are rewritten at every turn, tool outputs rarely; apart, neither waits on the other's lock.
DEFAULT_SESSIONS_FILENAME = "sessions.sqlite3"
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
CREATE TABLE IF NOT EXISTS session_marks (
    session_id TEXT NOT NULL,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (session_id, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS session_saved (
    session_id TEXT PRIMARY KEY,
    saved_at REAL NOT NULL
) WITHOUT ROWID;
"""
# (session_saved came after version 1's first tables: a file without it gets it on open, and its sessions a time at
# the first prune, so that they go a full age later rather than at once.)


class LocalSessionStore(SQLiteFile, SessionStore):
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

    _what = "local session store"

    def __init__(self, directory: str | Path | None = None) -> None:
        self._tracker = SaveTracker()
        self._open(directory, filename=DEFAULT_SESSIONS_FILENAME, schema=_SCHEMA, schema_version=SCHEMA_VERSION)

    # -- SessionStore -------------------------------------------------------------------------------------------------
    def load(self, session_id: str) -> tuple[list[Message], int]:
        """The session's messages and version, read from one snapshot; ``([], 0)`` when never saved."""
        state = self.load_state(session_id)
        return state.messages, state.version

    def load_state(self, session_id: str) -> SessionState:
        """Messages, version and marks, read from one snapshot."""
        check_session_id(session_id)
        with self._snapshot(f"cannot load session {session_id!r} from {self.path}") as db:
            head = db.execute("SELECT version, token FROM sessions WHERE id = ?", (session_id,)).fetchone()
            rows = db.execute(
                "SELECT data FROM session_messages WHERE session_id = ? ORDER BY seq", (session_id,)
            ).fetchall()
            marks = dict(db.execute("SELECT name, value FROM session_marks WHERE session_id = ?",
                                    (session_id,)).fetchall())
        # Rows another writer left in the file are a StoreError naming the table, never a raw exception.
        place = f"{self.path} table session_messages"
        messages = [decode_message(r[0], session_id, i, place=place) for i, r in enumerate(rows)]
        marks_place = f"{self.path} table session_marks, session {session_id!r}"
        marks = {stored_text(name, marks_place): stored_text(value, marks_place) for name, value in marks.items()}
        if head is None:
            return SessionState(messages, 0, marks)
        version = stored_count(head[0], self._head_place(session_id), "version")
        self._tracker.remember(session_id, str(head[1]), messages)
        return SessionState(messages, version, marks)

    def save(self, session_id: str, messages: Sequence[Message], expected_version: int, *,
             marks: Mapping[str, str] | None = None) -> int:
        """Replace the session's messages if it is still at ``expected_version``; returns the new version.

        ``marks`` are set in the same transaction (other marks stay).

        Raises:
            SessionConflict: when another writer saved the session since ``expected_version``.
        """
        check_session_id(session_id)
        check_version(expected_version)
        frozen = checked_messages(messages)
        new_marks = check_marks(marks)
        known_token, same = self._tracker.common_prefix(session_id, frozen)
        token = new_token()
        with self._write(f"cannot save session {session_id!r} to {self.path}") as db:
            head = db.execute("SELECT version, token FROM sessions WHERE id = ?", (session_id,)).fetchone()
            actual = 0 if head is None else stored_count(head[0], self._head_place(session_id), "version")
            if actual != expected_version:
                raise SessionConflict(session_id, expected_version, actual)
            keep = same if head is not None and head[1] == known_token else 0
            db.execute("DELETE FROM session_messages WHERE session_id = ? AND seq >= ?", (session_id, keep))
            db.executemany(
                "INSERT INTO session_messages (session_id, seq, data) VALUES (?, ?, ?)",
                ((session_id, keep + i, encode_message(m, keep + i)) for i, m in enumerate(frozen[keep:])),
            )
            db.execute(
                "INSERT OR REPLACE INTO sessions (id, version, token) VALUES (?, ?, ?)", (session_id, actual + 1, token)
            )
            db.executemany("INSERT OR REPLACE INTO session_marks (session_id, name, value) VALUES (?, ?, ?)",
                           ((session_id, name, value) for name, value in new_marks.items()))
            db.execute("INSERT OR REPLACE INTO session_saved (session_id, saved_at) VALUES (?, ?)",
                       (session_id, time.time()))
        self._tracker.remember(session_id, token, frozen)
        return actual + 1

    def _head_place(self, session_id: str) -> str:
        return f"{self.path} table sessions, session {session_id!r}"

    def delete(self, session_id: str) -> bool:
        """Forget the session and its messages in one transaction."""
        check_session_id(session_id)
        self._tracker.forget(session_id)
        with self._write(f"cannot delete session {session_id!r} from {self.path}") as db:
            db.execute("DELETE FROM session_messages WHERE session_id = ?", (session_id,))
            db.execute("DELETE FROM session_marks WHERE session_id = ?", (session_id,))
            db.execute("DELETE FROM session_saved WHERE session_id = ?", (session_id,))
            found = db.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount > 0
        return found

    def prune(self, max_age_s: float, *, now: float | None = None) -> list[str]:
        """Delete the sessions not saved for ``max_age_s`` seconds; returns their ids.

        A stored session holds its view as the model saw it (secrets in clear): kept no longer than the archive
        keeps its transcripts. A session saved before saves were timed counts as saved now.
        """
        now = time.time() if now is None else now
        with self._write(f"cannot prune the sessions of {self.path}") as db:
            db.execute("INSERT OR IGNORE INTO session_saved (session_id, saved_at) SELECT id, ? FROM sessions", (now,))
            gone = [str(row[0]) for row in db.execute("SELECT session_id FROM session_saved WHERE saved_at < ?",
                                                      (now - max_age_s,)).fetchall()]
            for table, column in (("session_messages", "session_id"), ("session_marks", "session_id"),
                                  ("sessions", "id"), ("session_saved", "session_id")):
                db.executemany(f"DELETE FROM {table} WHERE {column} = ?", ((g,) for g in gone))
        for session_id in gone:
            self._tracker.forget(session_id)
        return gone
