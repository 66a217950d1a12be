"""A queue of session ids on Redis with at most one pending entry per session: a fleet's background-compaction jobs.

The queue is one sorted set, members the waiting session ids, scores their arrival numbers (a counter): ``offer``
adds a session unless it is a member already (O(log n), one script), ``take`` pops the lowest score with ZPOPMIN, or
BZPOPMIN to wait (Redis >= 5.0; a fractional timeout >= 6.0). Needs the ``redis`` extra.

Why one sorted set: membership is "already waiting", and a pop removes it in the same step, so no state can say a
session waits when it does not, nor let it be queued twice. Up to s19f a list of entries plus a set of pending
flags were changed in two steps by a blocking take (BLPOP, then SREM): a take cut between them (a lost answer, a
killed worker) left a flag without its entry, and the repair for that (an offer finding a flag without an entry
queues the session) met the take's late SREM: an offer landing inside a blocking take queued the session twice.
A take whose answer is lost loses that one job (at least once per turn: the next turn's offer queues it again).

Keys of the old layout (``NAME:list`` and ``NAME:pending``) that a running deployment left are moved into the
sorted set by the first offer, take or count of each queue object (after the ones already there); processes of
the old and the new layout must not share a queue: stop the old workers before starting the new ones.
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

# KEYS: waiting sorted set, arrival counter. ARGV: session id. A member waits already; else it is added after every
# waiting one (the counter keeps arrival order across clients, whatever their clocks).
_OFFER = """
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], redis.call('INCR', KEYS[2]), ARGV[1])
return 1
"""
# KEYS: old list, old pending set, waiting sorted set, arrival counter. The old layout's entries, in their order,
# after the waiting ones; its flags go (a flag without an entry was no waiting session).
_MIGRATE = """
local moved = 0
for _, waiting in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  if not redis.call('ZSCORE', KEYS[3], waiting) then
    redis.call('ZADD', KEYS[3], redis.call('INCR', KEYS[4]), waiting)
    moved = moved + 1
  end
end
redis.call('DEL', KEYS[1], KEYS[2])
return moved
"""


class RedisJobQueue:
    """Session ids waiting for a job, each at most once, oldest first.

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
        self._waiting = f"{name}:waiting"
        self._arrivals = f"{name}:arrivals"
        self._old_keys = [f"{name}:list", f"{name}:pending"]
        self._migrated = False
        self._errors: tuple[type[BaseException], ...] = (module.RedisError,)
        try:
            self._client: redis.Redis = client if client is not None else module.Redis.from_url(url)
        except ValueError as exc:
            raise StoreError(f"bad Redis URL {url!r}: {exc}") from exc
        self._offer = self._client.register_script(_OFFER)
        self._migrate = self._client.register_script(_MIGRATE)

    def _move_old_layout(self) -> None:
        # Once per object, at its first use (not in __init__: constructing a queue needs no server).
        if not self._migrated:
            self._migrate(keys=[*self._old_keys, self._waiting, self._arrivals])
            self._migrated = True

    def offer(self, session_id: str) -> bool:
        """Queue ``session_id`` unless it is waiting already; True when queued."""
        try:
            self._move_old_layout()
            return bool(self._offer(keys=[self._waiting, self._arrivals], args=[session_id]))
        except self._errors as exc:
            raise StoreError(f"Redis queue {self.name!r} at {self.url}: cannot offer {session_id!r}: {exc}") from exc

    def take(self, timeout: float = 0) -> str | None:
        """The oldest waiting session id (no longer waiting), or None after ``timeout`` seconds (0: now)."""
        try:
            self._move_old_layout()
            raw: Any
            if timeout > 0:
                popped: Any = self._client.bzpopmin([self._waiting], timeout=timeout)
                raw = popped[1] if popped else None
            else:
                popped = self._client.zpopmin(self._waiting)
                raw = popped[0][0] if popped else None
            if raw is None:
                return None
        except self._errors as exc:
            raise StoreError(f"Redis queue {self.name!r} at {self.url}: cannot take a job: {exc}") from exc
        # A job another writer added that is no UTF-8 is an error naming the queue (it is taken off it).
        return stored_text(raw, f"Redis queue {self._waiting!r}")

    def __len__(self) -> int:
        try:
            self._move_old_layout()
            return int(self._client.zcard(self._waiting))
        except self._errors as exc:
            raise StoreError(f"Redis queue {self.name!r} at {self.url}: cannot count the jobs: {exc}") from exc

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()
