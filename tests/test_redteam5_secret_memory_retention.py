"""Red team (issue 21 §1/§5): a session's secret memory outlives everything it was learned from.

The memory (``session-secrets.<hash>`` in the tool output store) holds the session's secrets in clear, "as the store
already holds the outputs they came from" (README). Retention deletes those outputs once no session used them for
``max_age_s``, but it never touches the memory: the secrets stay in clear in the store after every output of the
session is gone, one entry per session ever run, forever (5894f4b).
"""

from __future__ import annotations

import json
import time

from contextfold.cache import Retention, ToolOutputCache
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.stores.memory import MemoryBlobStore

SECRET = "Zq7hQ2rVx9LmT4kPw8"
DAY = 24 * 3600.0


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


def test_a_memory_is_kept_while_its_session_is_in_use_and_named_by_its_sessions_tag() -> None:
    from contextfold.cache.owners import owner_tag
    from contextfold.redact.memory import MEMORY_KEY_PREFIX, SecretMemory, memory_key

    assert memory_key("any session") == MEMORY_KEY_PREFIX + owner_tag("any session")  # what retention relies on
    store = MemoryBlobStore()
    memory = SecretMemory(store=store, session_id="talky")  # a session that stored no output: only its last save
    memory.learn(SECRET, "password")
    assert memory.save()
    cache = ToolOutputCache(store, retention=Retention(max_age_s=30 * DAY))
    cache.retain(now=time.time() + 29 * DAY)
    assert store.get(memory_key("talky"))  # saved 29 days ago: kept
    cache.retain(now=time.time() + 31 * DAY)
    assert [e.key for e in store.entries()] == []
