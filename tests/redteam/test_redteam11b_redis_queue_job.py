"""A compaction job someone else pushed onto the fleet's Redis queue is a StoreError naming the queue.

Found pushing bytes that are no UTF-8 onto the queue (then ``contextfold:jobs:compact:list``) on a real redis-server:
``take()`` raised UnicodeDecodeError, which no fleet caller expects of a store (they handle StoreError). The bad job
is taken off the queue, and the next take returns the next job.
"""

from __future__ import annotations

import re

import pytest
import redis

from contextfold.errors import StoreError
from contextfold.stores.redis_queue import RedisJobQueue
from contextfold.testing.services import RedisServer

NONCE = "rt11b-queue-3f8a"


@pytest.mark.redis
def test_a_job_that_is_no_utf8_is_a_store_error_and_the_queue_goes_on(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    queue = RedisJobQueue(redis_server.url)
    try:
        client.zadd("{contextfold:jobs:compact}:waiting", {b"\xff\xfe": 0})
        assert queue.offer(NONCE)
        with pytest.raises(StoreError, match=re.escape("Redis queue '{contextfold:jobs:compact}:waiting'")):
            queue.take()
        assert queue.take() == NONCE
    finally:
        queue.close()
        client.close()
