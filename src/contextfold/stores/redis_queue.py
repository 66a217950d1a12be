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

The keys share one Redis Cluster hash tag (:func:`queue_keys`): ``{NAME}:waiting`` and ``{NAME}:arrivals``, or
``NAME:...`` when ``NAME`` holds a tag of its own (``{jobs}:compact``). A script's keys must hash to one slot on a
cluster; up to s20 they were ``NAME:waiting`` and ``NAME:arrivals``, two slots, so the offer script failed there.

Keys of the older layouts that a running deployment left (s19's untagged ``NAME:waiting`` and ``NAME:arrivals``;
before, ``NAME:list`` and ``NAME:pending``) are moved into the sorted set by the first offer, take or count of each
queue object (after the ones already there). Only a single Redis can hold them (on a cluster those layouts' scripts
failed), so the move, which reads keys of several slots, runs only when one of them exists (checked key by key).
Processes of an old and the new layout must not share a queue: stop the old workers before starting the new ones.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from ._records import stored_text
from .redis_blob import DEFAULT_URL, import_redis

if TYPE_CHECKING:
    import redis

__all__ = ["DEFAULT_QUEUE", "RedisJobQueue", "queue_keys"]

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
# KEYS: waiting sorted set, arrival counter, then the old layouts' keys (s19's sorted set and counter, the list and
# the pending set, each given only when it differs from the new keys). The old entries, in their order, after the
# waiting ones; then the old keys go (a pending flag without an entry was no waiting session).
_MIGRATE = """
local moved = 0
local function move(waiting)
  if not redis.call('ZSCORE', KEYS[1], waiting) then
    redis.call('ZADD', KEYS[1], redis.call('INCR', KEYS[2]), waiting)
    moved = moved + 1
  end
end
for i = 3, #KEYS do
  local kind = redis.call('TYPE', KEYS[i])['ok']
  if kind == 'zset' then
    for _, waiting in ipairs(redis.call('ZRANGE', KEYS[i], 0, -1)) do move(waiting) end
  elseif kind == 'list' then
    for _, waiting in ipairs(redis.call('LRANGE', KEYS[i], 0, -1)) do move(waiting) end
  end
  redis.call('DEL', KEYS[i])
end
return moved
"""
# A hash tag: the first "{" with a "}" after it and something between (Redis Cluster hashes only that part).
_HASH_TAG = re.compile(r"\{[^}]+\}")


def queue_keys(name: str) -> tuple[str, str]:
    """The waiting sorted set's and the arrival counter's keys of queue ``name``: one hash tag for both.

    ``name`` itself when it holds a tag (``{jobs}:compact``), else ``{name}``: a Redis Cluster hashes only the tag,
    so the scripts' keys land in one slot.
    """
    first = name.find("{")
    tagged = first >= 0 and _HASH_TAG.match(name, first) is not None
    base = name if tagged else f"{{{name}}}"
    return f"{base}:waiting", f"{base}:arrivals"


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
        self._waiting, self._arrivals = queue_keys(name)
        # (s19's keys, untagged, are the new ones when the name holds a tag: then not moved)
        self._old_keys = [key for key in (f"{name}:waiting", f"{name}:arrivals", f"{name}:list", f"{name}:pending")
                          if key not in (self._waiting, self._arrivals)]
        self._migrated = False
        self._errors: tuple[type[BaseException], ...] = (module.RedisError,)
        try:
            self._client: redis.Redis = client if client is not None else module.Redis.from_url(url)
        except ValueError as exc:
            raise StoreError(f"bad Redis URL {url!r}: {exc}") from exc
        self._offer = self._client.register_script(_OFFER)
        self._migrate = self._client.register_script(_MIGRATE)

    def _move_old_layout(self) -> None:
        # Once per object, at its first use (not in __init__: constructing a queue needs no server). Checked key by
        # key (one command each, one round trip): a command naming keys of several slots fails on a cluster.
        if not self._migrated:
            pipe = self._client.pipeline(transaction=False)
            for key in self._old_keys:
                pipe.exists(key)
            left = [key for key, found in zip(self._old_keys, pipe.execute(), strict=True) if found]
            if left:
                self._migrate(keys=[self._waiting, self._arrivals, *left])
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
