"""A queue of session ids on Redis with at most one pending entry per session: a fleet's background-compaction jobs.

``offer`` adds a session unless it is already waiting (a set of pending ids and a list, changed together by one
script); ``take`` pops the oldest and clears its pending flag, so that a turn landing while the job runs can queue
the session again. Needs the ``redis`` extra.

A flag must never outlive its entry: a session flagged but not in the list could never be queued again (every
later ``offer`` answered "already waiting"), and its background compactions stopped for good. A take whose answer
was lost (a reset connection, a Redis restart) left exactly that, as did a worker killed between the pop and the
flag's clearing. An immediate take now pops and clears in one script (an answer lost after it loses that one job;
the next turn queues the session again), and an offer finding a flag with no entry queues the session anyway.
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

# KEYS: pending set, list. ARGV: session id. Queued only when not already waiting: flagged, and in the list (a flag
# left without its entry, by a blocking take cut between its two steps, is not waiting). The list is walked only
# for a flagged session: it holds the sessions waiting for a compaction, a few at a time.
_OFFER = """
if redis.call('SADD', KEYS[1], ARGV[1]) == 0 then
  for _, waiting in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
    if waiting == ARGV[1] then
      return 0
    end
  end
end
redis.call('RPUSH', KEYS[2], ARGV[1])
return 1
"""
# KEYS: pending set, list. The oldest entry, its flag cleared in the same step.
_TAKE = """
local taken = redis.call('LPOP', KEYS[2])
if taken then
  redis.call('SREM', KEYS[1], taken)
end
return taken
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
        self._take = self._client.register_script(_TAKE)

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
                # (a script cannot block: the flag is cleared right after; a worker killed in between leaves it,
                # and the next offer of the session sees that it is not waiting)
                popped: Any = self._client.blpop([self._list], timeout=timeout)
                raw = popped[1] if popped else None
                if raw is not None:
                    self._client.srem(self._pending, raw)
            else:
                raw = self._take(keys=[self._pending, self._list])
            if raw is None:
                return None
        except self._errors as exc:
            raise StoreError(f"Redis queue {self.name!r} at {self.url}: cannot take a job: {exc}") from exc
        # A job another writer pushed that is no UTF-8 is an error naming the queue (it is taken off it).
        return stored_text(raw, f"Redis queue {self._list!r}")

    def __len__(self) -> int:
        try:
            return int(self._client.llen(self._list))
        except self._errors as exc:
            raise StoreError(f"Redis queue {self.name!r} at {self.url}: cannot count the jobs: {exc}") from exc

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()
