"""Members of the Redis archive's listing sets that this store could not have written are left out.

The Redis archive lists sessions and each session's files from two sets (``<prefix>:sessions``,
``<prefix>:<id>:names``) in a Redis the fleet shares. Found adding to them on a real redis-server a member that is no
UTF-8 and some that are no session id or file name (``has space``, ``../x``): ``Archive.sessions()`` raised
UnicodeDecodeError, so one stray member stopped every listing of the whole archive (``contextfold status`` of the
fleet's archive with it), and the others were listed as sessions the archive does not hold.
"""

from __future__ import annotations

import pytest
import redis

from contextfold.archive import Archive
from contextfold.messages import Message
from contextfold.redact import Redactor
from contextfold.stores.redis_archive import RedisArchiveStore
from contextfold.testing.services import RedisServer

NONCE = "rt11b-rarch-6c0d"


@pytest.mark.redis
def test_stray_members_are_left_out_of_the_listings(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    store = RedisArchiveStore(redis_server.url)
    archive = Archive(store, redactor=Redactor(enabled=False))
    try:
        archive.archive_transcript("good", [Message("user", f"{NONCE} hello")])
        client.sadd("contextfold:archive:sessions", b"\xff\xfe", "has space", "../x")
        client.sadd("contextfold:archive:good:names", b"\xff", "../etc", "a b")
        assert archive.sessions() == ["good"]
        assert archive.transcript_numbers("good") == [1]
        assert [m.text for m in archive.transcript("good", 1)] == [f"{NONCE} hello"]
    finally:
        store.close()
        client.close()
