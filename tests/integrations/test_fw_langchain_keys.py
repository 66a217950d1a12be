"""The LangChain middleware keys each message of the agent's state once, not on every model call (issue 22).

Reconciling compares identity keys (a JSON fingerprint of each whole message) of the state's messages with what
the manager was fed. Made for every message on every model call, that was ~190 ms per call at 10,000 messages
(the middleware's own per-turn cost growing with the history). A key is now made once per message object.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

import contextfold.integrations.langchain as lc
from contextfold.manager import ContextManager


def conversation(turns: int) -> list[Any]:
    messages: list[Any] = []
    for i in range(turns):
        messages += [HumanMessage(f"question {i}", id=f"h{i}"),
                     AIMessage("", tool_calls=[{"id": f"c{i}", "name": "read", "args": {"page": i}}], id=f"a{i}"),
                     ToolMessage(f"page {i} " * 50, tool_call_id=f"c{i}", id=f"t{i}")]
    return messages


def test_keys_are_made_once_per_message_across_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    real = lc._content_key

    def counting(message: Any) -> str:
        made.append(str(message.id))
        return real(message)

    monkeypatch.setattr(lc, "_content_key", counting)
    cm = ContextManager("gpt-4o", max_context_tokens=1_000_000, store="memory", archive="memory")
    state = conversation(200)
    for step in range(20):  # each model call sees the same objects plus one new message
        lc.ContextfoldMiddleware._feed(cm, state)
        state = [*state, HumanMessage(f"follow-up {step}", id=f"f{step}")]
    assert len(made) == len(state) - 1  # every message once (the last one was never fed)
    assert len(cm.messages()) == len(state) - 1


def test_a_message_given_new_content_is_keyed_again_and_rebuilds() -> None:
    cm = ContextManager("gpt-4o", max_context_tokens=1_000_000, store="memory", archive="memory")
    state = conversation(3)
    lc.ContextfoldMiddleware._feed(cm, state)
    state[0].content = "a different question"  # pydantic lets a caller reassign a field in place
    lc.ContextfoldMiddleware._feed(cm, state)
    assert cm.framework_history.rebuilds == 1
    assert cm.messages()[0].text == "a different question"
