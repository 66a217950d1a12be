"""A lease on a Responses continuation in flight, held in the blob store every instance shares.

A request continuing a response (``previous_response_id``) is fed into the session, then sent upstream; the
session's head moves to the new response only when its reply is saved. In between, a second continuation of the
same response on another instance (each instance's lock serializes only its own requests) found the session still
at that head and was fed too: two continuations in the session where the client meant one (red team 16: 2 of 16
concurrent continuations through two instances). A continuation's ``fed`` mark cannot tell them apart: a client's
edited retry after a failed call continues the same response, and must be taken.

So a continuation takes a lease on (session, response) before it is fed, and gives it back once its reply is
recorded or its call failed (:class:`Lease`); another continuation of that response meanwhile is refused (409).
Taken and given back by compare-and-set (``BlobStore.put_new`` / ``put_if``): two instances taking it at one
instant, one wins. A lease expires (its holder's instance may have died mid-request): one past its time is taken
over. The same request retried (the same input: its ``fed`` mark feeds it once) takes over a live lease too: an SDK
retrying after its instance died must not wait for the expiry; the retry gives back the lease it took over (not
nothing: the first may still be in flight, and a different continuation must still be refused).

A request can last longer than a lease's time (the upstream's timeout is per chunk when streaming; a request makes
up to 7 upstream calls with the retrieval tools and more with overflow recovery): its holder renews the lease
(:meth:`Lease.renew`) at an upstream call or a relayed event once a third of its time or half the margin has passed
(:meth:`Lease.due`), so a live request keeps it and a dead instance's expires. An abandoned lease is not collected:
it stays in the store (about a hundred bytes) until the response is continued again and it is taken over.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import RefNotFound, StoreError
from .sessions import Conflict

__all__ = ["LEASE_KEY_PREFIX", "LEASE_MARGIN_S", "Lease", "lease_key", "take_lease"]

# Blob-store keys of the leases (no output, memory or limit key starts so: the cache's collection leaves them).
LEASE_KEY_PREFIX = "serve-lease."
# A lease lasts the upstream's read timeout and this much more from its last renewal: a call or stream that has
# sent nothing by then has failed, and a session whose instance died stays closed to other continuations that long.
LEASE_MARGIN_S = 300.0
# Tries to take a lease that other requests keep taking and giving back in between (each try is one of them).
_MAX_TRIES = 8


# A holder renews its lease once this share of its time has passed, or half the margin, whichever comes first: the
# next upstream call or event comes within the read timeout, so a live request renews it before it expires.
RENEW_AFTER_SHARE = 1 / 3


@dataclass
class Lease:
    """A continuation's hold on (session, response): given back by :meth:`release` (once its reply is recorded).

    ``held``: the lease's bytes as this request last wrote them; ``previous``: the live lease of the same request's
    earlier try that this one took over (put back on release), None when there was none.
    """

    store: Any
    key: str
    held: bytes
    seconds: float
    clock: Callable[[], float]
    renewed_at: float
    previous: bytes | None = None

    def due(self) -> bool:
        """Whether a share of the lease's time has passed since it was taken or renewed (no store call)."""
        return self.clock() - self.renewed_at >= min(self.seconds * RENEW_AFTER_SHARE, LEASE_MARGIN_S / 2)

    def renew(self) -> bool:
        """Give the lease ``seconds`` more from now if it is still this request's; whether it was.

        One taken over meanwhile (a retry of this request, or another request once it expired) stays theirs. A store
        that cannot be reached leaves it as it was (False).
        """
        now = self.clock()
        self.renewed_at = now
        fields = _fields(self.held)
        renewed = _encode(fields.get("tag"), fields.get("holder"), now + self.seconds)
        with contextlib.suppress(StoreError):
            if self.store.put_if(self.key, renewed, self.held):
                self.held = renewed
                return True
        return False

    def release(self) -> None:
        """Give the lease back, unless another request took it over since (it expired meanwhile): theirs now.

        A lease taken over from an earlier try of the same request is given back to it (that try may still be in
        flight: it renews it, or it expires). A store that cannot be reached leaves it to expire.
        """
        with contextlib.suppress(StoreError):
            self.store.put_if(self.key, self.previous, self.held)


def lease_key(session_id: str, response_id: str) -> str:
    """The blob-store key of the lease on continuing ``response_id`` in ``session_id`` (neither appears in it)."""
    digest = hashlib.blake2b(f"{session_id}\n{response_id}".encode("utf-8", "surrogatepass"), digest_size=12)
    return LEASE_KEY_PREFIX + digest.hexdigest()


def take_lease(store: Any, session_id: str, response_id: str, tag: str, *, seconds: float,
               clock: Callable[[], float]) -> Lease:
    """Take the lease on continuing ``response_id`` for ``seconds``; :class:`Conflict` while another request holds it.

    ``tag``: the continuation's (the response and its input's keys, as its ``fed`` mark): a holder of the same tag
    is the same request, retried; its lease is taken over. ``clock``: wall-clock seconds, compared across
    instances. Raises StoreError when the store cannot be reached.
    """
    key = lease_key(session_id, response_id)
    now = clock()
    mine = _encode(tag, uuid.uuid4().hex, now + seconds)
    for _ in range(_MAX_TRIES):
        if store.put_new(key, mine):
            return Lease(store, key, mine, seconds, clock, now)
        try:
            held = store.get(key)
        except RefNotFound:
            continue  # given back meanwhile
        live = _live(held, now)
        if live and _tag(held) != tag:
            break
        if store.put_if(key, mine, held):
            return Lease(store, key, mine, seconds, clock, now, previous=held if live else None)
    raise Conflict(f"another continuation of response {response_id!r} is in flight (on this proxy or another "
                   "instance): a response is continued once; retry after it is answered (then continue its reply), "
                   "or send the whole history instead", "previous_response_id")


def _encode(tag: Any, holder: Any, until: float) -> bytes:
    return json.dumps({"tag": tag, "holder": holder, "until": until}).encode()


def _fields(held: bytes) -> dict[str, Any]:
    try:
        value = json.loads(held)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _live(held: bytes, now: float) -> bool:
    """Whether a lease as stored is still in its time (one that is no lease the proxy wrote is not: taken over)."""
    until = _fields(held).get("until")
    return isinstance(until, (int, float)) and not isinstance(until, bool) and now < until


def _tag(held: bytes) -> Any:
    return _fields(held).get("tag")
