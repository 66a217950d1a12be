"""A continuation's lease (serve.leases) over a request's whole life: renewed, given back to an earlier try, and
given back by a request cancelled while it was being taken.

A clock the test moves stands for the wall clock; a store whose ``put_new`` waits on an event holds a take in flight
while the test cancels the request. No sleeps.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _serve_support import Clock

from contextfold.serve.app import _Held
from contextfold.serve.leases import MAX_HOLDERS, Lease, lease_key, take_lease
from contextfold.serve.sessions import Conflict, continuation_tag
from contextfold.stores.local import LocalBlobStore
from contextfold.stores.memory import MemoryBlobStore

# The lease's time in these tests: the default upstream timeout (600 s) and the margin.
LEASE_S = 900.0
# Seconds a test waits for a thread it knows is coming (a failure, not a pace: events end every wait sooner).
WAIT_S = 10.0


def names() -> tuple[str, str]:
    nonce = uuid.uuid4().hex[:8]
    return f"session-{nonce}", f"resp_{nonce}"


def test_a_renewed_lease_outlives_its_first_time() -> None:
    store, clock = MemoryBlobStore(), Clock()
    session, response = names()
    first = take_lease(store, session, response, "tag-a", seconds=LEASE_S, clock=clock)
    clock.now += LEASE_S / 2  # (a stream still relaying, or a later retrieval round)
    assert first.due()
    assert first.renew()
    assert not first.due() and not first.lost
    clock.now += LEASE_S - 1  # past the first time, within the renewed one
    with pytest.raises(Conflict):
        take_lease(store, session, response, "tag-b", seconds=LEASE_S, clock=clock)
    first.release()
    take_lease(store, session, response, "tag-b", seconds=LEASE_S, clock=clock)


def test_an_expired_lease_taken_over_is_not_renewed_by_its_old_holder() -> None:
    store, clock = MemoryBlobStore(), Clock()
    session, response = names()
    dead = take_lease(store, session, response, "tag-a", seconds=LEASE_S, clock=clock)
    clock.now += LEASE_S + 1
    other = take_lease(store, session, response, "tag-b", seconds=LEASE_S, clock=clock)
    assert not dead.renew()
    assert dead.lost  # (its request must record nothing more as the session's: serve.app._Held.still_held)
    dead.release()
    assert store.get(lease_key(session)) == other.held


def test_a_retry_gives_back_the_lease_it_took_over_from_the_request_in_flight() -> None:
    store, clock = MemoryBlobStore(), Clock()
    session, response = names()
    first = take_lease(store, session, response, "tag-a", seconds=LEASE_S, clock=clock)
    retry = take_lease(store, session, response, "tag-a", seconds=LEASE_S, clock=clock)  # (same input: an SDK's)
    retry.release()  # (its call failed fast; the first is still in flight)
    with pytest.raises(Conflict):
        take_lease(store, session, response, "tag-b", seconds=LEASE_S, clock=clock)
    clock.now += LEASE_S / 2
    assert first.renew()  # (the first keeps renewing it)
    first.release()
    take_lease(store, session, response, "tag-b", seconds=LEASE_S, clock=clock)


def test_a_retry_of_a_dead_request_gives_back_nothing_of_it() -> None:
    store, clock = MemoryBlobStore(), Clock()
    session, response = names()
    take_lease(store, session, response, "tag-a", seconds=LEASE_S, clock=clock)  # (its instance died)
    clock.now += LEASE_S + 1
    take_lease(store, session, response, "tag-a", seconds=LEASE_S, clock=clock).release()
    assert not store.exists(lease_key(session))


class HeldTake(MemoryBlobStore):
    """A store whose first ``put_new`` waits until the test lets it go; a lease given back sets ``given_back``."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.go, self.given_back = threading.Event(), threading.Event(), threading.Event()

    def put_new(self, key: str, data: bytes) -> bool:
        self.entered.set()
        self.go.wait(WAIT_S)
        return super().put_new(key, data)

    def put_if(self, key: str, data: bytes | None, expected: bytes | None) -> bool:
        done = super().put_if(key, data, expected)
        if data is None:
            self.given_back.set()
        return done


def test_a_request_cancelled_while_its_lease_is_taken_gives_it_back() -> None:
    store, clock = HeldTake(), Clock()
    session, response = names()
    unlocked: list[bool] = []

    async def cancelled_request() -> None:
        held = _Held(lambda: unlocked.append(True))
        taking = asyncio.create_task(held.take(functools.partial(
            take_lease, store, session, response, "tag-a", seconds=LEASE_S, clock=clock)))
        assert await asyncio.to_thread(store.entered.wait, WAIT_S)
        taking.cancel()  # (its client gone, or the server's shutdown grace over)
        with pytest.raises(asyncio.CancelledError):
            await taking
        await held.release()  # (what proxy()'s finally does)
        store.go.set()
        assert await asyncio.to_thread(store.given_back.wait, WAIT_S)

    asyncio.run(cancelled_request())
    assert unlocked == [True]
    assert not store.exists(lease_key(session))
    take_lease(store, session, response, "tag-b", seconds=LEASE_S, clock=clock)  # (an edited retry: taken)


def test_a_first_try_ending_before_its_retry_leaves_the_lease_free_once_both_ended() -> None:
    store, clock = MemoryBlobStore(), Clock()
    session, response = names()
    first = take_lease(store, session, response, "tag-a", seconds=LEASE_S, clock=clock)
    retry = take_lease(store, session, response, "tag-a", seconds=LEASE_S, clock=clock)
    first.release()  # (c04dd8d: the retry's give-back then put the first's lease back, live until its expiry)
    with pytest.raises(Conflict):
        take_lease(store, session, response, "tag-b", seconds=LEASE_S, clock=clock)  # (the retry is in flight)
    retry.release()
    assert not store.exists(lease_key(session))
    take_lease(store, session, response, "tag-b", seconds=LEASE_S, clock=clock)


def test_a_lease_on_a_response_the_session_moved_past_is_taken_over() -> None:
    store, clock = MemoryBlobStore(), Clock()
    session, response = names()
    take_lease(store, session, response, "tag-a", seconds=LEASE_S, clock=clock)  # (recorded its reply, then died)
    with pytest.raises(Conflict):  # (the session still at that response: its holder may be feeding it)
        take_lease(store, session, "resp_next", "tag-b", seconds=LEASE_S, clock=clock, marks=lambda: {"head": response})
    taken = take_lease(store, session, "resp_next", "tag-b", seconds=LEASE_S, clock=clock,
                       marks=lambda: {"head": "resp_next"})
    assert store.get(lease_key(session)) == taken.held


def test_a_conversations_lease_is_taken_over_once_its_holders_reply_is_recorded() -> None:
    store, clock = MemoryBlobStore(), Clock()
    session, _ = names()
    fed = continuation_tag("resp_1", ["key-a"])  # (the head the holder read before taking it, and its input)
    take_lease(store, session, None, fed, seconds=LEASE_S, clock=clock)  # (then its instance died)
    mine = continuation_tag("resp_1", ["key-b"])
    previous = continuation_tag("resp_0", ["key-a"])  # (the request before it, whose input it repeats: "go on")
    for marks in ({"head": "resp_1"}, {"head": "resp_1", "fed": fed}, {"head": "resp_2", "fed": "resp_1:other"},
                  {"head": "resp_1", "fed": previous}):
        with pytest.raises(Conflict) as refused:  # (not fed yet, or fed with no reply recorded: it may be live)
            take_lease(store, session, None, mine, seconds=LEASE_S, clock=clock, marks=lambda m=marks: m)
        assert refused.value.field == "conversation"
    taken = take_lease(store, session, None, mine, seconds=LEASE_S, clock=clock,
                       marks=lambda: {"head": "resp_2", "fed": fed})  # (its reply recorded: the head moved)
    assert store.get(lease_key(session)) == taken.held


def test_a_request_retried_past_the_holders_bound_is_refused() -> None:
    store, clock = MemoryBlobStore(), Clock()
    session, response = names()
    for _ in range(MAX_HOLDERS):
        take_lease(store, session, response, "tag-a", seconds=LEASE_S, clock=clock)
    with pytest.raises(Conflict):
        take_lease(store, session, response, "tag-a", seconds=LEASE_S, clock=clock)
    clock.now += LEASE_S + 1  # (all of them dead)
    take_lease(store, session, response, "tag-a", seconds=LEASE_S, clock=clock)


class Churning:
    """A store where another try of the request joins the lease just before each of the next ``rounds`` CAS of the
    try under test, and the one that joined before leaves: the lease's bytes change under it every time."""

    def __init__(self, store: MemoryBlobStore, session: str, response: str, clock: Clock, rounds: int) -> None:
        self.store, self.session, self.response, self.clock, self.rounds = store, session, response, clock, rounds
        self.other: Lease | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def put_if(self, key: str, data: bytes | None, expected: bytes | None) -> bool:
        if self.rounds > 0:
            self.rounds -= 1
            joined = take_lease(self.store, self.session, self.response, "tag-a", seconds=LEASE_S, clock=self.clock)
            if self.other is not None:
                self.other.release()
            self.other = joined
        return bool(self.store.put_if(key, data, expected))


@pytest.fixture
def lease_log() -> Iterator[list[logging.LogRecord]]:
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("contextfold.serve")
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


def test_a_give_back_outlasts_other_tries_joining_and_leaving(lease_log: list[logging.LogRecord]) -> None:
    # Reviewer 2 (s17): a give-back stopped after 8 lost rounds and left its hold until its expiry (an edited
    # request of the session refused 409 that long); each lost round is another writer's progress.
    store, clock = MemoryBlobStore(), Clock()
    session, response = names()
    lease = take_lease(store, session, response, "tag-a", seconds=LEASE_S, clock=clock)
    churning = Churning(store, session, response, clock, rounds=40)
    lease.store = churning
    lease.release()
    assert churning.rounds == 0  # (it lost all 40 rounds before it won)
    left = json.loads(store.get(lease_key(session)))["holders"]
    assert lease.holder not in left and list(left) == [churning.other.holder if churning.other else None]
    assert not lease_log


def test_a_give_back_that_never_wins_a_round_says_so(lease_log: list[logging.LogRecord]) -> None:
    store, clock = MemoryBlobStore(), Clock()
    session, response = names()
    lease = take_lease(store, session, response, "tag-a", seconds=LEASE_S, clock=clock)
    lease.store = Churning(store, session, response, clock, rounds=10_000)
    lease.release()
    assert lease.holder in json.loads(store.get(lease_key(session)))["holders"]  # (left to expire)
    assert [r.getMessage() for r in lease_log] == ["lease give-back gave up"]


def test_a_give_back_over_the_local_store_reads_the_lease_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                lease_log: list[logging.LogRecord]) -> None:
    # The local store's get read the size, then the bytes: a try joining in between made it return the new lease
    # cut at the old size, which a give-back read as its hold gone (6 threads over one SQLite file, 3-6 of ~3,500
    # give-backs left their hold; none now).
    store, clock = LocalBlobStore(tmp_path), Clock()
    session, response = names()
    lease = take_lease(store, session, response, "tag-a", seconds=LEASE_S, clock=clock)
    take_lease(store, session, response, "tag-a", seconds=LEASE_S, clock=clock)  # (the give-back's first CAS loses)
    real_size, armed = store.size, [True]

    def size_then_join(key: str) -> int | None:
        size = real_size(key)
        if armed:
            armed.clear()
            take_lease(store, session, response, "tag-a", seconds=LEASE_S, clock=clock)  # (between get's reads)
        return size

    monkeypatch.setattr(store, "size", size_then_join)
    lease.release()
    left = json.loads(store.get(lease_key(session)))["holders"]
    assert lease.holder not in left and len(left) >= 1
    assert not lease_log
