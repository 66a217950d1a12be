"""Each tool call's access is read ahead (issue 22, masking turns): the order of a masking turn parsed the calls made
since the last turn, ~45 µs each; the read-ahead parses them, and the turn finds them remembered."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from contextfold.compaction import Policy
from contextfold.messages import Message, ToolCall
from contextfold.steering import Steering, resources
from contextfold.tokens import EstimatingCounter, MessageCounter


def _reads(nonce: str) -> list[Message]:
    out: list[Message] = [Message("user", "look at the loader")]
    for n, path in enumerate(("a.py", "b.py", "a.py")):
        arguments = json.dumps({"command": "view", "path": f"/srv/{nonce}/{path}"})
        out.append(Message("assistant", "", (ToolCall(f"c{n}", "str_replace_editor", arguments),)))
        out.append(Message("tool", f"contents of {path}", tool_call_id=f"c{n}", name="str_replace_editor"))
    return out


def test_the_masking_order_parses_no_call_the_read_ahead_read(monkeypatch: pytest.MonkeyPatch) -> None:
    nonce = datetime.now(UTC).strftime("%H%M%S%f")  # arguments no other test parsed (accesses are remembered)
    view = _reads(nonce)
    steering = Steering(Policy(), MessageCounter(EstimatingCounter()))
    steering.read_calls_ahead(view)

    def no_parse(*args: Any) -> Any:
        raise AssertionError("a call read ahead was parsed again")

    monkeypatch.setattr(resources, "access_of", no_parse)
    order = steering.mask_order(view)
    assert order.superseded == {2: 5}  # the first read of a.py, superseded by the second


def test_nothing_is_read_ahead_without_superseded_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[Any] = []
    monkeypatch.setattr(resources, "access_of", lambda rule, arguments: parsed.append(arguments))
    steering = Steering(Policy(superseded_reads=False), MessageCounter(EstimatingCounter()))
    steering.read_calls_ahead(_reads(datetime.now(UTC).strftime("%H%M%S%f")))
    assert parsed == []
