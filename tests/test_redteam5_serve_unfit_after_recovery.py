"""Red team (issue 21 §2/§4): the limit an overflow teaches leaves no room for what must stay.

Through the proxy, a request whose pinned system prompt and tool schemas nearly fill a provider limit far below
the configured window: recovery learns the limit, the view it must then prepare cannot hold the pinned messages,
and ``InsufficientBudget`` escaped the proxy's recovery loop as a 500 "internal error" (5894f4b). The client must
get a clear 4xx saying the conversation does not fit (the provider's own context-length error).
"""

from __future__ import annotations

import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

from typing import Any

import anthropic

from contextfold.serve import ProxyServer, ServeConfig
from contextfold.testing import Reply, ScriptedLLMServer, ScriptedToolCall

MODEL = "claude-haiku-4-5"


def test_a_conversation_that_cannot_fit_the_learned_limit_gets_a_clear_error() -> None:
    tools = [{"name": f"tool_{k}", "description": "does a thing " * 30,
              "input_schema": {"type": "object", "properties": {
                  f"arg{j}": {"type": "string", "description": "an argument of the tool " * 5} for j in range(6)}}}
             for k in range(12)]
    system = [{"type": "text", "text": "You are careful. " * 700}]
    output = "\n".join(f"{i:04d} src/module_{i % 17}.py:{i} WARNING value drifted to {i * 7}" for i in range(300))
    with ScriptedLLMServer(context_window=9_000, validator="formats") as upstream:
        config = ServeConfig(port=0, openai_base_url=upstream.base_url, anthropic_base_url=upstream.url,
                             sessions="memory", store="memory", archive="memory", windows={MODEL: 30_000},
                             log_level="critical")
        with ProxyServer(config) as proxy:
            client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0)
            history: list[dict[str, Any]] = [{"role": "user", "content": "Find the bug in the parser."}]
            upstream.push(Reply.calling(ScriptedToolCall("bash", {"cmd": "run"}, id="toolu_0")))
            reply = client.messages.create(model=MODEL, max_tokens=1_500, tools=tools, messages=history,
                                           system=system)  # fits
            history += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]},
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_0",
                                                      "content": output}]}]
            with pytest.raises(anthropic.BadRequestError, match="too long"):
                client.messages.create(model=MODEL, max_tokens=1_500, tools=tools, messages=history, system=system)
    assert [r.status for r in upstream.requests] == [200, 400]
