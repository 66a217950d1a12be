"""A :class:`~contextfold.stores.session.SessionStore` on Redis: any worker of a fleet can pick up any session.

Per session, under ``prefix`` (default ``contextfold:session``): ``<prefix>:<id>:head`` is a hash with ``version``,
``token`` (a random id of the stored state) and the saved marks (``mark:<name>``), ``<prefix>:<id>:messages`` a list
with one JSON message per item.
A save WATCHes the head, checks the version and commits in one MULTI/EXEC, so that of two workers saving from the
same version exactly one wins and the other gets :class:`~contextfold.stores.session.SessionConflict`. When the
store still holds the state this process last saw, only the changed suffix is sent (an agent turn appends a few
messages to thousands).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from ..messages import Message
from ._records import stored_count, stored_text
from .redis_blob import DEFAULT_URL, import_redis
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

if TYPE_CHECKING:
    import redis

__all__ = ["DEFAULT_SESSION_PREFIX", "RedisSessionStore"]

# Apart from the blob prefix so that GC of tool outputs and session listings never see each other's keys.
DEFAULT_SESSION_PREFIX = "contextfold:session"
# Messages per RPUSH inside the transaction: bounds the size of one command when a long history is rewritten.
MESSAGES_PER_PUSH = 500
# Head fields holding marks start with this, apart from ``version`` and ``token``.
_MARK = "mark:"


class RedisSessionStore(SessionStore):
    """Session histories in Redis with optimistic concurrency (WATCH/MULTI on a version per session).

    Args:
        url: ``redis://[user:password@]host:port/db``; ignored when ``client`` is given.
        prefix: Key prefix of everything this store writes.
        client: An existing ``redis.Redis`` client (``decode_responses`` False).
        ttl_seconds: Expire a session this long after its last save (None keeps it until deleted).

    Example:
        >>> store = RedisSessionStore("redis://127.0.0.1:6379/0")  # doctest: +SKIP
        >>> messages, version = store.load("session-1")  # doctest: +SKIP
        >>> store.save("session-1", [*messages, Message("user", "next")], expected_version=version)  # doctest: +SKIP
        1
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        prefix: str = DEFAULT_SESSION_PREFIX,
        client: redis.Redis | None = None,
        ttl_seconds: int | None = None,
    ) -> None:
        module = import_redis()
        if ttl_seconds is not None and ttl_seconds <= 0:
            raise ValueError(f"ttl_seconds must be > 0 or None, got {ttl_seconds}")
        self.url = url
        self.prefix = prefix.rstrip(":")
        self.ttl_seconds = ttl_seconds
        self._errors: tuple[type[BaseException], ...] = (module.RedisError,)
        self._watch_error: type[BaseException] = module.WatchError
        try:
            self._client: redis.Redis = client if client is not None else module.Redis.from_url(url)
        except ValueError as exc:
            raise StoreError(f"bad Redis URL {url!r}: {exc}") from exc
        self._tracker = SaveTracker()

    def _keys(self, session_id: str) -> tuple[str, str]:
        base = f"{self.prefix}:{check_session_id(session_id)}"
        return f"{base}:head", f"{base}:messages"

    def _fail(self, action: str, session_id: str, exc: BaseException) -> StoreError:
        return StoreError(f"Redis session store at {self.url}: cannot {action} session {session_id!r}: {exc}")

    # -- lifecycle ----------------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection pool (idempotent)."""
        self._client.close()

    def __enter__(self) -> RedisSessionStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- SessionStore -------------------------------------------------------------------------------------------------
    def load(self, session_id: str) -> tuple[list[Message], int]:
        """The session's messages and version, read in one transaction; ``([], 0)`` when never saved."""
        state = self.load_state(session_id)
        return state.messages, state.version

    def load_state(self, session_id: str) -> SessionState:
        """Messages, version and marks, read in one transaction."""
        head, items = self._keys(session_id)
        try:
            pipe = self._client.pipeline(transaction=True)
            pipe.hgetall(head)
            pipe.lrange(items, 0, -1)
            fields, raw = pipe.execute()
        except self._errors as exc:
            raise self._fail("load", session_id, exc) from exc
        # Anything another writer left under our keys is a StoreError naming the key, never a raw exception.
        place = f"Redis key {head!r}"
        head_fields = {stored_text(k, place): stored_text(v, place) for k, v in fields.items()}
        version = stored_count(head_fields.get("version", 0), place, "version")
        items_place = f"Redis key {items!r}"
        messages = [decode_message(r, session_id, i, place=items_place) for i, r in enumerate(raw)]
        token = head_fields.get("token")
        if token is not None:
            self._tracker.remember(session_id, token, messages)
        marks = {k[len(_MARK):]: v for k, v in head_fields.items() if k.startswith(_MARK)}
        return SessionState(messages, version, marks)

    def save(self, session_id: str, messages: Sequence[Message], expected_version: int, *,
             marks: Mapping[str, str] | None = None) -> int:
        """Replace the session's messages if it is still at ``expected_version``; returns the new version.

        ``marks`` are stored in the same transaction (marks not named keep their values).

        A connection lost during the commit raises :class:`SessionConflict` or :class:`StoreError`: the save may or
        may not have landed, and loading again tells which (a mark saved with it says so without comparing).

        Raises:
            SessionConflict: when another worker saved the session since ``expected_version``.
            StoreError: when Redis cannot be reached.
        """
        head, items = self._keys(session_id)
        check_version(expected_version)
        frozen = checked_messages(messages)
        head_fields: dict[Any, Any] = {_MARK + k: v for k, v in check_marks(marks).items()}
        known_token, same = self._tracker.common_prefix(session_id, frozen)
        # Encoded before WATCH: keep the watched window short.
        tail = [encode_message(m, same + i) for i, m in enumerate(frozen[same:])]
        token = new_token()
        try:
            with self._client.pipeline(transaction=True) as pipe:
                pipe.watch(head)  # type: ignore[no-untyped-call]
                stored_number, stored_token = pipe.hmget(head, "version", "token")
                actual = 0 if stored_number is None else stored_count(stored_number, f"Redis key {head!r}", "version")
                if actual != expected_version:
                    raise SessionConflict(session_id, expected_version, actual)
                keep = same if known_token is not None and stored_token == known_token.encode() else 0
                rows = tail if keep == same else \
                    [encode_message(m, keep + i) for i, m in enumerate(frozen[keep:same])] + tail
                pipe.multi()
                if keep:
                    pipe.ltrim(items, 0, keep - 1)
                else:
                    pipe.delete(items)
                for start in range(0, len(rows), MESSAGES_PER_PUSH):
                    pipe.rpush(items, *rows[start : start + MESSAGES_PER_PUSH])
                head_fields.update(version=actual + 1, token=token)
                pipe.hset(head, mapping=head_fields)
                if self.ttl_seconds is not None:
                    pipe.expire(head, self.ttl_seconds)
                    pipe.expire(items, self.ttl_seconds)
                pipe.execute()
        except SessionConflict:
            raise
        except self._watch_error:
            # Also what redis-py raises when the connection drops while a key is watched: the commit may have
            # happened, so what we remember of the stored state is no longer known to be true.
            self._tracker.forget(session_id)
            raise SessionConflict(session_id, expected_version, self._version(session_id)) from None
        except self._errors as exc:
            self._tracker.forget(session_id)
            raise self._fail("save", session_id, exc) from exc
        self._tracker.remember(session_id, token, frozen)
        return actual + 1

    def delete(self, session_id: str) -> bool:
        """Forget the session (a worker saving it concurrently gets a conflict)."""
        head, items = self._keys(session_id)
        self._tracker.forget(session_id)
        try:
            return bool(self._client.delete(head, items))
        except self._errors as exc:
            raise self._fail("delete", session_id, exc) from exc

    def version(self, session_id: str) -> int:
        """The stored version of the session (0 when never saved), without loading its messages."""
        return self._version(session_id)

    def _version(self, session_id: str) -> int:
        head, _ = self._keys(session_id)
        try:
            value: Any = self._client.hget(head, "version")
        except self._errors as exc:
            raise self._fail("read the version of", session_id, exc) from exc
        return 0 if value is None else stored_count(value, f"Redis key {head!r}", "version")
