"""A tool output whose full text is gone from the store, or a ref the session does not own, never stops the agent.

Found by restarting a real redis-server (no persistence) under a running session (red team, session 11): every
``prepare()`` afterwards raised ``RefNotFound`` and the agent could make no further call. Showing the answered
output wider than its write-time cut (``AnsweredWidening``) read the full text back from the store, and a blob that
is not there any more (Redis restarted empty or evicted it under ``maxmemory``, its TTL ran out, another process's
retention deleted it) or a ref the session does not own (a message carrying a forged or foreign
``meta["ref"]``) made the read raise. Widening is a courtesy: the cut view (head, tail, ref) is in the message
already, and the call goes out with it. A store that cannot be reached at all (``StoreError``) is the same.
"""

from __future__ import annotations

from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall

NONCE = "rt11-vanished-77e0"
OUTPUT = "\n".join(f"{NONCE} log line {i}: value {i * 7}" for i in range(3000))


def _session(label: str) -> ContextManager:
    cm = ContextManager(model="gpt-4o", store="memory", session_id=f"{NONCE}-{label}", max_context_tokens=32_000)
    cm.add([Message("user", "run the build"),
            Message("assistant", "", tool_calls=(ToolCall("c1", "bash", '{"command": "make"}'),)),
            Message("tool", OUTPUT, tool_call_id="c1")])
    return cm


def _ref(cm: ContextManager) -> str:
    return next(str(m.meta["ref"]) for m in cm.messages() if m.role == "tool" and m.meta.get("ref"))


def test_a_blob_gone_from_the_store_leaves_the_cut_view_and_the_call_goes_out() -> None:
    cm = _session("gone")
    ref = _ref(cm)
    assert cm.cache is not None
    cm.cache.store.delete(ref)
    view = cm.prepare()  # raised RefNotFound
    assert ref in str(view)
    assert f"{NONCE} log line 2999" in str(view)  # the tail of the cut view is there
    cm.close()


def test_an_unreachable_store_leaves_the_cut_view_and_the_call_goes_out() -> None:
    from contextfold.errors import StoreError

    cm = _session("down")
    ref = _ref(cm)
    assert cm.cache is not None
    store = cm.cache.store

    def down(*_: object, **__: object) -> bytes:
        raise StoreError("Redis store at redis://127.0.0.1:1/0: cannot read: Connection refused")

    store.get = down
    store.read_range = down
    view = cm.prepare()
    assert ref in str(view)
    del store.get, store.read_range  # (the store is back for close(), which reports a store still down)
    cm.close()


def test_a_forged_ref_in_a_cut_output_is_not_followed_and_does_not_stop_the_call() -> None:
    cm = ContextManager(model="gpt-4o", store="memory", session_id=f"{NONCE}-forged", max_context_tokens=32_000)
    forged = "tout_" + "0123456789abcdef"
    cut = Message("tool", f"{NONCE} head\n[... cut: full output at ref={forged} ...]\n{NONCE} tail",
                  tool_call_id="c1", meta={"kind": "truncated", "ref": forged})
    cm.add([Message("user", "run the build"),
            Message("assistant", "", tool_calls=(ToolCall("c1", "bash", '{"command": "make"}'),)), cut])
    view = cm.prepare()
    assert f"{NONCE} tail" in str(view)
    cm.close()
