"""A lease on a session's continuation in flight, held in the blob store every instance shares.

A request continuing a response (``previous_response_id``) or a ``conversation`` is fed into the session, then sent
upstream; the session's head moves to the new response only when its reply is saved. In between, a second request
of the same session on another instance (each instance's lock serializes only its own requests) found the session
still at that head and was fed too: two continuations in the session where the client meant one (red team 16: 2 of
16 concurrent continuations through two instances); of a conversation, the second's input went in after the first's
and the first's reply, replaced by the second's as the one to feed next, was lost. A continuation's ``fed`` mark
cannot tell them apart: a client's edited retry after a failed call continues the same response, and must be taken.

So such a request takes the session's lease before it is fed, and gives it back once its reply is recorded or its
call failed (:class:`Lease`); another continuation meanwhile is refused (409). One lease a session (the key names
the session only): an abandoned one (its instance died, or the store failed when it was given back) is never more
than one key a session, and the session's next continuation takes it over. Taken and given back by compare-and-set
(``BlobStore.put_new`` / ``put_if``): two instances taking it at one instant, one wins.

The lease names the request (``tag``, as its ``fed`` mark will be: the response continued, for a conversation the
session's head as read before taking it, and the input's item keys) and the response it continues; its holders are
that request's tries, each with its time (``holders``): the same request retried (an SDK retrying after its instance
died must not wait for an expiry; its ``fed`` mark feeds it once) joins the lease, and each try gives back only its
own hold, so the lease is free once every try has ended or expired (a retry used to put back the first try's lease
when it ended, restoring it after that try had ended: an edited retry was refused until its expiry). A lease whose
holders all expired is taken over (their instance may have died mid-request), and so is one on a response the
session has moved past (its holder can feed nothing: its session's head is no longer that response; a continuation
of the new head must not wait for the lease of an instance that died after its reply was recorded), and a
conversation request's once it was fed and its reply recorded (:func:`_moved_past`). A lease no request takes over
goes when its session is pruned (``Backend.prune_sessions``), and in a Redis store, whose sessions expire unseen, by
its own time to live (:func:`lease_store`); in a local blob store beside Redis sessions, by the proxy's collection
(:func:`drop_abandoned_leases`, ``Backend.collect_blobs``).

A conversation's request tags its lease with the head it read before taking it; the head it is fed on is read again
after (the save of a stale load is refused and redone). When they differ (another request was answered in between)
the holder re-tags its lease before the save that writes its ``fed`` mark (:meth:`Lease.retag`): the lease's tag is
always what the takeover rule compares the ``fed`` mark with, and the same request retried joins it.

A request can last longer than a lease's time (the upstream's timeout is per chunk when streaming; a request makes
up to 7 upstream calls with the retrieval tools and more with overflow recovery): its holder renews its hold
(:meth:`Lease.renew`) at an upstream call or a relayed event once a third of its time or half the margin has passed
(:meth:`Lease.due`), so a live request keeps it and a dead instance's expires. A stream whose client stops reading
relays no event, so it renews nothing: stalled past the lease's time, its hold is taken over by the next
continuation, which is fed and answered. The renewal at its next event, or the check before its reply is recorded,
finds the hold taken (:attr:`Lease.lost`): its reply is not recorded as the session's head (that put the session back
on a response the new holder had continued past: the new holder's reply could no longer be continued), and the
instance logs "lease lost". A lease key found gone says nothing (its time to live, a failover, the collection, or
a new holder that gave it back): the session's ``fed`` mark decides, by compare-and-set in ``save_reply`` (the reply
is the head only while the mark is still the request's own).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import RefNotFound, StoreError
from .apis import Conflict
from .ops import log_event

__all__ = ["LEASE_KEY_PREFIX", "LEASE_MARGIN_S", "MAX_HOLDERS", "Lease", "drop_abandoned_leases", "lease_key",
           "lease_store", "take_lease"]

# Blob-store keys of the leases (no output, memory or limit key starts so: the cache's collection leaves them).
LEASE_KEY_PREFIX = "serve-lease."
# A lease lasts the upstream's read timeout and this much more from its last renewal: a call or stream that has
# sent nothing by then has failed, and a session whose instance died stays closed to other continuations that long.
LEASE_MARGIN_S = 300.0
# A lease key in a store whose keys can expire (Redis) lives this much longer than a hold after each write: a hold's
# time is the instances' wall clocks, the key's the server's, and a key gone before its holders' time frees a live
# lease (another continuation is fed while the holder is in flight).
LEASE_KEY_SLACK_S = LEASE_MARGIN_S
# Tries of one request holding a lease at once: more is a client retrying in a loop, refused like another request.
MAX_HOLDERS = 8
# Compare-and-set rounds of one take that other requests keep changing under it.
_MAX_TRIES = 8
# Rounds of a renewal or give-back of a hold still there. Each round lost is another writer's progress (a try that
# joined, renewed or left), so it goes on much longer than a take: a give-back that stopped at 8 left its hold until
# its expiry (4 of 4,232 give-backs, 6 threads over one SQLite file; reviewer 2, s17). Past it, it says so in the log.
_MAX_CHANGE_ROUNDS = 256


# A holder renews its lease once this share of its time has passed, or half the margin, whichever comes first: the
# next upstream call or event comes within the read timeout, so a live request renews it before it expires.
RENEW_AFTER_SHARE = 1 / 3


@dataclass
class Lease:
    """One try's hold on its session's lease: given back by :meth:`release` (once its reply is recorded).

    ``held``: the lease's bytes as this try last wrote or read them; ``holder``: this try's id among its holders;
    ``lost``: a change found the lease held by others only (taken over once it expired): the session may
    have moved on under another request, so this one must record nothing more of its own as the session's.
    """

    store: Any
    key: str
    held: bytes
    holder: str
    seconds: float
    clock: Callable[[], float]
    renewed_at: float
    lost: bool = False

    def due(self) -> bool:
        """Whether a share of the lease's time has passed since it was taken or renewed (no store call)."""
        return self.clock() - self.renewed_at >= min(self.seconds * RENEW_AFTER_SHARE, LEASE_MARGIN_S / 2)

    def renew(self) -> bool:
        """Give this try's hold ``seconds`` more from now if the lease still holds it; whether it did.

        A lease taken over meanwhile (expired, or on a response the session moved past) stays its new holder's
        (False, and :attr:`lost` set). A store that cannot be reached leaves it as it was (False, not lost).
        """
        now = self.clock()
        self.renewed_at = now
        return self._change("renewal", lambda holders: {**_live(holders, now), self.holder: now + self.seconds})

    def release(self) -> None:
        """Give this try's hold back: the lease is free once no other try of the request holds it.

        A lease taken over meanwhile stays its new holder's; a store that cannot be reached leaves the hold to expire.
        """
        now = self.clock()
        self._change("give-back", lambda holders: {h: t for h, t in _live(holders, now).items() if h != self.holder})

    def retag(self, tag: str) -> None:
        """Name the request by ``tag`` from now on (the head it is fed on moved since it took the lease).

        Raises :class:`Conflict` when this try no longer holds the lease (taken over meanwhile: another request may be
        in flight), so nothing is fed under a tag the lease does not carry.
        """
        if _fields(self.held).get("tag") == tag:
            return
        now = self.clock()
        # (a renewal too: the hold is written anyway; a store outage raises StoreError, the 503 path of open_turn,
        # not Conflict: no other request need be in flight)
        if not self._change("re-tag", lambda holders: {**_live(holders, now), self.holder: now + self.seconds},
                            tag=tag, outage_raises=True):
            raise _conversation_in_flight()
        self.renewed_at = now

    def _change(self, what: str, change: Callable[[dict[str, float]], dict[str, float]],
                tag: str | None = None, outage_raises: bool = False) -> bool:
        """Write the lease with its holders changed by ``change`` while this try is one of them; whether it was.

        ``tag``: the request's new tag (:meth:`retag`), else the lease keeps its own. ``outage_raises``: a store error
        is raised (logged either way), not answered False.
        Retried while the hold is there (each round lost is another writer's progress), up to
        :data:`_MAX_CHANGE_ROUNDS`; giving up then, or on a store error, is logged (``what``: the change).
        """
        current = self.held
        try:
            for _ in range(_MAX_CHANGE_ROUNDS):
                fields = _fields(current)
                holders = _holders(fields)
                if self.holder not in holders:
                    self.lost = True
                    return False
                kept = change(holders)
                written = _encode(fields.get("tag") if tag is None else tag, fields.get("response"), kept) \
                    if kept else None
                if self.store.put_if(self.key, written, current):
                    self.held = written if written is not None else current
                    return True
                current = self.store.get(self.key)  # (another try joined, renewed or left meanwhile)
        except RefNotFound:
            # (gone: its time to live, a failover, drop_abandoned_leases, or taken over and given back. Which, the key
            # cannot tell: not lost. Whether the reply becomes the head is the session's fed mark's say: save_reply.)
            return False
        except StoreError as exc:
            log_event(f"lease {what} failed", level=logging.WARNING, error=type(exc).__name__)
            if outage_raises:
                raise
            return False
        log_event(f"lease {what} gave up", level=logging.WARNING, rounds=_MAX_CHANGE_ROUNDS,
                  holders=len(_holders(_fields(current))))
        return False


def lease_key(session_id: str) -> str:
    """The blob-store key of ``session_id``'s lease (the id does not appear in it)."""
    digest = hashlib.blake2b(session_id.encode("utf-8", "surrogatepass"), digest_size=12, person=b"cf-serve-lease")
    return LEASE_KEY_PREFIX + digest.hexdigest()


def lease_store(blobs: Any, seconds: float) -> Any:
    """The store leases of ``seconds`` are written to: ``blobs``, or for Redis the same keys with a time to live.

    A Redis session expires on its own (``session_max_age_s``), unseen: nothing prunes it, and a lease its instance
    left (it died, or the give-back met an outage) stayed for good, ~150 bytes a session. Each write of a lease (take,
    renewal, give-back) gives its key ``seconds`` + :data:`LEASE_KEY_SLACK_S` to live: past its holders' time, which
    is when it could be taken over anyway. Other stores keep it until it is taken over or its session pruned.
    """
    if type(blobs).__name__ != "RedisBlobStore":
        return blobs
    from ..stores.redis_blob import RedisBlobStore

    return RedisBlobStore(blobs.url, prefix=blobs.prefix, ttl_seconds=math.ceil(seconds + LEASE_KEY_SLACK_S))


def drop_abandoned_leases(store: Any, now: float) -> int:
    """Delete the leases whose every holder's time passed :data:`LEASE_KEY_SLACK_S` or more before ``now``; how many.

    For a store whose keys do not expire (:func:`lease_store` gives Redis's a time to live): a lease its instance
    left (it died, or its give-back met an outage) on a session nothing prunes (a Redis session expires unseen) was
    kept for good. Past its holders' time it could be taken over anyway, and the slack covers the instances' clocks;
    each is deleted by compare-and-set, so a lease taken or joined meanwhile stays.
    """
    dropped = 0
    for info in list(store.entries()):
        if not info.key.startswith(LEASE_KEY_PREFIX):
            continue
        try:
            held = store.get(info.key)
        except RefNotFound:
            continue  # (given back meanwhile)
        holders = _holders(_fields(held))
        if holders and max(holders.values()) + LEASE_KEY_SLACK_S > now:
            continue
        if store.put_if(info.key, None, held):
            dropped += 1
    return dropped


def take_lease(store: Any, session_id: str, response_id: str | None, tag: str, *, seconds: float,
               clock: Callable[[], float], marks: Callable[[], Mapping[str, str]] | None = None) -> Lease:
    """Take the session's lease for ``seconds``; :class:`Conflict` while another request holds it.

    ``response_id``: the response the request continues (None: a ``conversation`` request). ``tag``: the request's
    (:func:`~contextfold.serve.sessions.continuation_tag`, as its ``fed`` mark): a holder of the same tag is the same
    request, retried, and is joined. ``clock``: wall-clock seconds, compared across instances. ``marks``: reads the
    session's marks (one store round trip, only when another request's lease is live): a lease its holder can no
    longer use is taken over (:func:`_moved_past`). Raises StoreError when the store cannot be reached.
    """
    key = lease_key(session_id)
    holder = uuid.uuid4().hex
    for _ in range(_MAX_TRIES):
        now = clock()
        mine = {holder: now + seconds}
        written = _encode(tag, response_id, mine)
        if store.put_new(key, written):
            return Lease(store, key, written, holder, seconds, clock, now)
        try:
            current = store.get(key)
        except RefNotFound:
            continue  # given back meanwhile
        fields = _fields(current)
        live = _live(_holders(fields), now)
        if live and fields.get("tag") != tag:
            if not _moved_past(fields, response_id, marks):
                break
            live = {}  # (its holder can feed nothing more: the session moved on)
        if len(live) >= MAX_HOLDERS:
            break
        written = _encode(tag, response_id, {**live, **mine})
        if store.put_if(key, written, current):
            return Lease(store, key, written, holder, seconds, clock, now)
    if response_id is None:
        raise _conversation_in_flight()
    raise Conflict(f"another continuation of response {response_id!r} is in flight (on this proxy or another "
                   "instance): a response is continued once; retry after it is answered (then continue its reply), "
                   "or send the whole history instead", "previous_response_id")


def _conversation_in_flight() -> Conflict:
    return Conflict("another request of this conversation is in flight (on this proxy or another instance): a "
                    "conversation takes one request at a time; retry after it is answered", "conversation")


def _moved_past(fields: dict[str, Any], response_id: str | None,
                marks: Callable[[], Mapping[str, str]] | None) -> bool:
    """Whether the session moved on from a live lease's holder: it can feed nothing more (its lease may be taken).

    A continuation of a response other than the session's head (``head``) is refused when fed, or was fed and its
    reply recorded. A conversation's request (no response named) was fed (``fed`` is its lease's tag: the head it
    read before taking the lease and its input's keys) and its reply recorded (the head is no longer that one). The
    keys alone matched a request repeating the previous one's input ("go on") before it was fed: the previous one's
    ``fed`` mark has the same keys and an older head (reviewer 2, s17).
    """
    leased, held_tag = fields.get("response"), fields.get("tag")
    if marks is None:
        return False
    if isinstance(leased, str):  # (another continuation of the response this request continues: live, refused)
        return leased != response_id and marks().get("head") != leased
    if leased is not None or not isinstance(held_tag, str):
        return False
    now = marks()
    return now.get("fed") == held_tag and held_tag.rpartition(":")[0] != str(now.get("head"))


def _encode(tag: Any, response: Any, holders: dict[str, float]) -> bytes:
    # ("until": the latest holder's time, for a reader of the lease: the holders' times are what counts)
    return json.dumps({"tag": tag, "response": response, "until": max(holders.values()),
                       "holders": holders}).encode()


def _fields(held: bytes) -> dict[str, Any]:
    try:
        value = json.loads(held)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _holders(fields: dict[str, Any]) -> dict[str, float]:
    """The holders of a lease as stored, with their times (none in one the proxy did not write: taken over)."""
    holders = fields.get("holders")
    if not isinstance(holders, dict):
        return {}
    return {h: t for h, t in holders.items()
            if isinstance(h, str) and isinstance(t, int | float) and not isinstance(t, bool)}


def _live(holders: dict[str, float], now: float) -> dict[str, float]:
    return {h: t for h, t in holders.items() if now < t}
