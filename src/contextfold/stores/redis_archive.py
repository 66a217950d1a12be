"""An :class:`~contextfold.archive.ArchiveStore` on Redis, for fleets that keep everything in one Redis.

S3 is the better home for archives that must outlive the fleet (Redis holds them in memory); this store suits
short-lived sessions and tests. Layout under ``prefix`` (default ``contextfold:archive``): ``<prefix>:<id>:file:
<name>`` holds a file's bytes, ``<prefix>:<id>:names`` the set of a session's names, ``<prefix>:sessions`` the set
of session ids. Each write changes the file and both sets in one MULTI/EXEC, and an ``append`` is Redis's own
APPEND, so concurrent appenders lose nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..archive import validate_session_id
from ..errors import StoreError
from .archive_fs import _check_name
from .redis_blob import DEFAULT_URL, import_redis

if TYPE_CHECKING:
    import redis

__all__ = ["DEFAULT_ARCHIVE_PREFIX", "RedisArchiveStore"]

# Apart from the blob and session prefixes, so that listing one kind of key never walks the others.
DEFAULT_ARCHIVE_PREFIX = "contextfold:archive"


class RedisArchiveStore:
    """Archive files in Redis (thread- and process-safe).

    Args:
        url: ``redis://[user:password@]host:port/db``; ignored when ``client`` is given.
        prefix: Key prefix of everything this store writes.
        client: An existing ``redis.Redis`` client (``decode_responses`` False).

    Example:
        >>> store = RedisArchiveStore("redis://127.0.0.1:6379/0")  # doctest: +SKIP
        >>> store.write("s1", "summary-001.json", b"{}")  # doctest: +SKIP
        >>> store.read("s1", "summary-001.json")  # doctest: +SKIP
        b'{}'
    """

    def __init__(self, url: str = DEFAULT_URL, *, prefix: str = DEFAULT_ARCHIVE_PREFIX,
                 client: redis.Redis | None = None) -> None:
        module = import_redis()
        self.url = url
        self.prefix = prefix.rstrip(":")
        self._errors: tuple[type[BaseException], ...] = (module.RedisError,)
        try:
            self._client: redis.Redis = client if client is not None else module.Redis.from_url(url)
        except ValueError as exc:
            raise StoreError(f"bad Redis URL {url!r}: {exc}") from exc
        self._sessions = f"{self.prefix}:sessions"

    def _file(self, session_id: str, name: str) -> str:
        return f"{self.prefix}:{validate_session_id(session_id)}:file:{_check_name(name)}"

    def _names(self, session_id: str) -> str:
        return f"{self.prefix}:{validate_session_id(session_id)}:names"

    def _fail(self, action: str, where: str, exc: BaseException) -> StoreError:
        return StoreError(f"Redis archive at {self.url}: cannot {action} {where}: {exc}")

    def write(self, session_id: str, name: str, data: bytes, *, exclusive: bool = False) -> None:
        """Store ``data`` as ``name`` (``exclusive``: FileExistsError when it is already there)."""
        key = self._file(session_id, name)
        try:
            pipe = self._client.pipeline(transaction=True)
            pipe.set(key, bytes(data), nx=exclusive)
            pipe.sadd(self._names(session_id), name)
            pipe.sadd(self._sessions, session_id)
            created, _, _ = pipe.execute()
        except self._errors as exc:
            raise self._fail("write", f"{session_id}/{name}", exc) from exc
        if not created:
            raise FileExistsError(f"{session_id}/{name}")

    def read(self, session_id: str, name: str) -> bytes | None:
        """The stored bytes, or None."""
        key = self._file(session_id, name)
        try:
            value: Any = self._client.get(key)
        except self._errors as exc:
            raise self._fail("read", f"{session_id}/{name}", exc) from exc
        return None if value is None else bytes(value)

    def append(self, session_id: str, name: str, data: bytes) -> None:
        """Extend (or create) ``name``; concurrent appends all land, whole."""
        key = self._file(session_id, name)
        try:
            pipe = self._client.pipeline(transaction=True)
            pipe.append(key, bytes(data))
            pipe.sadd(self._names(session_id), name)
            pipe.sadd(self._sessions, session_id)
            pipe.execute()
        except self._errors as exc:
            raise self._fail("append to", f"{session_id}/{name}", exc) from exc

    def names(self, session_id: str) -> list[str]:
        """The session's file names, sorted."""
        try:
            members: Any = self._client.smembers(self._names(session_id))
        except self._errors as exc:
            raise self._fail("list", session_id, exc) from exc
        return _ours(members, _check_name)

    def sessions(self) -> list[str]:
        """Every session with a file, sorted."""
        try:
            members: Any = self._client.smembers(self._sessions)
        except self._errors as exc:
            raise self._fail("list", "the sessions", exc) from exc
        return _ours(members, validate_session_id)

    def close(self) -> None:
        """Close the connection pool (idempotent)."""
        self._client.close()


def _ours(members: Any, check: Callable[[str], str]) -> list[str]:
    """The set's members this store could have written, sorted: UTF-8 text that ``check`` takes.

    The Redis is shared: a member another writer added (no UTF-8, ``..``, a name with a space) is left out, as the
    filesystem and S3 archives leave out folders and objects that are not theirs; read back, it raised
    UnicodeDecodeError out of every listing of the whole archive, or was listed as a session it does not hold.
    """
    out = []
    for member in members:
        try:
            out.append(check(member.decode()))
        except (UnicodeDecodeError, ValueError):
            continue
    return sorted(out)
