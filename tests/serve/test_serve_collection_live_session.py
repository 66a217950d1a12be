"""The blob-store collection keeps the cut outputs a live session's view still cites (``ref=...``).

Retention ages each output by its claims. A cache claims an output when it stores or reads it, so a proxied session
whose early output was cut (the view cites its ref) and which is continued without reading it again had that output
deleted session_max_age_s after it was stored, while the session was live: the model's retrieval of the ref its view
cites then failed. Each turn claims again what the saved view cites (at most every CLAIM_REFRESH_S). Time passes
on the backend's clock (a fake one), not by sleeping.
"""
from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from _serve_support import MODEL, ChatConversation, proxy_config, shared_clock

from contextfold.cache import ToolOutputCache
from contextfold.cache.owners import owner_key, owner_tag, write_claim
from contextfold.cache.refs import ref_id_for
from contextfold.serve import ProxyServer
from contextfold.serve.collection import collect
from contextfold.stores.memory import MemoryBlobStore
from contextfold.testing import Reply, ScriptedLLMServer, ScriptedToolCall
from contextfold.testing.services import RedisServer

MAX_AGE_S = 3600.0


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(default="Done.", context_window=200_000) as server:
        yield server


def build_log(tag: str, lines_count: int = 900) -> str:
    lines = [f"{tag} [{i:04d}] step {i} ok" for i in range(lines_count)]
    lines[600] = f"{tag} [0600] needle: linker error in unit_42.o"
    return "\n".join(lines)


def test_an_output_a_live_session_cites_survives_collection(upstream: ScriptedLLMServer, redis_server: RedisServer,
                                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = proxy_config(upstream, sessions=redis_server.url, store="local", state_dir=str(tmp_path),
                          archive=str(tmp_path / "archive"), session_max_age_s=MAX_AGE_S, retrieval_tools=True,
                          windows={MODEL: 30_000})
    with ProxyServer(config) as proxy:
        clock = shared_clock([proxy], monkeypatch, time.time())
        nonce = uuid.uuid4().hex[:8]
        log = build_log(nonce)
        ref = ref_id_for(log.encode())
        turn = ChatConversation(proxy, upstream, [
            {"role": "user", "content": f"Task live-{nonce}: why does the build fail?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_make", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "make"}'}}]},
            {"role": "tool", "tool_call_id": "call_make", "content": log}]).turn

        before = len(upstream.requests)
        turn(Reply("Reading it."), "go on")
        assert "ref=" + ref in json.dumps(upstream.requests[before].body["messages"])  # (cut: the view cites it)
        clock.now += 50 * 60  # (50 minutes pass: the output's claim, written when it was stored, is that old)
        turn(Reply("Still on it."), "and now?")  # the session is continued now: live
        # 20 minutes later (the session used 20 minutes ago, well within its hour) the hourly collection runs.
        clock.now += 20 * 60
        proxy.serve_app.backend.collect_blobs(clock.now)
        before = len(upstream.requests)
        turn([Reply.calling(ScriptedToolCall("tool_output_cache_grep", {"ref_id": ref, "pattern": "needle"},
                                             id="call_grep")), "unit_42.o"], "thanks")
        assert "ref=" + ref in json.dumps(upstream.requests[before].body["messages"])  # (still cited)
        grep_result = json.dumps(upstream.requests[before + 1].body["messages"][-1])
        assert "needle: linker error" in grep_result, grep_result  # (before the fix: deleted)


class ClaimedMeanwhile(MemoryBlobStore):
    """A store where a session claims the output again right after the collection first read its claim."""

    def __init__(self, ref: str, tag: str, at: float) -> None:
        super().__init__()
        self.claim_key, self.ref, self.tag, self.at = owner_key(ref, tag), ref, tag, at
        self.claimed = False

    def read_range(self, key: str, start: int, length: int) -> bytes:
        data = super().read_range(key, start, length)
        if key == self.claim_key and not self.claimed:
            self.claimed = True
            write_claim(self, self.ref, self.tag, self.at)  # (the session used it meanwhile)
        return data


def test_an_output_claimed_while_collection_runs_stays() -> None:
    now = time.time()
    text = build_log("meanwhile")
    ref, tag = ref_id_for(text.encode()), owner_tag("a-session-in-use")
    store = ClaimedMeanwhile(ref, tag, now)
    ToolOutputCache(store, session_id="a-session-in-use").put(text)
    write_claim(store, ref, tag, now - 2 * MAX_AGE_S)  # (its claim as the collection reads it first: long unused)
    assert collect(store, "one-instance", MAX_AGE_S, now, leases=False) == 0  # (before the fix: 1, deleted)
    assert store.claimed and store.exists(ref) and store.get(ref) == text.encode()
