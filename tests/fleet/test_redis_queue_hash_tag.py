"""The compaction queue's keys share one Redis Cluster hash tag, and a queue of the untagged layout is read on.

Up to s20 the queue's script touched ``NAME:waiting`` and ``NAME:arrivals``: two hash slots, so on a Redis Cluster
every offer failed (CROSSSLOT). A cluster hashes only the part of a key between ``{`` and ``}``: the keys are
``{NAME}:waiting`` and ``{NAME}:arrivals`` now (or ``NAME:…`` when the name holds a tag). Checked on a real
redis-server by the slot each key the queue wrote hashes to (redis-py's ``key_slot``, the cluster's own CRC16).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from redis.crc import key_slot

from contextfold.stores.redis_queue import RedisJobQueue, queue_keys
from contextfold.testing.services import RedisServer

pytestmark = pytest.mark.redis


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    plain = redis.Redis.from_url(redis_server.url)
    plain.flushall()
    yield plain
    plain.close()


@pytest.mark.parametrize("name", ["contextfold:jobs:compact", "{team-a}:jobs", "odd{}name", "a{b"])
def test_every_key_the_queue_writes_hashes_to_one_slot(redis_server: RedisServer, client: redis.Redis,
                                                       name: str) -> None:
    queue = RedisJobQueue(redis_server.url, name=name)
    try:
        assert queue.offer("s1") and queue.offer("s2") and not queue.offer("s1")
        assert queue.take() == "s1"
        written = sorted(client.keys("*"))
        assert written == sorted(key.encode() for key in queue_keys(name))  # (the counter and the waiting set)
        assert len({key_slot(key) for key in written}) == 1, written  # (before: two slots)
        assert [queue.take(), queue.take()] == ["s2", None]
    finally:
        queue.close()


def test_the_names_own_tag_is_kept() -> None:
    assert queue_keys("{team-a}:jobs") == ("{team-a}:jobs:waiting", "{team-a}:jobs:arrivals")
    assert queue_keys("contextfold:jobs:compact") == ("{contextfold:jobs:compact}:waiting",
                                                      "{contextfold:jobs:compact}:arrivals")


def test_a_queue_of_the_untagged_layout_is_taken_on_in_order(redis_server: RedisServer,
                                                              client: redis.Redis) -> None:
    name = "contextfold:jobs:compact"
    # What s19's layout left: sessions waiting (scores their arrivals) and the counter; an older list beside them.
    client.zadd(f"{name}:waiting", {"old1": 1, "old2": 2})
    client.set(f"{name}:arrivals", 2)
    client.rpush(f"{name}:list", "older")
    queue = RedisJobQueue(redis_server.url, name=name)
    try:
        assert not queue.offer("old2")  # waiting already: moved over first
        assert queue.offer("new1")
        assert client.exists(f"{name}:waiting", f"{name}:arrivals", f"{name}:list") == 0
        assert [queue.take() for _ in range(5)] == ["old1", "old2", "older", "new1", None]
    finally:
        queue.close()


def test_a_name_with_its_own_tag_keeps_its_waiting_sessions(redis_server: RedisServer, client: redis.Redis) -> None:
    # A name holding a tag had its keys in one slot already: they are the new ones, kept as they are.
    client.zadd("{team-a}:jobs:waiting", {"kept": 1})
    client.set("{team-a}:jobs:arrivals", 1)
    queue = RedisJobQueue(redis_server.url, name="{team-a}:jobs")
    try:
        assert queue.offer("next")
        assert [queue.take(), queue.take(), queue.take()] == ["kept", "next", None]
    finally:
        queue.close()
