"""A queue of session ids on Redis with at most one pending entry per session: a fleet's background-compaction jobs.

``offer`` adds a session unless it is already waiting (a set of pending ids and a list, changed together by one
script); ``take`` pops the oldest and clears its pending flag, so that a turn landing while the job runs can queue
the session again. Needs the ``redis`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from ._records import stored_text
from .redis_blob import DEFAULT_URL, import_redis

if TYPE_CHECKING:
    import redis

__all__ = ["DEFAULT_QUEUE", "RedisJobQueue"]

DEFAULT_QUEUE = "contextfold:jobs:compact"

# KEYS: pending set, list. ARGV: session id. Queued only when not already pending.
_OFFER = """
if redis.call('SADD', KEYS[1], ARGV[1]) == 1 then
  redis.call('RPUSH', KEYS[2], ARGV[1])
  return 1
end
return 0
"""


class RedisJobQueue:
    """Session ids waiting for a job, each at most once.

    Example:
        >>> queue = RedisJobQueue("redis://127.0.0.1:6379/0")  # doctest: +SKIP
        >>> queue.offer("s1"), queue.offer("s1")  # doctest: +SKIP
        (True, False)
        >>> queue.take(timeout=1)  # doctest: +SKIP
        's1'
    """

    def __init__(self, url: str = DEFAULT_URL, *, name: str = DEFAULT_QUEUE, client: redis.Redis | None = None) -> None:
        module = import_redis()
        self.url = url
        self.name = name
        self._pending = f"{name}:pending"
        self._list = f"{name}:list"
        self._errors: tuple[type[BaseException], ...] = (module.RedisError,)
        try:
            self._client: redis.Redis = client if client is not None else module.Redis.from_url(url)
        except ValueError as exc:
            raise StoreError(f"bad Redis URL {url!r}: {exc}") from exc
        self._offer = self._client.register_script(_OFFER)

    def offer(self, session_id: str) -> bool:
        """Queue ``session_id`` unless it is waiting already; True when queued."""
        try:
            return bool(self._offer(keys=[self._pending, self._list], args=[session_id]))
        except self._errors as exc:
            raise StoreError(f"Redis queue {self.name!r} at {self.url}: cannot offer {session_id!r}: {exc}") from exc

    def take(self, timeout: float = 0) -> str | None:
        """The oldest waiting session id (its pending flag cleared), or None after ``timeout`` seconds (0: now)."""
        try:
            if timeout > 0:
                popped: Any = self._client.blpop([self._list], timeout=timeout)
                raw = popped[1] if popped else None
            else:
                raw = self._client.lpop(self._list)
            if raw is None:
                return None
            # A job another writer pushed that is no UTF-8 is an error naming the queue (it is taken off it).
            session_id = stored_text(raw, f"Redis queue {self._list!r}")
            self._client.srem(self._pending, session_id)
        except self._errors as exc:
            raise StoreError(f"Redis queue {self.name!r} at {self.url}: cannot take a job: {exc}") from exc
        return session_id

    def __len__(self) -> int:
        try:
            return int(self._client.llen(self._list))
        except self._errors as exc:
            raise StoreError(f"Redis queue {self.name!r} at {self.url}: cannot count the jobs: {exc}") from exc

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()
