"""An agent that moves its prompt-cache mark each turn keeps one session through the proxy (red team, tenth session).

Anthropic's guide to caching a conversation (and Claude Code, LiteLLM's ``cache_control_injection_points``) puts
``cache_control`` on the last block of the last message, so the mark moves every turn: the message marked last
time comes back without it. The proxy named the client's items by a fingerprint of everything in them, marks
included, so every request looked like an edited history: the session's view was archived and rebuilt from the
client's whole history every turn (a ``framework_history_diverged`` warning per request), its summary and masking
thrown away. 20 turns of a tool-using agent in a 6,000-token window: 18 pre-compaction transcripts and 249 KB of
archive against 6 and 50 KB for the same client without marks; the view sent held 39 messages against 15.

A mark is where the client wants a cache entry, not content: it no longer names an item, the proxy stores the
messages without the client's marks (stale ones would pile up past Anthropic's limit of 4) and, when the client
asks for caching, places contextfold's own breakpoints (made to survive its rewrites), never more than 4 with the
client's marks on tools.
"""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

import httpx
import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

from contextfold.serve import ProxyServer, ServeConfig
from contextfold.serve.identity import opening_fingerprint
from contextfold.testing import Reply, ScriptedLLMServer, ScriptedToolCall

MODEL = "claude-haiku-4-5"
TURNS = 8
# Anthropic refuses a request with more cache_control marks than this.
MAX_MARKS = 4


def _marks(value: Any) -> int:
    if isinstance(value, dict):
        return int("cache_control" in value) + sum(_marks(v) for v in value.values())
    if isinstance(value, list):
        return sum(_marks(v) for v in value)
    return 0


def _run(mark_tools: bool) -> tuple[ScriptedLLMServer, list[str], int]:
    nonce = uuid.uuid4().hex[:8]
    tools: list[dict[str, Any]] = [{"name": "sh", "description": "run a command",
                                    "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]
    if mark_tools:
        tools[-1]["cache_control"] = {"type": "ephemeral"}
    with ScriptedLLMServer(context_window=60_000, validator="formats") as upstream:
        config = ServeConfig(port=0, anthropic_base_url=upstream.url, sessions="memory", store="memory",
                             archive="memory", windows={MODEL: 6_000}, log_level="warning")
        with ProxyServer(config) as proxy:
            history: list[dict[str, Any]] = [{"role": "user", "content": [
                {"type": "text", "text": f"Task {nonce}: find why the parser fails"}]}]
            for turn in range(TURNS):
                upstream.push(Reply.calling(ScriptedToolCall("sh", {"cmd": f"cat f{turn}"}, id=f"toolu_{turn}")))
                sent = copy.deepcopy(history)
                sent[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}  # the mark moves to the end
                response = httpx.post(proxy.url + "/v1/messages", timeout=30,
                                      headers={"x-api-key": f"k-{nonce}", "anthropic-version": "2023-06-01"},
                                      json={"model": MODEL, "max_tokens": 100, "messages": sent, "tools": tools,
                                            "system": [{"type": "text", "text": "You are a coding agent.",
                                                        "cache_control": {"type": "ephemeral"}}]})
                assert response.status_code == 200, response.text
                history.append({"role": "assistant", "content": response.json()["content"]})
                output = "\n".join(f"f{turn} line {j}: {nonce} some source text" for j in range(100))
                history.append({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{turn}", "content": output}]})
            archive = proxy.serve_app.backend.archive
            names = [n for s in archive.sessions() for n in archive.store.names(s) if n.startswith("transcript")]
    return upstream, names, len(upstream.requests)


@pytest.mark.parametrize("mark_tools", [False, True])
def test_a_moving_cache_mark_is_not_an_edited_history(mark_tools: bool) -> None:
    upstream, transcripts, requests = _run(mark_tools)
    assert requests == TURNS
    # Compactions archive a transcript; a rebuild per request archived one on nearly every turn (6 of 8).
    assert len(transcripts) <= TURNS // 3, transcripts
    bodies = [r.body for r in upstream.requests]
    assert all(_marks(b) <= MAX_MARKS for b in bodies), [_marks(b) for b in bodies]
    # The client asked for caching: the requests still carry marks on the conversation.
    assert all(_marks(b["messages"]) >= 1 for b in bodies), json.dumps(bodies[-1])[:500]


def test_the_opening_names_one_session_whether_its_user_message_is_marked_or_not() -> None:
    # The first request's last message is the opening's user message, marked; every later request sends it unmarked
    # (the first turn was left alone in a session of its own).
    system = {"role": "system", "content": [{"type": "text", "text": "agent", "cache_control": {"type": "ephemeral"}}]}
    opening = {"role": "user", "content": [{"type": "text", "text": f"Task {uuid.uuid4().hex[:8]}"}]}
    marked = {"role": "user", "content": [{**opening["content"][0], "cache_control": {"type": "ephemeral"}}]}
    assert opening_fingerprint([system, marked]) == opening_fingerprint([system, opening, {"role": "assistant"}])
