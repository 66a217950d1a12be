"""Red team (issue 21 §1/§5): a session's secret memory outlives everything it was learned from.

The memory (``session-secrets.<hash>`` in the tool output store) holds the session's secrets in clear, "as the store
already holds the outputs they came from" (README). Retention deletes those outputs once no session used them for
``max_age_s``, but it never touches the memory: the secrets stay in clear in the store after every output of the
session is gone, one entry per session ever run, forever (5894f4b).
"""

from __future__ import annotations

import json
import time

import pytest

from contextfold.cache import Retention, ToolOutputCache
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.stores.memory import MemoryBlobStore

SECRET = "Zq7hQ2rVx9LmT4kPw8"
DAY = 24 * 3600.0


@pytest.mark.xfail(strict=True, reason="cache/_cache.py:571 (ToolOutputCache.retain) and cache/owners.py survey() "
                   "see only outputs, indexes and claims; redact/memory.py keys (session-secrets.*) carry no time "
                   "of use, so nothing ever ages them out")
def test_retention_that_deletes_a_sessions_outputs_deletes_its_secrets_too() -> None:
    store = MemoryBlobStore()
    cm = ContextManager("gpt-4o", max_context_tokens=8_000, store=store, archive=None, session_id="old")
    output = "\n".join([f"svc/pod-{i}: ready" for i in range(200)] + [f"export DB_PASSWORD={SECRET}"]
                       + [f"svc/pod-{i}: ready" for i in range(200, 400)])
    cm.add([Message("user", "Check the pods."),
            Message("assistant", "Listing.", tool_calls=(ToolCall("c1", "bash", json.dumps({"cmd": "pods"})),)),
            Message("tool", output, tool_call_id="c1", name="bash")])
    cm.prepare()
    cm.stored_messages()  # (the memory is saved)
    cm.close()
    assert any(SECRET.encode() in store.get(e.key) for e in store.entries())
    cache = ToolOutputCache(store, retention=Retention(max_age_s=30 * DAY))
    deleted = cache.retain(now=time.time() + 365 * DAY).deleted
    assert deleted  # every output of the session is gone
    assert [e.key for e in store.entries() if SECRET.encode() in store.get(e.key)] == []
