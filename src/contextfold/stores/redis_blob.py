"""A :class:`~contextfold.cache.BlobStore` on Redis, so that a fleet of workers shares one tool output cache.

Layout under ``prefix`` (default ``contextfold:blob``), for a blob ``key``:

- ``<prefix>:meta:<key>``: a hash with ``size``, ``chunks`` and ``gen`` (the generation holding the bytes);
- ``<prefix>:data:<key>:<gen>``: a hash from chunk number to at most ``chunk_bytes`` bytes;
- ``<prefix>:lru``: a sorted set of keys scored by ``<prefix>:clock``, the least recently used first.
- ``<prefix>:owner:<tag>``: a set of the refs ``tag`` holds a claim key ``<ref>.owner.<tag>`` on (see
  :meth:`RedisBlobStore.claimed_refs`), kept by the same scripts that write and delete the claim;
  ``<prefix>:owners-indexed`` says it was built for the claims written before it existed.

A ``put`` writes the chunks of a new generation first (with a time to live, so that a worker killed mid-write
leaves nothing behind for long), then one Lua script swaps the meta to it and drops the old generation: readers see
the old value or the new one, never a mix. ``read_range`` is one Lua script that fetches only the chunks covering
the slice. Needs the ``redis`` extra (redis-py); a single Redis server (cluster mode is not supported: the scripts
reach keys they compute).
"""

from __future__ import annotations

import hashlib
import threading
import uuid
import weakref
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..cache import BlobInfo, BlobStore
from ..cache.owners import owner_key, parse_owner_key
from ..errors import MissingExtra, RefNotFound, StoreError
from ._records import stored_count, stored_score, stored_text

if TYPE_CHECKING:
    import redis

__all__ = ["CHUNK_BYTES", "DEFAULT_PREFIX", "DEFAULT_URL", "RedisBlobStore", "import_redis"]

DEFAULT_URL = "redis://127.0.0.1:6379/0"
# Every key starts with this, so that one Redis database can hold other applications' data (and sessions) too.
DEFAULT_PREFIX = "contextfold:blob"
# 64 KiB like the local store: a 1,000-line slice of a 100 MB output reads a few chunks, and no single command
# carries a 100 MB value (which would stall the server for every other worker while it is copied).
CHUNK_BYTES = 64 * 1024
# Chunks of a put still in progress expire after this long unless the commit makes them permanent: a worker
# killed mid-write must not leak memory forever, and no sane put of one tool output takes an hour.
STAGING_TTL_SECONDS = 3600
# Chunks sent or fetched per round trip: big enough to amortise latency, small enough to bound the memory of the
# client and of the server's reply buffer (and far below the ~8,000 arguments a Lua ``unpack`` accepts).
CHUNKS_PER_PIPELINE = 64
# A whole-blob read spans several round trips; each checks that the generation did not change. A value replaced
# this many times during one read means a writer loop is starving the reader.
READ_RETRIES = 5
# Claim keys added to the owner sets per round trip when building them for claims written before they existed.
INDEX_BUILD_BATCH = 1_000
# "To the end" for a whole-value read, resolved by the server against the size it holds at that moment (a size read
# first would race with a replacement); 2**52 stays exact in the doubles Lua computes with.
_TO_THE_END = 2**52

# KEYS: meta, lru, clock, and for a claim key its tag's owner set. ARGV: data key prefix (ends with ':'), new gen,
# size, chunk count, key, ttl (0: none), and for a claim key its ref. The owner set lives as long as its longest-lived
# claim: it gets the time to live of each claim written, unless it already has a longer one (or none).
_COMMIT = """
local old = redis.call('HGET', KEYS[1], 'gen')
redis.call('HSET', KEYS[1], 'size', ARGV[3], 'chunks', ARGV[4], 'gen', ARGV[2])
if tonumber(ARGV[6]) > 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[6])
  redis.call('EXPIRE', ARGV[1] .. ARGV[2], ARGV[6])
else
  redis.call('PERSIST', KEYS[1])
  redis.call('PERSIST', ARGV[1] .. ARGV[2])
end
if old and old ~= ARGV[2] then redis.call('DEL', ARGV[1] .. old) end
redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[3]), ARGV[5])
if KEYS[4] then
  local left = redis.call('TTL', KEYS[4])
  redis.call('SADD', KEYS[4], ARGV[7])
  if tonumber(ARGV[6]) == 0 then
    redis.call('PERSIST', KEYS[4])
  elseif left == -2 or (left >= 0 and left < tonumber(ARGV[6])) then
    redis.call('EXPIRE', KEYS[4], ARGV[6])
  end
end
return 1
"""

# The same, but only when no value is under the key (a put_new): else the staged chunks are dropped and 0 returned.
_COMMIT_NEW = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('DEL', ARGV[1] .. ARGV[2])
  return 0
end
""" + _COMMIT

# Whether the blob whose meta is ``meta`` holds the bytes of ``size`` whose SHA-1 is ``digest`` (put_if expecting
# no value is put_new, or an exists check for a delete: never this script). The expected bytes are compared by
# digest: a secret memory's base can be megabytes, sent once (as the new value).
_HELD_IS = """
local function held_is(meta, prefix, size, digest)
  local held = redis.call('HMGET', meta, 'size', 'chunks', 'gen')
  if not held[3] or tonumber(held[1]) ~= tonumber(size) then return false end
  local parts = {}
  for i = 0, tonumber(held[2]) - 1 do parts[#parts + 1] = redis.call('HGET', prefix .. held[3], i) or '' end
  return redis.sha1hex(table.concat(parts)) == digest
end
"""

# A compare-and-set (put_if): _COMMIT when the key holds what ARGV[8] (size) and ARGV[9] (digest) say; ARGV[7], the
# claim's ref, is always given ('' for another key). Else the staged chunks are dropped and 0 returned.
_COMMIT_IF = _HELD_IS + """
if not held_is(KEYS[1], ARGV[1], ARGV[8], ARGV[9]) then
  redis.call('DEL', ARGV[1] .. ARGV[2])
  return 0
end
""" + _COMMIT

# KEYS: meta. ARGV: data key prefix, start, length, chunk size, max chunks, expected gen ('' for any).
# Returns false when missing, {size, gen} when the generation is not the expected one or the slice is empty,
# else {size, gen, chunk...} for at most max chunks from the one holding byte ``start``.
_READ = """
local meta = redis.call('HMGET', KEYS[1], 'size', 'gen')
if not meta[1] then return false end
if ARGV[6] ~= '' and meta[2] ~= ARGV[6] then return {meta[1], meta[2]} end
local size = tonumber(meta[1])
local start = tonumber(ARGV[2])
local stop = math.min(start + tonumber(ARGV[3]), size)
if stop <= start then return {meta[1], meta[2]} end
local chunk = tonumber(ARGV[4])
local first = math.floor(start / chunk)
local last = math.min(math.floor((stop - 1) / chunk), first + tonumber(ARGV[5]) - 1)
local fields = {}
for i = first, last do fields[#fields + 1] = i end
local parts = redis.call('HMGET', ARGV[1] .. meta[2], unpack(fields))
local out = {meta[1], meta[2]}
for i = 1, #parts do out[#out + 1] = parts[i] end
return out
"""

# KEYS: meta, lru, and for a claim key its tag's owner set. ARGV: data key prefix, key, and for a claim key its ref.
# (The ref leaves the owner set even when the claim already expired.)
_DELETE = """
if KEYS[3] then redis.call('SREM', KEYS[3], ARGV[3]) end
local gen = redis.call('HGET', KEYS[1], 'gen')
if not gen then return 0 end
redis.call('DEL', KEYS[1], ARGV[1] .. gen)
redis.call('ZREM', KEYS[2], ARGV[2])
return 1
"""

# The same when the key holds what ARGV[4] (size) and ARGV[5] (digest) say (ARGV[3], the claim's ref, always given).
_DELETE_IF = _HELD_IS + """
if not held_is(KEYS[1], ARGV[1], ARGV[4], ARGV[5]) then return 0 end
""" + _DELETE

# The same when the key's access order (its score in the lru set) is still ARGV[4] (delete_unused).
_DELETE_UNUSED = """
local held = redis.call('ZSCORE', KEYS[2], ARGV[2])
if not held or tonumber(held) ~= tonumber(ARGV[4]) then return 0 end
""" + _DELETE

# KEYS: meta, lru, clock, and for a claim key its tag's owner set. ARGV: key, data key prefix, ttl (0: none). Only
# keys still held get a new access time (and, with a time to live, a new lease on it, which a claim's owner set
# gets too when its own is shorter).
_TOUCH = """
local gen = redis.call('HGET', KEYS[1], 'gen')
if not gen then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 0
end
if tonumber(ARGV[3]) > 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[3])
  redis.call('EXPIRE', ARGV[2] .. gen, ARGV[3])
  if KEYS[4] then
    local left = redis.call('TTL', KEYS[4])
    if left >= 0 and left < tonumber(ARGV[3]) then redis.call('EXPIRE', KEYS[4], ARGV[3]) end
  end
end
redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[3]), ARGV[1])
return 1
"""


def import_redis() -> Any:
    """The ``redis`` module, or :class:`MissingExtra` naming the extra to install."""
    try:
        import redis as module
    except ImportError as exc:
        raise MissingExtra("Redis store", "redis", module="redis") from exc
    return module


class RedisBlobStore(BlobStore):
    """Blobs in Redis, chunked, with least-recently-used order kept for GC; shared by threads and processes.

    Args:
        url: ``redis://[user:password@]host:port/db`` (``rediss://`` for TLS); ignored when ``client`` is given.
        prefix: Key prefix of everything this store writes.
        client: An existing ``redis.Redis`` client (its ``decode_responses`` must be False).
        chunk_bytes: Bytes per chunk (tests make it small to cross chunk boundaries cheaply).
        ttl_seconds: Retention by last use: a blob expires this long after its last put or touch (the cache
            touches what it reads), so Redis frees what no session uses without a GC pass. None keeps blobs until
            ``ToolOutputCache.gc`` deletes them; either way the least recently used order in ``entries()`` is the
            one GC evicts by, as on the local store (expired keys leave the order at the next listing).

    Example:
        >>> store = RedisBlobStore("redis://127.0.0.1:6379/0")  # doctest: +SKIP
        >>> store.put("k", b"hello world")  # doctest: +SKIP
        >>> store.read_range("k", 6, 5)  # doctest: +SKIP
        b'world'
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        prefix: str = DEFAULT_PREFIX,
        client: redis.Redis | None = None,
        chunk_bytes: int = CHUNK_BYTES,
        ttl_seconds: int | None = None,
    ) -> None:
        module = import_redis()
        if chunk_bytes <= 0:
            raise ValueError(f"chunk_bytes must be > 0, got {chunk_bytes}")
        if ttl_seconds is not None and (isinstance(ttl_seconds, bool) or ttl_seconds <= 0):
            raise ValueError(f"ttl_seconds must be a positive number of seconds or None, got {ttl_seconds!r}")
        self.ttl_seconds = ttl_seconds
        self.url = url
        self.prefix = prefix.rstrip(":")
        self.chunk_bytes = chunk_bytes
        self._errors: tuple[type[BaseException], ...] = (module.RedisError,)
        try:
            self._client: redis.Redis = client if client is not None else module.Redis.from_url(url)
        except ValueError as exc:
            raise StoreError(f"bad Redis URL {url!r}: {exc}") from exc
        self._lru = f"{self.prefix}:lru"
        self._clock = f"{self.prefix}:clock"
        self._owners_indexed = f"{self.prefix}:owners-indexed"
        # The losses() count when the owner sets were last seen built (None: not yet): a server that restarted may
        # have come back with an older dump, from before they existed.
        self._indexed_at: int | None = None
        # A Redis without persistence that restarts comes back empty: the refs the views still show are gone. Every
        # new connection asks the server's run id (one command per connection, not per call); a new run id counts a
        # possible loss (see losses()).
        self._run_id: str | None = None
        self._losses = 0
        self._probe_lock = threading.Lock()
        self._watch_restarts()
        self._commit = self._client.register_script(_COMMIT)
        self._commit_new = self._client.register_script(_COMMIT_NEW)
        self._read = self._client.register_script(_READ)
        self._delete = self._client.register_script(_DELETE)
        self._commit_if = self._client.register_script(_COMMIT_IF)
        self._delete_if = self._client.register_script(_DELETE_IF)
        self._delete_unused = self._client.register_script(_DELETE_UNUSED)
        self._touch = self._client.register_script(_TOUCH)

    # -- restarts -----------------------------------------------------------------------------------------------------
    def _watch_restarts(self) -> None:
        """Hook the pool's connect step (redis-py's ``redis_connect_func``) to read the run id of each connection."""
        kwargs = getattr(self._client.connection_pool, "connection_kwargs", None)
        if not isinstance(kwargs, dict):
            return  # a pool of another kind: losses are found when a ref is read, as before
        previous = kwargs.get("redis_connect_func")
        store = weakref.ref(self)  # a caller's client may outlive this store

        def on_connect(connection: Any) -> None:
            if previous is not None:
                previous(connection)
            else:
                connection.on_connect()
            alive = store()
            if alive is not None:
                alive._saw_server(connection)

        kwargs["redis_connect_func"] = on_connect

    def _saw_server(self, connection: Any) -> None:
        try:
            connection.send_command("INFO", "server")
            info = connection.read_response()
        except import_redis().ResponseError:
            return  # INFO refused (an ACL, a renamed command): losses are found when a ref is read
        text = info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)
        run_id = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("run_id:")),
                      None)
        if run_id is None:
            return
        with self._probe_lock:
            if self._run_id is not None and run_id != self._run_id:
                self._losses += 1
            self._run_id = run_id

    def losses(self) -> int:
        """Server restarts seen since this store was opened (each may have emptied a Redis without persistence).

        No round trip: an idle connection of the pool is taken and given back, and the pool replaces one the server
        closed (a local poll of its socket); the new connection's run id tells a restart apart from a dropped link.
        """
        pool = self._client.connection_pool
        try:
            try:
                connection = pool.get_connection()
            except TypeError:  # redis-py before 5.3 wants a command name
                connection = pool.get_connection("PING")
            pool.release(connection)
        except self._errors:
            pass  # the server is down: the next command says so; a loss is counted once it is back
        return self._losses

    def missing(self, keys: Sequence[str]) -> set[str]:
        """The keys among ``keys`` the store does not hold, in one round trip."""
        if not keys:
            return set()
        try:
            pipe = self._client.pipeline(transaction=False)
            for key in keys:
                pipe.exists(self._meta(key))
            found = pipe.execute()
        except self._errors as exc:
            raise self._fail("check", None, exc) from exc
        return {key for key, present in zip(keys, found, strict=True) if not present}

    # -- keys ---------------------------------------------------------------------------------------------------------
    def _meta(self, key: str) -> str:
        return f"{self.prefix}:meta:{key}"

    def _data_prefix(self, key: str) -> str:
        return f"{self.prefix}:data:{key}:"

    def _owner_set(self, tag: str) -> str:
        return f"{self.prefix}:owner:{tag}"

    def _claim_keys(self, key: str) -> tuple[list[str], list[str]]:
        """The extra KEYS and ARGV the scripts take for ``key`` when it is a claim: its owner set and its ref."""
        parsed = parse_owner_key(key)
        if parsed is None:
            return [], []
        return [self._owner_set(parsed[1])], [parsed[0]]

    def _fail(self, action: str, key: str | None, exc: BaseException) -> StoreError:
        what = f" {key!r}" if key is not None else ""
        return StoreError(f"Redis store at {self.url}: cannot {action}{what}: {exc}")

    # -- lifecycle ----------------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection pool (idempotent)."""
        self._client.close()

    def __enter__(self) -> RedisBlobStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- BlobStore ----------------------------------------------------------------------------------------------------
    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key``: chunks staged under a new generation, then swapped in atomically."""
        self._put(key, data, new=False)

    def put_new(self, key: str, data: bytes) -> bool:
        """Store ``data`` under ``key`` unless it is there; True when stored (checked in the script that commits)."""
        return self._put(key, data, new=True)

    def put_if(self, key: str, data: bytes | None, expected: bytes | None) -> bool:
        """Make ``key`` hold ``data`` (None: delete it) only when it holds ``expected`` (None: nothing).

        Compared (by size and SHA-1) and written in the script that commits or deletes: one step for the server.
        """
        if expected is None:
            return self.put_new(key, data) if data is not None else not self.exists(key)
        want = [str(len(expected)), hashlib.sha1(expected).hexdigest()]
        if data is not None:
            return self._put(key, data, new=False, expected=want)
        try:
            owner_set, ref = self._claim_keys(key)
            return bool(self._delete_if(keys=[self._meta(key), self._lru, *owner_set],
                                        args=[self._data_prefix(key), key, *(ref or [""]), *want]))
        except self._errors as exc:
            raise self._fail("delete", key, exc) from exc

    def _put(self, key: str, data: bytes, *, new: bool, expected: list[str] | None = None) -> bool:
        view = memoryview(data)
        gen = uuid.uuid4().hex
        data_key = self._data_prefix(key) + gen
        offsets = range(0, len(view), self.chunk_bytes)
        try:
            for batch_start in range(0, len(offsets), CHUNKS_PER_PIPELINE):
                pipe = self._client.pipeline(transaction=False)
                batch = offsets[batch_start : batch_start + CHUNKS_PER_PIPELINE]
                mapping = {
                    str(batch_start + i): bytes(view[off : off + self.chunk_bytes]) for i, off in enumerate(batch)
                }
                pipe.hset(data_key, mapping=mapping)  # type: ignore[arg-type]
                pipe.expire(data_key, STAGING_TTL_SECONDS)
                pipe.execute()
            owner_set, ref = self._claim_keys(key)
            args: list[str | int] = [self._data_prefix(key), gen, len(view), len(offsets), key,
                                     self.ttl_seconds or 0, *ref]
            if expected is not None:
                stored = self._commit_if(keys=[self._meta(key), self._lru, self._clock, *owner_set],
                                         args=[*args, *([] if ref else [""]), *expected])
            else:
                stored = (self._commit_new if new else self._commit)(
                    keys=[self._meta(key), self._lru, self._clock, *owner_set], args=args)
        except self._errors as exc:
            raise self._fail("write", key, exc) from exc
        return bool(stored)

    def read_range(self, key: str, start: int, length: int) -> bytes:
        """Up to ``length`` bytes of ``key`` from ``start``, fetching only the chunks that hold them.

        A slice spanning many chunks takes several round trips, all from one generation: when the value is replaced
        meanwhile, the read starts over on the new one.
        """
        if start < 0 or length < 0:
            raise ValueError(f"read_range: start and length must be >= 0, got start={start}, length={length}")
        for _ in range(READ_RETRIES):
            data = self._read_generation(key, start, length)
            if data is not None:
                return data
        raise StoreError(f"Redis store at {self.url}: {key!r} was replaced {READ_RETRIES} times during one read")

    def get(self, key: str) -> bytes:
        """The whole value of ``key``, all from one generation."""
        return self.read_range(key, 0, _TO_THE_END)

    def _read_generation(self, key: str, start: int, length: int) -> bytes | None:
        """The slice, or None when the value was replaced between two round trips."""
        meta, prefix = self._meta(key), self._data_prefix(key)
        gen = b""
        parts: list[bytes] = []
        stop: int | None = None
        pos = start - start % self.chunk_bytes  # the first byte of the next chunk to fetch
        while stop is None or pos < stop:
            fetch_from = max(pos, start)
            try:
                reply = self._read(
                    keys=[meta],
                    args=[prefix, fetch_from, start + length - fetch_from, self.chunk_bytes, CHUNKS_PER_PIPELINE, gen],
                )
            except self._errors as exc:
                raise self._fail("read", key, exc) from exc
            if reply is None:
                if gen:
                    return None  # deleted mid-read: the retry reports it as missing
                raise RefNotFound(key)
            size, got = stored_count(reply[0], f"Redis key {meta!r}", "size"), reply[1]
            if gen and got != gen:
                return None
            gen = got
            stop = min(start + length, size)
            chunks = reply[2:]
            if not chunks:
                break
            if any(c is None for c in chunks):
                # Only keys edited by hand, or a store read with another chunk size, get here.
                raise StoreError(f"Redis store at {self.url}: {key!r} is missing chunks (another chunk size?)")
            parts.extend(chunks)
            pos += len(chunks) * self.chunk_bytes
        if stop is None or stop <= start:
            return b""
        offset = start % self.chunk_bytes
        return b"".join(parts)[offset : offset + (stop - start)]

    def size(self, key: str) -> int | None:
        """Byte size of ``key`` or None."""
        try:
            value = self._client.hget(self._meta(key), "size")
        except self._errors as exc:
            raise self._fail("read the size of", key, exc) from exc
        return None if value is None else stored_count(value, f"Redis key {self._meta(key)!r}", "size")

    def delete(self, key: str) -> bool:
        """Remove ``key``, its chunks and its access record."""
        try:
            owner_set, ref = self._claim_keys(key)
            return bool(self._delete(keys=[self._meta(key), self._lru, *owner_set],
                                     args=[self._data_prefix(key), key, *ref]))
        except self._errors as exc:
            raise self._fail("delete", key, exc) from exc

    def delete_unused(self, key: str, accessed: int) -> bool:
        """Remove ``key`` only when its access order is still ``accessed`` (compared in the script that deletes)."""
        try:
            owner_set, ref = self._claim_keys(key)
            return bool(self._delete_unused(keys=[self._meta(key), self._lru, *owner_set],
                                            args=[self._data_prefix(key), key, *(ref or [""]), accessed]))
        except self._errors as exc:
            raise self._fail("delete", key, exc) from exc

    def entries(self) -> Iterator[BlobInfo]:
        """Every key, sorted, with size and access order."""
        try:
            ranked: list[Any] = self._client.zrange(self._lru, 0, -1, withscores=True)
            pipe = self._client.pipeline(transaction=False)
            for member, _ in ranked:
                pipe.hget(self._meta(stored_text(member, f"Redis key {self._lru!r}")), "size")
            sizes = pipe.execute()
        except self._errors as exc:
            raise self._fail("list the keys", None, exc) from exc
        listed = f"Redis key {self._lru!r}"  # (a member another writer added: a StoreError naming the set)
        infos = [
            BlobInfo(stored_text(member, listed), stored_count(size, listed, "size"),
                     stored_score(score, listed, "access order"))
            for (member, score), size in zip(ranked, sizes, strict=True)
            # A key deleted between the two reads is simply not listed.
            if size is not None
        ]
        gone = [member for (member, _), size in zip(ranked, sizes, strict=True) if size is None]
        if gone:  # expired (time to live) or deleted by hand: their access records go too
            try:
                self._client.zrem(self._lru, *gone)
            except self._errors as exc:
                raise self._fail("prune the access order", None, exc) from exc
        return iter(sorted(infos, key=lambda i: i.key))

    def touch(self, key: str) -> None:
        """Mark ``key`` as just used (nothing happens for a key the store does not hold)."""
        try:
            owner_set, _ = self._claim_keys(key)
            self._touch(keys=[self._meta(key), self._lru, self._clock, *owner_set],
                        args=[key, self._data_prefix(key), self.ttl_seconds or 0])
        except self._errors as exc:
            raise self._fail("touch", key, exc) from exc

    # -- the claims of a session ----------------------------------------------------------------------------------
    def claimed_refs(self, tag: str) -> list[str]:
        """The refs ``tag`` holds a claim on: its owner set, less the claims that expired (pruned from it here).

        Two round trips whatever the size of the store (the set, then whether each claim is still held).
        """
        self._index_old_claims()
        owner_set = self._owner_set(tag)
        try:
            members: Any = self._client.smembers(owner_set)
            refs = sorted(m.decode() for m in members)
            pipe = self._client.pipeline(transaction=False)
            for ref in refs:
                pipe.exists(self._meta(owner_key(ref, tag)))
            held = pipe.execute() if refs else []
            gone = [ref for ref, present in zip(refs, held, strict=True) if not present]
            if gone:  # expired (time to live) or deleted by hand
                self._client.srem(owner_set, *gone)
        except self._errors as exc:
            raise self._fail("list the claims of", tag, exc) from exc
        return [ref for ref, present in zip(refs, held, strict=True) if present]

    def _index_old_claims(self) -> None:
        """Build the owner sets once for a store written before they existed (listing it whole, that one time).

        Idempotent, so two workers doing it at once is harmless. A worker of an older contextfold still writing
        claims afterwards does not add them to the sets: its outputs are not found by a grep over all outputs.
        """
        if self._indexed_at == self._losses:
            return
        seen = self._losses
        try:
            if not self._client.exists(self._owners_indexed):
                members: Any = self._client.zrange(self._lru, 0, -1)
                claims = [parsed for m in members if (parsed := parse_owner_key(m.decode())) is not None]
                for at in range(0, len(claims), INDEX_BUILD_BATCH):
                    pipe = self._client.pipeline(transaction=False)
                    for ref, tag in claims[at : at + INDEX_BUILD_BATCH]:
                        pipe.sadd(self._owner_set(tag), ref)
                        if self.ttl_seconds is not None:  # as the claims' own: no longer than the store keeps any
                            pipe.expire(self._owner_set(tag), self.ttl_seconds)
                    pipe.execute()
                self._client.set(self._owners_indexed, b"1")
        except self._errors as exc:
            raise self._fail("index the claims", None, exc) from exc
        self._indexed_at = seen
