"""A Redis restarted empty forgets a session's secret memory; a process that still knows it must save it again.

issue 21 §1 and §3 (a Redis restart without persistence): a session's secrets are remembered in its blob store, so a
restarted process or another worker knows them. A Redis that restarts empty loses that memory; the process that
learned the secrets still holds them, but saved only what it learned since its last save, so the store stayed
empty. A new manager of the session (the next turn on another fleet worker, the proxy's next request) knew nothing:
a value taught in context before the restart, repeated bare after it, reached the transcript in clear.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from contextfold.manager import ContextManager
from contextfold.serialize import message_to_dict
from contextfold.testing.services import RedisServer

SECRET = "Wq4-Lm8-Tz2-Hb6"


@pytest.mark.redis
def test_a_secret_taught_before_a_redis_restart_stays_redacted_after_it(tmp_path: Path) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    from contextfold.stores.redis_blob import RedisBlobStore

    with RedisServer(tmp_path) as server:
        first = ContextManager("gpt-4o", store=RedisBlobStore(server.url), archive="memory", session_id="rt6-redis")
        first.add([{"role": "user", "content": f"The queue password: {SECRET} (do not share)."},
                   {"role": "assistant", "content": "noted"}])
        first.prepare()
        first.compact(force=True)  # the teaching message is summarized away; the memory is saved to Redis
        server.stop()
        server.start()  # empty: no persistence
        # The first process goes on: a new message of its own, compacted (it saves what it learned).
        first.add([{"role": "user", "content": "nothing secret here " * 20}, {"role": "assistant", "content": "ok"}])
        first.compact(force=True)
        first.close()
        # The next turn runs on another worker: a new manager of the session, on the same (restarted) Redis.
        second = ContextManager("gpt-4o", store=RedisBlobStore(server.url), archive="memory", session_id="rt6-redis")
        second.add([{"role": "tool", "tool_call_id": "c1", "content": f"connected with {SECRET}"}])
        second.add([{"role": "user", "content": "and then " + "filler " * 40}, {"role": "assistant", "content": "ok"}])
        second.compact(force=True)
        second.close()
        assert second.archive is not None
        archived = json.dumps([message_to_dict(m) for _, ms in second.archive.transcripts("rt6-redis") for m in ms])
    assert SECRET not in archived
