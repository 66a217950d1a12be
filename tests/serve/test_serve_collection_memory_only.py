"""The blob-store collection keeps the secret memory of a live session that cites no output.

A memory is aged by its session's newest claim on an output, or its own last save. A session whose view cites no
cut output writes no claim, and a memory is saved only when a secret is learned: a session continued every few
minutes lost its learned secrets an age after it learned the last one (a9a74c5), while it still lived, and its later
archives and log lines quoted them in clear. Each turn notes the session's use in the blob store now (with its claims,
at most every CLAIM_REFRESH_S), and retention ages a memory by that use too. Time moves on the backend's clock.
"""
from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from _serve_support import ChatConversation, proxy_config, shared_clock, upstream_fixture  # noqa: F401

from contextfold.redact.memory import MEMORY_KEY_PREFIX
from contextfold.serve import ProxyServer
from contextfold.testing import Reply, ScriptedLLMServer
from contextfold.testing.services import RedisServer

MAX_AGE_S = 3600.0


def memory_keys(proxy: ProxyServer) -> list[str]:
    return [info.key for info in proxy.serve_app.backend.blobs.entries() if info.key.startswith(MEMORY_KEY_PREFIX)]


def test_a_live_sessions_memory_outlives_an_age_after_its_last_save(
        upstream: ScriptedLLMServer, redis_server: RedisServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    config = proxy_config(upstream, sessions=redis_server.url, store="local", state_dir=str(tmp_path),
                          archive=str(tmp_path / "archive"), session_max_age_s=MAX_AGE_S)
    with ProxyServer(config) as proxy:
        clock = shared_clock([proxy], monkeypatch, time.time())
        nonce = uuid.uuid4().hex[:8]
        conversation = ChatConversation(proxy, upstream, [
            {"role": "user", "content": f"Task memory-{nonce}: connect to the staging database."},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_env", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "env"}'}}]},
            {"role": "tool", "tool_call_id": "call_env", "content": f"DB_PASSWORD=Zq8vT3mRk1Lp{nonce}\nDB_HOST=db"}])

        def turn(text: str) -> None:
            conversation.turn(Reply("Noted."), text)

        turn("go on")
        learned = memory_keys(proxy)
        assert learned  # (the password, learned in context)
        for _ in range(3):  # the session is continued every 25 minutes, learning nothing new
            clock.now += 25 * 60
            turn("and now?")
        # 75 minutes after the memory's save, 0 after the session's last turn: the hourly collection runs.
        proxy.serve_app.backend.collect_blobs(clock.now)
        assert memory_keys(proxy) == learned  # (before the fix: [], the live session's secrets forgotten)
        # An hour and more after its last turn, the session is gone: its memory goes with it.
        clock.now += MAX_AGE_S + 60
        proxy.serve_app.backend.collect_blobs(clock.now)
        assert memory_keys(proxy) == []
