"""The fleet's compaction queue when the answer to a take is lost, or a worker dies in the middle of one.

Found on afa4c7c against a real redis-server behind a loopback proxy that drops the connection instead of passing on
the answer that hands out a job: the job was popped but its session's pending flag stayed set, so every later
``offer`` of that session answered "already waiting" while nothing was waiting, and it never had a background
compaction again. A worker killed between a blocking take's pop and the flag's clearing left the same state.

Found on that fix (review of s19f): an offer finding a flag without an entry queued the session, and when that offer
landed inside a blocking take (after its BLPOP, before its SREM) the take's SREM then cleared the new entry's flag:
the next offer queued the session a second time (two compactions of one session). The queue is now one sorted set
(a member is waiting; a pop removes it in one step); keys of the old layout are moved into it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.errors import StoreError
from contextfold.stores.redis_queue import RedisJobQueue, queue_keys
from contextfold.testing.services import RedisServer

pytestmark = pytest.mark.redis

QUEUE = "rt22:jobs"


class RedisRelay:
    """A TCP relay to a redis-server on loopback: each client connection gets one of its own to the server.

    Subclasses say what happens to the server's answers (:meth:`_pass_on`).
    """

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"redis://127.0.0.1:{self._listener.getsockname()[1]}/0"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pass_on(self, data: bytes) -> bool:
        """Called with each piece of an answer before it is relayed; False drops the connection instead."""
        return True

    def _pump(self, source: socket.socket, target: socket.socket, answers: bool) -> None:
        try:
            while data := source.recv(65536):
                if answers and not self._pass_on(data):
                    break
                target.sendall(data)
        except OSError:
            pass
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self._listener.close()


class AnswerHoldingProxy(RedisRelay):
    """A relay that holds the first answer holding ``marker`` until ``release`` is set."""

    def __init__(self, upstream_port: int, marker: bytes) -> None:
        self.marker = marker
        self.seen = threading.Event()
        self.release = threading.Event()
        super().__init__(upstream_port)

    def _pass_on(self, data: bytes) -> bool:
        if self.marker in data and not self.seen.is_set():
            self.seen.set()
            self.release.wait(30)
        return True

    def close(self) -> None:
        self.release.set()
        super().close()


class AnswerDroppingProxy(RedisRelay):
    """A relay that drops the connection at the first answer holding ``lost``."""

    def __init__(self, upstream_port: int, lost: bytes) -> None:
        self.lost = lost
        self.dropped = 0
        self._lock = threading.Lock()
        super().__init__(upstream_port)

    def _pass_on(self, data: bytes) -> bool:
        with self._lock:
            drop = self.dropped == 0 and self.lost in data
            self.dropped += drop
        return not drop


ALL_KEYS = [*queue_keys(QUEUE), f"{QUEUE}:waiting", f"{QUEUE}:arrivals", f"{QUEUE}:list", f"{QUEUE}:pending"]


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    plain = redis.Redis.from_url(redis_server.url)
    plain.delete(*ALL_KEYS)
    yield plain
    plain.close()


def test_a_job_whose_answer_was_lost_can_be_queued_again(redis_server: RedisServer, client: redis.Redis) -> None:
    # The answer handing out session1 (the offers' answers are numbers).
    proxy = AnswerDroppingProxy(redis_server.port, lost=b"$8\r\nsession1\r\n")
    queue = RedisJobQueue(proxy.url, name=QUEUE)
    try:
        assert queue.offer("session1") and queue.offer("session2")
        with pytest.raises(StoreError, match="cannot take a job"):
            queue.take()
        assert proxy.dropped == 1
        # session1's job went with the lost answer; its next turn queues it again, and a worker gets it.
        assert queue.offer("session1")
        assert [queue.take(), queue.take(), queue.take()] == ["session2", "session1", None]
        assert len(queue) == 0
    finally:
        queue.close()
        proxy.close()


def test_an_offer_inside_a_blocking_take_queues_the_session_once(redis_server: RedisServer,
                                                                  client: redis.Redis) -> None:
    proxy = AnswerHoldingProxy(redis_server.port, marker=b"session1")
    worker = RedisJobQueue(proxy.url, name=QUEUE)  # its blocking take's answer is held by the proxy
    turns = RedisJobQueue(redis_server.url, name=QUEUE)  # another process's turns, direct
    try:
        assert turns.offer("session1")
        taken: list[str | None] = []
        thread = threading.Thread(target=lambda: taken.append(worker.take(timeout=10)))
        thread.start()
        assert proxy.seen.wait(10)  # the job is handed out; the worker has not read its answer yet
        assert turns.offer("session1")  # a turn lands meanwhile: the session is not waiting, so it is queued
        proxy.release.set()
        thread.join(10)
        assert taken == ["session1"]
        assert not turns.offer("session1")  # the next turn: waiting already (s19f queued it a second time)
        assert len(turns) == 1
        assert [turns.take(), turns.take()] == ["session1", None]
    finally:
        worker.close()
        turns.close()
        proxy.close()


def test_the_old_layouts_entries_are_moved_into_the_queue(redis_server: RedisServer, client: redis.Redis) -> None:
    # What a deployment of the two-key layout leaves: entries, their flags, and a flag a cut take left alone.
    client.rpush(f"{QUEUE}:list", "old1", "old2")
    client.sadd(f"{QUEUE}:pending", "old1", "old2", "orphan")
    newer = RedisJobQueue(redis_server.url, name=QUEUE)
    assert newer.offer("new1")  # after the old entries it moved
    newer.close()
    client.rpush(f"{QUEUE}:list", "old3", "new1")  # an old worker still writing; then a fresh object moves them
    queue = RedisJobQueue(redis_server.url, name=QUEUE)
    try:
        assert len(queue) == 4  # old1, old2, new1, old3: new1 once
        assert client.exists(f"{QUEUE}:list", f"{QUEUE}:pending") == 0
        assert not queue.offer("old2")
        assert queue.offer("orphan")  # a flag without an entry was no waiting session
        assert [queue.take() for _ in range(6)] == ["old1", "old2", "new1", "old3", "orphan", None]
    finally:
        queue.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.sampled_from(["s1", "s2", "s3", "s\u00e9"]), st.none()), max_size=30))
def test_the_queue_behaves_as_an_ordered_set(redis_server: RedisServer, steps: list[str | None]) -> None:
    plain = redis.Redis.from_url(redis_server.url)
    plain.delete(*ALL_KEYS)
    queue = RedisJobQueue(redis_server.url, name=QUEUE)
    model: dict[str, None] = {}  # insertion-ordered: the waiting sessions, oldest first
    try:
        for step in steps:
            if step is None:  # a take
                expected = next(iter(model), None)
                model.pop(expected or "", None)
                assert queue.take() == expected
            else:
                assert queue.offer(step) == (step not in model)
                model.setdefault(step)
            assert len(queue) == len(model)
    finally:
        queue.close()
        plain.close()
