"""A closed manager keeps none of its output cache's memos (rendered views, ref ids by text, needs-a-view answers).

``ContextManager.close()`` released the redactor's ledger and the placeholders built ahead (fifteenth session) but
not the cache's memos: in a 40-turn session of 30 KB outputs at a 16K window, dropping a closed manager the caller
still held freed ~1.9 MB (tracemalloc, the local store): 18 rendered views (1.3 MB with what they were counted with)
and the outputs' texts kept by their ref ids. They are there to spare later writes and views; after close there are
none (the store is closed: nothing is read through the cache again).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contextfold import ContextManager
from contextfold.messages import Message, ToolCall

NONCE = "s15r2closed"
OUTPUT_CHARS = 30_000


def _output(i: int) -> Message:
    body = f"{NONCE} run {i}\n" + "".join(f"step {k} of run {i}: the build passed\n" for k in range(OUTPUT_CHARS // 32))
    return Message.tool(f"c{i}", body + f"\nexport DB_PASSWORD=Zq{i:04d}{NONCE}Kx9\n", name="bash")


def test_a_closed_manager_keeps_no_cache_memos(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Fails on 96ca2cf and before: the views rendered and the outputs' texts stayed in the closed manager's cache.
    monkeypatch.chdir(tmp_path)  # (the default local store and archive, under .contextfold/)
    cm = ContextManager("gpt-4o", max_context_tokens=16_000, session_id=f"{NONCE}-s")
    for i in range(3):
        cm.add(Message.user(f"look at run {i} {NONCE}"))
        cm.add(Message("assistant", "", tool_calls=(ToolCall(f"c{i}", "bash", '{"cmd": "make"}'),)))
        cm.add(_output(i))
        cm.prepare()
    cache = cm.cache
    assert cache is not None and len(cache._views) > 0 and cache._views.bytes > OUTPUT_CHARS // 10
    cm.close()
    assert len(cache._views) == 0 and cache._views.bytes == 0
    assert len(cache._needs) == 0
    assert not cache._ref_ids._entries and not cache._ref_ids._staged
