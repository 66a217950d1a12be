"""A caller that marks each new message for caching never makes a request carry more than 4 marks.

Found following Anthropic's guide to caching a conversation with a manager (red team, session 11): the caller puts
``cache_control`` on the last block of each new user message it adds. The manager keeps every message as added,
marks included, so the view of the fifth turn carried 5 marks and Anthropic refuses such a request ("A maximum of 4
blocks with cache_control may be provided. Found 5."): every call from then on failed (it is no overflow, so no
recovery). The Anthropic request keeps the latest 4 marks (tools, system, messages together in the wrapper), which
cover the longest prefixes; the earlier ones are those the caller would have moved on.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic

from contextfold.integrations.anthropic_client import AnthropicClient
from contextfold.manager import ContextManager

NONCE = "rt11-marks-c81d"
MARK = {"type": "ephemeral"}


def _marks(value: Any) -> list[str]:
    """The text (or type) of each block carrying a mark, in request order (nested blocks before their parent)."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, item in node.items():
                if key != "cache_control":
                    walk(item)
            if "cache_control" in node:
                found.append(str(node.get("text") or node.get("name") or node.get("type")))
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(value)
    return found


def _turns(cm: ContextManager, count: int) -> None:
    for i in range(count):
        cm.add({"role": "user", "content": [{"type": "text", "text": f"{NONCE} question {i}", "cache_control": MARK}]},
               format="anthropic")
        cm.add({"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}]}, format="anthropic")


def test_the_view_keeps_the_latest_four_marks() -> None:
    cm = ContextManager(model="claude-sonnet-4-5", store="memory", session_id=f"{NONCE}-view")
    _turns(cm, 7)
    cm.add({"role": "user", "content": [{"type": "text", "text": f"{NONCE} question 7", "cache_control": MARK}]},
           format="anthropic")
    for breakpoints in (False, True):
        marked = _marks(cm.prepare("anthropic", cache_breakpoints=breakpoints))
        assert marked == [f"{NONCE} question {i}" for i in range(4, 8)]
    cm.close()


def test_the_wrapper_counts_the_callers_marks_on_tools_too() -> None:
    import httpx2  # (the anthropic SDK's own fork of httpx)

    sent: list[dict[str, Any]] = []

    def handler(request: Any) -> Any:
        sent.append(json.loads(request.content))
        return httpx2.Response(200, json={
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 50, "output_tokens": 3}})

    cm = ContextManager(model="claude-sonnet-4-5", store="memory", session_id=f"{NONCE}-wrapper")
    _turns(cm, 6)
    cm.add({"role": "user", "content": [{"type": "text", "text": f"{NONCE} question 6", "cache_control": MARK}]},
           format="anthropic")
    tools = [{"name": "bash", "description": "run", "input_schema": {"type": "object"}, "cache_control": MARK}]
    llm = AnthropicClient(anthropic.Anthropic(api_key="t", base_url="http://127.0.0.1:9", max_retries=0,
                                              http_client=httpx2.Client(transport=httpx2.MockTransport(handler))))
    llm.messages(cm, model="claude-sonnet-4-5", max_tokens=100, tools=tools)
    marked = _marks({k: sent[0][k] for k in ("tools", "system", "messages") if k in sent[0]})
    assert len(marked) <= 4
    assert marked[-1] == f"{NONCE} question 6"
    assert "cache_control" in tools[0]  # the caller's own objects are left as they are
    cm.close()
