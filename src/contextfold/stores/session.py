"""The :class:`SessionStore` protocol: a session's history, shared by workers with optimistic concurrency.

A worker loads ``(messages, version)``, works, and saves with the version it loaded; a save against a version that
moved on (another worker saved meanwhile) raises :class:`SessionConflict` instead of silently overwriting. The
caller loads again and redoes its step. Versions start at 0 (an unknown session) and go up by one per save.

Saving usually appends a few messages to what was loaded, so stores remember what they last loaded or saved per
session (:class:`SaveTracker`) and write only the changed suffix when nobody else wrote in between.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ..errors import CorruptRecord, InvalidHistory, StoreError
from ..formats._common import MAX_NESTING, check_nesting, json_problem
from ..messages import Message
from ..serialize import json_text, message_from_dict, message_to_dict

__all__ = [
    "MAX_SESSION_ID_LENGTH",
    "MemorySessionStore",
    "SaveTracker",
    "SessionConflict",
    "SessionState",
    "SessionStore",
    "check_marks",
    "check_session_id",
    "check_storable",
    "check_version",
    "checked_messages",
    "decode_message",
    "encode_message",
    "new_token",
]

# Session ids become parts of Redis keys and SQLite values; a bound keeps keys short and a typo'd blob out.
MAX_SESSION_ID_LENGTH = 512


class SessionConflict(StoreError):
    """A save based on a stale version: another worker saved the session since it was loaded."""

    def __init__(self, session_id: str, expected: int, actual: int) -> None:
        self.session_id = session_id
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"session {session_id!r}: expected version {expected}, but the store holds version {actual} "
            "(another worker saved it meanwhile); load it again and redo the step"
        )


@runtime_checkable
class SessionStore(Protocol):
    """Histories by session id, with a version per save for optimistic concurrency.

    Example:
        >>> from contextfold.messages import Message
        >>> store = MemorySessionStore()
        >>> messages, version = store.load("s1")
        >>> (messages, version)
        ([], 0)
        >>> store.save("s1", [Message("user", "hi")], expected_version=version)
        1
    """

    def load(self, session_id: str) -> tuple[list[Message], int]:
        """The session's messages and version; ``([], 0)`` for a session never saved."""
        ...

    def save(self, session_id: str, messages: Sequence[Message], expected_version: int) -> int:
        """Replace the session's messages if it is still at ``expected_version``; returns the new version.

        Raises:
            SessionConflict: when the stored version is not ``expected_version``.
        """
        ...

    def delete(self, session_id: str) -> bool:
        """Forget the session; True when it was there."""
        ...

    def close(self) -> None:
        """Release connections and files (a no-op by default)."""
        return None


@dataclass(frozen=True, slots=True)
class SessionState:
    """A session as loaded: its messages, its version, and the marks saved with it (see ``save(marks=)``).

    Marks are small strings stored atomically with the messages, e.g. the last turn a fleet worker applied, so that
    a turn retried after a worker died is recognised as done.
    """

    messages: list[Message]
    version: int
    marks: Mapping[str, str] = field(default_factory=dict)


def check_marks(marks: Mapping[str, str] | None) -> dict[str, str]:
    """``marks`` as a dict, or a ValueError naming the bad entry (names and values are non-empty-named strings)."""
    out: dict[str, str] = {}
    for name, value in (marks or {}).items():
        if not isinstance(name, str) or not name or not isinstance(value, str):
            raise ValueError(f"marks: expected str names and values, got {name!r}: {value!r}")
        out[name] = value
    return out


def check_session_id(session_id: object) -> str:
    """``session_id`` itself, or a ValueError saying what is wrong with it."""
    if not isinstance(session_id, str) or not session_id or len(session_id) > MAX_SESSION_ID_LENGTH:
        raise ValueError(f"session_id must be a non-empty string of at most {MAX_SESSION_ID_LENGTH} characters, "
                         f"got {session_id!r:.80}")
    return session_id


def check_version(expected_version: object) -> int:
    """``expected_version`` itself, or a ValueError (booleans and negative numbers are no versions)."""
    if isinstance(expected_version, bool) or not isinstance(expected_version, int) or expected_version < 0:
        raise ValueError(f"expected_version must be an int >= 0 (0 for a new session), got {expected_version!r}")
    return expected_version


def new_token() -> str:
    """A fresh identifier of one saved state: equal tokens mean the very same stored list."""
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class _Known:
    token: str
    messages: tuple[Message, ...]


class SaveTracker:
    """What this process last loaded or saved per session, to write only the part that changed.

    Each stored state carries a random token. When the store still holds the token we remember, its messages are
    the ones we remember, so a save may keep their common prefix and write only the rest.
    """

    def __init__(self) -> None:
        self._known: dict[str, _Known] = {}
        self._lock = threading.Lock()

    def remember(self, session_id: str, token: str, messages: Sequence[Message]) -> None:
        """Record the state ``token`` as holding ``messages``."""
        with self._lock:
            self._known[session_id] = _Known(token, tuple(messages))

    def forget(self, session_id: str) -> None:
        """Drop what is known about the session."""
        with self._lock:
            self._known.pop(session_id, None)

    def common_prefix(self, session_id: str, messages: Sequence[Message]) -> tuple[str | None, int]:
        """(token of the remembered state or None, how many leading ``messages`` it already holds)."""
        with self._lock:
            known = self._known.get(session_id)
        if known is None:
            return None, 0
        old = known.messages
        n = min(len(old), len(messages))
        same = 0
        # Identity first: the messages a caller saves are usually the very objects it loaded.
        while same < n and (old[same] is messages[same] or old[same] == messages[same]):
            same += 1
        return known.token, same


class MemorySessionStore(SessionStore):
    """Sessions in a dict, safe to share between threads: the test double, and the choice for one process.

    Example:
        >>> store = MemorySessionStore()
        >>> store.save("s", [], expected_version=0)
        1
        >>> store.load("s")
        ([], 1)
    """

    def __init__(self) -> None:
        self._data: dict[str, tuple[tuple[Message, ...], int]] = {}
        self._marks: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

    def load(self, session_id: str) -> tuple[list[Message], int]:
        """The session's messages and version."""
        check_session_id(session_id)
        with self._lock:
            messages, version = self._data.get(session_id, ((), 0))
        return list(messages), version

    def load_state(self, session_id: str) -> SessionState:
        """Messages, version and marks, read together."""
        check_session_id(session_id)
        with self._lock:
            messages, version = self._data.get(session_id, ((), 0))
            marks = dict(self._marks.get(session_id, {}))
        return SessionState(list(messages), version, marks)

    def save(self, session_id: str, messages: Sequence[Message], expected_version: int, *,
             marks: Mapping[str, str] | None = None) -> int:
        """Replace the messages if the session is still at ``expected_version``; ``marks`` are set with them."""
        check_session_id(session_id)
        check_version(expected_version)
        frozen = checked_messages(messages)
        for i, m in enumerate(frozen):  # (kept as objects: checked as the other stores check what they encode)
            if m.tool_calls:
                check_storable(m, i)
        new_marks = check_marks(marks)
        with self._lock:
            _, actual = self._data.get(session_id, ((), 0))
            if actual != expected_version:
                raise SessionConflict(session_id, expected_version, actual)
            self._data[session_id] = (frozen, actual + 1)
            self._marks.setdefault(session_id, {}).update(new_marks)
        return actual + 1

    def delete(self, session_id: str) -> bool:
        """Forget the session."""
        check_session_id(session_id)
        with self._lock:
            self._marks.pop(session_id, None)
            return self._data.pop(session_id, None) is not None


def checked_messages(messages: Sequence[Message]) -> tuple[Message, ...]:
    """``messages`` as a tuple, or :class:`InvalidHistory` naming the first item that is not a Message."""
    out = tuple(messages)
    for i, m in enumerate(out):
        if not isinstance(m, Message):
            raise InvalidHistory(f"expected a contextfold Message, got {type(m).__name__}", index=i)
    return out


def check_storable(m: Message, index: int) -> None:
    """:class:`InvalidHistory` naming the field when ``m`` has a tool call whose arguments are not a string.

    A dict there (what some SDKs hand over) was written as a JSON object that no later load accepted: the session
    was refused at every load. Checked where a message is written (only the messages a save writes: a save of a
    100,000-message session that checked them all took 12 ms more), so nothing of such a save is written.
    """
    for k, call in enumerate(m.tool_calls):
        if type(call.arguments) is not str:
            raise InvalidHistory(f"arguments of tool call {call.id!r} must be a JSON string (json.dumps them), got "
                                 f"{type(call.arguments).__name__}", index=index, field=f"tool_calls[{k}].arguments")


def encode_message(m: Message, index: int = 0) -> str:
    """One message as compact JSON (contextfold's lossless form), the unit the backends store.

    ``index``: the message's position in its session, named when it cannot be stored (:func:`check_storable`).
    """
    if m.tool_calls:
        check_storable(m, index)
    return json_text(message_to_dict(m), separators=(",", ":"))


def decode_message(raw: object, session_id: str, index: int, *, place: str | None = None) -> Message:
    """The message stored as ``raw``, or :class:`StoreError` naming where it is stored and what is wrong.

    Whatever another writer left there: no JSON, no text at all, containers nested past the JSON reader's limit
    (RecursionError) or deeper than a message may nest (every later walk of a message recurses).

    Args:
        raw: The stored record.
        session_id: Its session, named in the error.
        index: Its position in the session's messages.
        place: Where it is stored (a key, a file), named in the error; the session by default.
    """
    try:
        if not isinstance(raw, str | bytes):
            raise InvalidHistory(f"a stored message must be JSON text, got {type(raw).__name__}", index=index)
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise InvalidHistory(json_problem(exc), index=index) from None
        if _opening_brackets(raw) > MAX_NESTING:  # deeper nesting needs that many: most records skip the walk
            check_nesting(obj, index=index)
        return message_from_dict(obj, index=index)
    except InvalidHistory as exc:
        where = f"{place}, session {session_id!r}" if place is not None else f"session {session_id!r}"
        detail = f"{exc.field}: {exc.problem}" if exc.field else exc.problem
        raise CorruptRecord(f"{where}: stored message {index} is unreadable: {detail}") from exc


def _opening_brackets(raw: str | bytes) -> int:
    """How many ``[`` and ``{`` the record holds (in strings too): an upper bound of its nesting, counted in C."""
    if isinstance(raw, str):
        return raw.count("[") + raw.count("{")
    return raw.count(b"[") + raw.count(b"{")
