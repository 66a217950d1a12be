"""The read-ahead's parts run on their own inside its one job (red team, eighth session, 8448630; held).

A turn's read-ahead became one job of the background thread running three parts in turn: the new messages read
as a compaction will, the whole outputs' secrets, the calls' accesses for steering's mask order. When the first
part fails, the others must still run (as when each was a job of its own): a secret past an output's write-time cut
is still read, every call still parsed; and over several turns each message is read ahead once, none skipped.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from contextfold import _background
from contextfold.manager import ContextManager, _compactor
from contextfold.messages import Message, ToolCall
from contextfold.steering import resources


def _turn(nonce: str, i: int) -> list[Message]:
    call = ToolCall(f"c{i}", "str_replace_editor",
                    json.dumps({"command": "view", "path": f"/srv/{nonce}/mod_{i}.py"}))
    lines = [f"{n}: def step_{nonce}_{i}_{n}(): return {n * 3}" for n in range(40)]
    return [Message.assistant(f"Reading mod_{i}.", [call]),
            Message.tool(f"c{i}", "\n".join(lines), name="str_replace_editor")]


def test_when_the_first_part_fails_the_secrets_and_the_calls_are_still_read(monkeypatch: pytest.MonkeyPatch) -> None:
    nonce = datetime.now(UTC).strftime("%H%M%S%f")
    read: list[str] = []

    def fails(messages: list[Message], *args: Any) -> None:
        read.extend(str(m.meta.get("id")) for m in messages)
        raise RuntimeError("the compaction's read-ahead failed")

    monkeypatch.setattr(_compactor, "warm_for_compaction", fails)
    parsed: list[str] = []
    access = resources._access_of_call

    def noted(rule: Any, arguments: str) -> Any:
        parsed.append(json.loads(arguments)["path"])
        return access(rule, arguments)

    monkeypatch.setattr("contextfold.steering._state._access_of_call", noted)
    cm = ContextManager("gpt-4o", max_context_tokens=8_000, store="memory", archive="memory",
                        session_id=f"rt8-parts-{nonce}", message_id_prefix="p")
    assert cm.redactor is not None and cm.steering.superseded
    secrets_read: list[int] = []
    read_secrets = cm._secrets.read_ahead

    def noted_secrets() -> None:
        secrets_read.append(1)
        read_secrets()

    monkeypatch.setattr(cm._secrets, "read_ahead", noted_secrets)
    cm.add([Message.system("You fix bugs."), Message.user(f"Fix step_{nonce}.")])
    for turn in range(3):  # (three turns, two calls each: each turn's messages read ahead at its prepare())
        cm.add([m for i in (2 * turn, 2 * turn + 1) for m in _turn(nonce, i)])
        cm.prepare()
        _background.wait_idle()
    assert sorted(parsed) == [f"/srv/{nonce}/mod_{i}.py" for i in range(6)]  # (each call once)
    assert sorted(read) == sorted(set(read)) and len(read) == 14, read  # (each message once, none skipped)
    assert len(secrets_read) == 2  # (the whole outputs' secrets: each turn read ahead, the last two)
    cm.close()
