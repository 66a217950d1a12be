"""A session's own learned limit survives a restart, and stays the session's.

issue 21 §2, the known hole: the store keeps only what holds for every caller of a model (``shared_ceiling``); the
lower part one session's own requests taught (their ``max_tokens`` left less room for the input) lived in its
manager only, so a restarted process, or the proxy's per-request manager on another instance, sent the next request
at the shared size and met one more overflow error. The session's part is now kept in the store under the session
(never read by another session), and goes with the session's other records at retention.
"""

from __future__ import annotations

import time
from pathlib import Path

from contextfold.cache.owners import Retention
from contextfold.manager import ContextManager


def manager(store: str, session: str) -> ContextManager:
    return ContextManager("gpt-4o", store=store, archive="memory", session_id=session)


def test_a_restarted_manager_keeps_its_sessions_own_lower_limit(tmp_path: Path) -> None:
    store = f"local://{tmp_path / 'store'}"
    cm = manager(store, "s1")
    assert cm.learn_limit(300, shared=9_000)
    cm.close()
    again = manager(store, "s1")
    again.add({"role": "user", "content": "next"})
    again.prepare()  # (the stored limit applies from the first prepare)
    assert again.learned_limit == 300 and again.budgets.hard <= 300
    # Another session of the store: only the shared part (one caller's max_tokens poisons no one else).
    assert manager(store, "s2").learned_limit == 9_000
    # Lower still in the new process; and the shared part going down reaches the session too.
    assert again.learn_limit(250, shared=9_000)
    assert manager(store, "s1").learned_limit == 250
    assert manager(store, "s3").learn_limit(8_000)
    assert (manager(store, "s1").learned_limit, manager(store, "s2").learned_limit) == (250, 8_000)


def test_forgetting_forgets_the_sessions_own_limit_too(tmp_path: Path) -> None:
    store = f"local://{tmp_path / 'store'}"
    cm = manager(store, "s1")
    cm.learn_limit(300, shared=9_000)
    cm.forget_learned_limit()
    assert manager(store, "s1").learned_limit is None


def test_retention_drops_a_sessions_own_limit_with_the_session(tmp_path: Path) -> None:
    store = f"local://{tmp_path / 'store'}"
    cm = manager(store, "old-session")
    cm.learn_limit(300, shared=9_000)
    assert cm.cache is not None
    keys_before = {info.key for info in cm.cache.store.entries()}
    cm.cache.retention = Retention(max_age_s=3600, max_bytes=None)
    cm.cache.retain(now=time.time() + 2 * 3600)
    keys_after = {info.key for info in cm.cache.store.entries()}
    dropped = keys_before - keys_after
    assert any("old-session" not in key and key.startswith("session-limit.") for key in dropped), dropped
    assert manager(store, "old-session").learned_limit == 9_000  # the shared part stays (it is the model's)



def test_a_learned_limit_is_written_again_after_redis_restarts_empty(tmp_path: Path) -> None:
    # A Redis without persistence restarted: the process still knows the limits it learned, the store does not; the
    # next manager of the model (another worker, the proxy's next request) met the provider's error again.
    import shutil

    import pytest

    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    from contextfold.stores.redis_blob import RedisBlobStore
    from contextfold.testing.services import RedisServer

    with RedisServer(tmp_path) as server:
        cm = ContextManager("gpt-4o", store=RedisBlobStore(server.url), archive="memory", session_id="s1")
        cm.add({"role": "user", "content": "hello"})
        cm.prepare()
        assert cm.learn_limit(300, shared=9_000)
        server.stop()
        server.start()  # empty
        cm.add({"role": "user", "content": "and again"})
        cm.prepare()  # the next call of the process that knows the limits
        others = [ContextManager("gpt-4o", store=RedisBlobStore(server.url), archive="memory", session_id=session)
                  for session in ("s2", "s1")]
        assert [m.learned_limit for m in others] == [9_000, 300]
        cm.close()
