"""A continuation's lease (serve.leases) over a request's whole life: renewed, given back to an earlier try, and
given back by a request cancelled while it was being taken.

A clock the test moves stands for the wall clock; a store whose ``put_new`` waits on an event holds a take in flight
while the test cancels the request. No sleeps.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import uuid

import pytest

from contextfold.serve.app import _Held
from contextfold.serve.leases import MAX_HOLDERS, lease_key, take_lease
from contextfold.serve.sessions import Conflict, continuation_tag
from contextfold.stores.memory import MemoryBlobStore

# The lease's time in these tests: the default upstream timeout (600 s) and the margin.
LEASE_S = 900.0
# Seconds a test waits for a thread it knows is coming (a failure, not a pace: events end every wait sooner).
WAIT_S = 10.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


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
    assert not first.due()
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
    holder = continuation_tag(None, ["key-a"])
    take_lease(store, session, None, holder, seconds=LEASE_S, clock=clock)  # (then its instance died)
    mine = continuation_tag(None, ["key-b"])
    fed = continuation_tag("resp_1", ["key-a"])  # (what the holder's feed wrote: the head then, its input)
    for marks in ({"head": "resp_1"}, {"head": "resp_1", "fed": fed}, {"head": "resp_2", "fed": "resp_1:other"}):
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
