"""A tool call whose ``arguments`` is a dict (what some SDKs hand over) must not brick the session it is saved in.

Found by the twelfth red team (open since the eleventh stop): ``ToolCall("c1", "f", {"a": 1})`` is refused by
``add()`` with an error naming the field, but a :class:`SessionStore`'s ``save()`` took it and wrote the dict as a
JSON object; every later ``load()`` of the session then raised ``CorruptRecord`` (SQLite, Redis), and the memory
store handed it back to an ``add()`` that refused it at every turn: the session could not be read again, by anyone.

Now ``save()`` refuses such a message at once (``InvalidHistory`` naming the message and the field; nothing is
written), and a record an earlier version wrote that way loads with the object as its JSON text.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from contextfold.errors import InvalidHistory
from contextfold.messages import Message, ToolCall
from contextfold.stores.session import MemorySessionStore, SessionStore
from contextfold.stores.session_local import LocalSessionStore

NONCE = "rt12-dictargs-5Qm2"


def _history() -> list[Message]:
    call = ToolCall("c1", "read_file", {"path": f"{NONCE}.log"})  # type: ignore[arg-type]
    return [Message("user", f"read {NONCE}"), Message("assistant", "", (call,)), Message.tool("c1", "ok")]


@pytest.fixture(params=["memory", "local", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> SessionStore:
    if request.param == "redis":
        from contextfold.stores.redis_session import RedisSessionStore

        server = request.getfixturevalue("redis_server")
        return RedisSessionStore(server.url, prefix=f"{NONCE}-{tmp_path.name}")
    return MemorySessionStore() if request.param == "memory" else LocalSessionStore(str(tmp_path))


def test_save_refuses_dict_arguments_naming_the_field_and_writes_nothing(store: SessionStore) -> None:
    with pytest.raises(InvalidHistory) as caught:
        store.save("s", _history(), 0)
    assert caught.value.index == 1
    assert caught.value.field == "tool_calls[0].arguments"
    assert "json.dumps" in str(caught.value)
    assert store.load("s") == ([], 0)  # the session is still usable
    good = [Message("user", "hi")]
    assert store.save("s", good, 0) == 1
    with pytest.raises(InvalidHistory) as later:  # appended to a session already saved: only the new part is written
        store.save("s", [*good, *_history()], 1)
    assert later.value.index == 2
    assert store.load("s") == (good, 1)


def test_a_session_an_earlier_version_saved_with_dict_arguments_loads(tmp_path: Path) -> None:
    store = LocalSessionStore(str(tmp_path))
    store.save("s", [Message("user", "first")], 0)
    store.close()
    # What 37c7cef wrote for ToolCall(..., {"path": ...}): the arguments as a JSON object.
    record = {"role": "assistant", "content": "",
              "tool_calls": [{"id": "c1", "type": "function",
                              "function": {"name": "read_file", "arguments": {"path": f"{NONCE}.log"}}}]}
    with sqlite3.connect(store.path) as conn:
        conn.execute("INSERT INTO session_messages (session_id, seq, data) VALUES (?, ?, ?)",
                     ("s", 1, json.dumps(record)))
    reopened = LocalSessionStore(str(tmp_path))
    messages, _ = reopened.load("s")
    assert [m.role for m in messages] == ["user", "assistant"]
    assert json.loads(messages[1].tool_calls[0].arguments) == {"path": f"{NONCE}.log"}
