"""Alibaba's Qwen (DashScope / Model Studio) and Moonshot's Kimi context-length errors are recovered from.

Found by the twelfth red team (a provider returning an overflow error in a shape we do not parse): DashScope's
OpenAI-compatible endpoint, which Qwen Code and many agents call, answers 400 ``<400>
InternalError.Algo.InvalidParameter: Range of input length should be [1, 983616]`` (code
``invalid_parameter_error``: no overflow code), and Moonshot's API ``model max length exceeded, max length:8192``.
``parse_overflow`` answered None to both, so recovery, the client wrappers, the adapters and the proxy passed the
error on and the agent stopped the first time its history outgrew the limit. Each is now read with its limit, so
the limit is learned.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import openai
import pytest

from contextfold import ContextManager, call_with_recovery
from contextfold.recovery import parse_overflow
from contextfold.testing import ScriptedLLMServer
from contextfold.testing.server import RecordedRequest, ScriptedReply
from contextfold.testing.wire import ErrorReply

DASHSCOPE = {"error": {"code": "invalid_parameter_error", "param": None, "type": "invalid_request_error",
                       "message": "<400> InternalError.Algo.InvalidParameter: Range of input length should be "
                                  "[1, 983616]"}, "request_id": "81a373d6"}
DASHSCOPE_NATIVE = {"code": "InvalidParameter", "message": "Range of input length should be [1, 6000]",
                    "request_id": "x"}
MOONSHOT = {"error": {"message": "model max length exceeded, max length:8192", "type": "invalid_request_error"}}


@pytest.mark.parametrize(("body", "limit"), [(DASHSCOPE, 983_616), (DASHSCOPE_NATIVE, 6_000), (MOONSHOT, 8_192)])
def test_the_wording_is_an_overflow_with_its_limit(body: dict[str, Any], limit: int) -> None:
    info = parse_overflow(json.dumps(body))
    assert info is not None
    assert info.limit == limit


def test_dashscope_refusing_another_parameter_is_not_an_overflow() -> None:
    assert parse_overflow({"code": "InvalidParameter", "message": "Range of top_p should be (0.0, 1.0]"}) is None


def dashscope_refusal(limit: int) -> str:
    return f"<400> InternalError.Algo.InvalidParameter: Range of input length should be [1, {limit}]"


def moonshot_refusal(limit: int) -> str:
    return f"model max length exceeded, max length:{limit}"


@pytest.mark.parametrize("refusal", [dashscope_refusal, moonshot_refusal])
def test_an_agent_at_the_providers_limit_recovers(refusal: Callable[[int], str]) -> None:
    nonce = uuid.uuid4().hex[:8]
    limit = 3_000

    def provider(request: RecordedRequest) -> ScriptedReply:
        if request.input_tokens > limit:
            return ErrorReply("invalid_request", refusal(limit))
        return f"done {nonce}"

    with ScriptedLLMServer(handler=provider) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        cm = ContextManager("local-test", max_context_tokens=16_000, store="memory")
        cm.add({"role": "user", "content": f"Task {nonce}: read the logs"})
        for i in range(6):
            cm.add({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": "sh", "arguments": json.dumps({"n": i})}}]})
            cm.add({"role": "tool", "tool_call_id": f"c{i}",
                    "content": "\n".join(f"{nonce} log {i}.{j}: request served" for j in range(60))})
        reply = call_with_recovery(cm, lambda view: client.chat.completions.create(model="local-test", messages=view))
    assert reply.choices[0].message.content == f"done {nonce}"
    assert cm.learned_limit is not None and cm.learned_limit <= limit
