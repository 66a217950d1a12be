"""The fleet's compaction queue when the answer to a take is lost, or a worker dies in the middle of one.

Found on afa4c7c against a real redis-server behind a loopback proxy that drops the connection instead of passing on
the answer that hands out a job: the job was popped but its session's pending flag stayed set, so every later
``offer`` of that session answered "already waiting" while nothing was waiting, and it never had a background
compaction again. A worker killed between a blocking take's pop and the flag's clearing left the same state.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest
import redis

from contextfold.errors import StoreError
from contextfold.stores.redis_queue import RedisJobQueue
from contextfold.testing.services import RedisServer

pytestmark = pytest.mark.redis

QUEUE = "rt22:jobs"


class AnswerDroppingProxy:
    """A TCP relay to a redis-server that drops the connection at the first answer equal to ``lost``."""

    def __init__(self, upstream_port: int, lost: bytes) -> None:
        self.upstream_port = upstream_port
        self.lost = lost
        self.dropped = 0
        self._lock = threading.Lock()
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

    def _pump(self, source: socket.socket, target: socket.socket, answers: bool) -> None:
        try:
            while data := source.recv(65536):
                if answers:
                    with self._lock:
                        drop = self.dropped == 0 and data == self.lost
                        self.dropped += drop
                    if drop:
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


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    plain = redis.Redis.from_url(redis_server.url)
    plain.delete(f"{QUEUE}:list", f"{QUEUE}:pending")
    yield plain
    plain.close()


def test_a_job_whose_answer_was_lost_can_be_queued_again(redis_server: RedisServer, client: redis.Redis) -> None:
    proxy = AnswerDroppingProxy(redis_server.port, lost=b"$8\r\nsession1\r\n")  # the answer handing out session1
    queue = RedisJobQueue(proxy.url, name=QUEUE)
    try:
        assert queue.offer("session1") and queue.offer("session2")
        with pytest.raises(StoreError, match="cannot take a job"):
            queue.take()
        assert proxy.dropped == 1
        # session1's job went with the lost answer; its next turn queues it again, and a worker gets it.
        assert queue.offer("session1")
        assert [queue.take(), queue.take(), queue.take()] == ["session2", "session1", None]
        assert client.smembers(f"{QUEUE}:pending") == set()
    finally:
        queue.close()
        proxy.close()


def test_a_flag_left_by_a_worker_killed_mid_take_does_not_block_the_session(
        redis_server: RedisServer, client: redis.Redis) -> None:
    queue = RedisJobQueue(redis_server.url, name=QUEUE)
    try:
        assert queue.offer("session1")
        # What a worker killed between a blocking take's pop and its clearing of the flag leaves behind.
        assert client.blpop([f"{QUEUE}:list"], timeout=1) == (f"{QUEUE}:list".encode(), b"session1")
        assert queue.offer("session1")
        assert not queue.offer("session1")  # waiting now: at most one entry
        assert client.lrange(f"{QUEUE}:list", 0, -1) == [b"session1"]
        assert queue.take(timeout=1) == "session1"
        assert client.smembers(f"{QUEUE}:pending") == set()
    finally:
        queue.close()
