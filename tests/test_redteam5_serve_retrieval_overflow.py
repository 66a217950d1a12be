"""Red team (issue 21 §2): a provider limit first met in a retrieval round of the proxy.

With ``retrieval_tools`` on, the proxy answers the model's ``tool_output_cache`` call itself and calls the
upstream again with the answer in the view: that round is larger than the request the client sent, so it is where
a provider limit below the window is met first. The proxy sent it without recovery: the context-length error ended
the request with an empty reply to the client (content None, streaming or not) and taught no limit. Found on
5894f4b.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

import openai

from contextfold.serve import ProxyServer, ServeConfig
from contextfold.testing import Reply, ScriptedLLMServer, ScriptedToolCall
from contextfold.testing.server import RecordedRequest

MODEL = "gpt-4o-mini"


def _output() -> str:
    return "\n".join(f"{i:04d} src/module_{i % 17}.py:{i} WARNING value drifted to {i * 7}" for i in range(600))


@pytest.mark.parametrize("stream", [False, True])
def test_an_overflow_in_a_retrieval_round_is_recovered(stream: bool) -> None:
    answers: list[str] = []

    def model(request: RecordedRequest) -> Any:
        """Reads the cut output once, then answers."""
        if not answers:
            answers.append("read")
            ref = re.search(r"tout_[0-9a-f]{16}", json.dumps(request.body))
            assert ref is not None
            return Reply.calling(ScriptedToolCall("tool_output_cache", {"ref_id": ref.group(0), "limit": 400},
                                                  id="call_read"))
        return "The bug is in module_3."

    with ScriptedLLMServer(context_window=9_000, validator="formats") as upstream:
        config = ServeConfig(port=0, openai_base_url=upstream.base_url, anthropic_base_url=upstream.url,
                             sessions="memory", store="memory", archive="memory", windows={MODEL: 16_000},
                             log_level="warning", retrieval_tools=True)
        with ProxyServer(config) as proxy:
            llm = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0)
            call = {"id": "call_0", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "run"}'}}
            history: list[Any] = [{"role": "user", "content": "Find the bug in the parser."},
                                  {"role": "assistant", "content": None, "tool_calls": [call]},
                                  {"role": "tool", "tool_call_id": "call_0", "content": _output()}]
            upstream.handler = model
            if stream:
                chunks = list(llm.chat.completions.create(model=MODEL, messages=history, stream=True))
                text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            else:
                text = llm.chat.completions.create(model=MODEL, messages=history).choices[0].message.content or ""
            statuses = [r.status for r in upstream.requests]
    assert statuses[:2] == [200, 400]  # the first call fits; the round with the answer does not
    assert text == "The bug is in module_3."
    assert statuses[-1] == 200 and statuses.count(400) == 1
    assert upstream.requests[-1].input_tokens < upstream.requests[1].input_tokens
