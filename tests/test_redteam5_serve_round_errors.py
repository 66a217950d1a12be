"""Red team (issue 21 §2): the upstream fails in a retrieval round of the proxy.

The proxy answers the model's ``tool_output_cache`` call and asks the upstream again; when that round fails (a
5xx, an overflow recovery gave up on), the reply the client gets must not be the first round's with the retrieval
calls taken out: that is an assistant message with no content and no tool calls, ending in ``tool_calls`` (Chat),
which an agent loop takes for a final empty answer. Found on 5894f4b: 200 with ``finish_reason="tool_calls"`` and
``tool_calls=None``. Now the client gets the upstream's error (its status, or as its stream's last event), which
its SDK raises.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

import anthropic
import openai

from contextfold.serve import ProxyServer, ServeConfig
from contextfold.testing import ErrorReply, Reply, ScriptedLLMServer, ScriptedToolCall
from contextfold.testing.server import RecordedRequest

OUTPUT = "\n".join(f"{i:04d} src/module_{i % 17}.py:{i} WARNING value drifted to {i * 7}" for i in range(600))


def _model() -> Any:
    rounds: list[int] = []

    def answer(request: RecordedRequest) -> Any:
        rounds.append(1)
        if len(rounds) > 1:
            return ErrorReply("server_error", "The server had an error while processing your request.")
        ref = re.search(r"tout_[0-9a-f]{16}", json.dumps(request.body))
        assert ref is not None
        return Reply.calling(ScriptedToolCall("tool_output_cache", {"ref_id": ref.group(0), "limit": 50},
                                              id="toolu_read"))

    return answer


@pytest.mark.parametrize(("api", "stream"), [("chat", False), ("chat", True), ("messages", True)])
def test_a_failed_retrieval_round_reaches_the_client_as_the_upstreams_error(api: str, stream: bool) -> None:
    with ScriptedLLMServer(validator="formats", handler=_model()) as upstream:
        config = ServeConfig(port=0, openai_base_url=upstream.base_url, anthropic_base_url=upstream.url,
                             sessions="memory", store="memory", archive="memory",
                             windows={"gpt-4o-mini": 16_000, "claude-haiku-4-5": 16_000}, log_level="critical",
                             retrieval_tools=True)
        with ProxyServer(config) as proxy:
            if api == "chat":
                llm = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0)
                call = {"id": "call_0", "type": "function",
                        "function": {"name": "bash", "arguments": '{"cmd": "run"}'}}
                history: list[Any] = [{"role": "user", "content": "Find the bug."},
                                      {"role": "assistant", "content": None, "tool_calls": [call]},
                                      {"role": "tool", "tool_call_id": "call_0", "content": OUTPUT}]
                with pytest.raises(openai.APIError, match="server had an error"):
                    if stream:
                        list(llm.chat.completions.create(model="gpt-4o-mini", messages=history, stream=True))
                    else:
                        llm.chat.completions.create(model="gpt-4o-mini", messages=history)
            else:
                client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0)
                history = [{"role": "user", "content": "Find the bug."},
                           {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_0", "name": "bash",
                                                              "input": {"cmd": "run"}}]},
                           {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_0",
                                                         "content": OUTPUT}]}]
                with (pytest.raises(anthropic.APIError, match="server had an error"),
                      client.messages.stream(model="claude-haiku-4-5", max_tokens=512, messages=history) as s):
                    s.get_final_message()
    assert [r.status for r in upstream.requests] == [200, 500]
