"""Sessions sharing one local store stay apart: grep, reads and GC see only their own outputs; retention bounds it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from contextfold.cache import GREP_TOOL, READ_TOOL, BlobStore, Retention, ToolOutputCache, owner_key, owner_tag
from contextfold.errors import StoreError
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.stores.local import LocalBlobStore
from contextfold.stores.memory import MemoryBlobStore

DAY = 24 * 3600.0


def big_output(tag: str) -> str:
    # Over the 50 KiB in-context limit, so the cache keeps it whole under a ref.
    return "\n".join(f"{tag} line {i}: " + "x" * 60 for i in range(1_200))


def tool_turn(n: int, output: str) -> list[Message]:
    call = ToolCall(f"call_{n}", "bash", json.dumps({"cmd": f"run {n}"}))
    return [Message.assistant("", [call]), Message.tool(call.id, output, name="bash")]


def ref_of(cm: ContextManager) -> str:
    [ref] = [m.meta["ref"] for m in cm.messages() if m.meta.get("ref")]
    return str(ref)


@pytest.fixture
def two_sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ContextManager, ContextManager]:
    monkeypatch.chdir(tmp_path)  # the default store="local" lives in ./.contextfold/
    a = ContextManager("gpt-4o", session_id="session-a", archive="memory")
    b = ContextManager("gpt-4o", session_id="session-b", archive="memory")
    a.add([Message.user("go"), *tool_turn(1, big_output("alpha-secret"))])
    b.add([Message.user("go"), *tool_turn(1, big_output("bravo"))])
    yield a, b
    a.close()
    b.close()


def test_grep_without_a_ref_searches_only_the_callers_outputs(
        two_sessions: tuple[ContextManager, ContextManager]) -> None:
    a, b = two_sessions
    assert a.cache is not None and b.cache is not None
    grep = ToolCall("g", GREP_TOOL, json.dumps({"pattern": "alpha-secret line 7:"}))
    assert b.cache.execute_tool_call(grep).text == "no match for /alpha-secret line 7:/ in 1 cached output(s)"
    found = a.cache.execute_tool_call(grep).text.splitlines()
    assert found[1] == f"{ref_of(a)}:8:alpha-secret line 7: " + "x" * 60


def test_a_session_cannot_read_another_sessions_output_by_ref(
        two_sessions: tuple[ContextManager, ContextManager]) -> None:
    a, b = two_sessions
    assert a.cache is not None and b.cache is not None
    read = ToolCall("r", READ_TOOL, json.dumps({"ref_id": ref_of(a), "limit": 1}))
    assert b.cache.execute_tool_call(read).text.startswith(f"error: no cached tool output with ref {ref_of(a)!r}")
    assert a.cache.execute_tool_call(read).text.splitlines()[1] == "   1\talpha-secret line 0: " + "x" * 60


def test_gc_never_deletes_another_sessions_live_output(two_sessions: tuple[ContextManager, ContextManager]) -> None:
    a, b = two_sessions
    assert a.cache is not None and b.cache is not None
    shared = big_output("both see this")
    a.add(tool_turn(2, shared))
    b.add(tool_turn(2, shared))
    shared_ref = a.cache.put(shared).id
    result = a.cache.gc(referenced=set())  # A lets go of everything it holds
    assert result.deleted == (ref_of_first(a),)
    # B's own output and the output both saw are still there, whole, for B.
    assert b.cache.get(ref_of_first(b)) == big_output("bravo")
    assert b.cache.get(shared_ref) == shared
    assert not a.cache.owns(shared_ref) and b.cache.owns(shared_ref)
    # Once B lets go too, nobody claims it and it goes.
    assert shared_ref in b.cache.gc(referenced=set()).deleted


def ref_of_first(cm: ContextManager) -> str:
    return str(next(m.meta["ref"] for m in cm.messages() if m.meta.get("ref")))


def test_a_resumed_session_still_owns_its_outputs(tmp_path: Path) -> None:
    with LocalBlobStore(tmp_path) as store:
        ref = ToolOutputCache(store, session_id="s").put(big_output("kept"))
    with LocalBlobStore(tmp_path) as store:
        again = ToolOutputCache(store, session_id="s")
        other = ToolOutputCache(store, session_id="t")
        assert again.owned_ref_ids() == [ref.id]
        assert other.owned_ref_ids() == []


def test_retention_deletes_outputs_unused_past_the_age_cap() -> None:
    store = MemoryBlobStore()
    now = [1_000_000.0]
    old = ToolOutputCache(store, session_id="old", clock=lambda: now[0])
    stale = old.put(big_output("stale")).id
    now[0] += 20 * DAY
    fresh_cache = ToolOutputCache(store, session_id="new", clock=lambda: now[0],
                                  retention=Retention(max_age_s=14 * DAY))
    fresh = fresh_cache.put(big_output("fresh")).id
    result = fresh_cache.retain()
    assert result.deleted == (stale,)
    assert not store.exists(stale) and not store.exists(owner_key(stale, owner_tag("old")))
    assert store.exists(fresh)


def test_retention_evicts_for_size_but_never_a_live_output() -> None:
    store = MemoryBlobStore()
    now = [1_000_000.0]
    cache = ToolOutputCache(store, session_id="s", clock=lambda: now[0],
                            retention=Retention(max_age_s=None, max_bytes=150_000, live_s=DAY))
    first = cache.put(big_output("first")).id
    now[0] += 2 * DAY
    second = cache.put(big_output("second")).id
    third = cache.put(big_output("third")).id  # ~96 KB each: over the 150 KB cap
    result = cache.retain()
    assert result.deleted == (first,)  # the only one nobody used within a day
    assert store.exists(second) and store.exists(third)  # still over the cap, but both are live
    assert result.bytes_kept > 150_000


def test_retention_runs_by_itself_every_so_many_new_outputs() -> None:
    store = MemoryBlobStore()
    now = [1_000_000.0]
    cache = ToolOutputCache(store, session_id="s", clock=lambda: now[0],
                            retention=Retention(max_age_s=DAY, every_puts=3))
    stale = cache.put(big_output("0")).id
    now[0] += 2 * DAY
    cache.put(big_output("1"))
    assert store.exists(stale)
    cache.put(big_output("2"))  # the third new output triggers retention
    assert not store.exists(stale)


class ClaimFailsOnce(MemoryBlobStore):
    """A store that is unavailable once, exactly when the first owner claim is written."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def put(self, key: str, data: bytes) -> None:
        if ".owner." in key and not self.failed:
            self.failed = True
            raise StoreError("injected: the store is unavailable")
        super().put(key, data)

    def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        # One put each (the protocol's default, as a Redis or S3 store does): the output is written, its claim fails.
        BlobStore.put_many(self, items)


def test_a_put_retried_after_its_claim_failed_is_owned() -> None:
    # The soak found it: the output was written, its claim was not, and the retried put returned early without
    # claiming; the session then did not own its own output, and masking stored the cut view as a new output.
    store = ClaimFailsOnce()
    cache = ToolOutputCache(store, session_id="s")
    text = big_output("retried")
    with pytest.raises(StoreError):
        cache.put(text)
    ref = cache.put(text)
    assert store.failed and cache.owns(ref.id) and cache.contains(ref.id)
    assert ToolOutputCache(store, session_id="s").owns(ref.id)  # the claim is in the store, not only in memory
