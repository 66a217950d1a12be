"""A provider's usage report contextfold cannot read never costs the agent the reply it paid for.

Found by answering the client wrappers with odd ``usage`` blocks (red team, session 11). OpenAI-compatible servers
report ``cached_tokens`` above ``prompt_tokens``, ``-1`` for "unknown", or fractional counts; ``TokenUsage`` refuses
them (ValueError), and ``OpenAIClient.chat`` / ``AnthropicClient.messages`` let that error out *after* the model had
answered: the call raised, and the reply was never added to the history (the agent lost a paid answer over
bookkeeping). The proxy already set such a report aside; the wrappers now do the same, say so
(``compact.warning``, code ``usage_unreadable``) and add the reply.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import anthropic
import httpx
import openai
import pytest

from contextfold.integrations.anthropic_client import AnthropicClient
from contextfold.integrations.openai_client import AsyncOpenAIClient, OpenAIClient
from contextfold.manager import ContextManager
from contextfold.telemetry import CompactWarning, RecordingTelemetry

NONCE = "rt11-usage-0c3a"
ANSWER = f"the answer {NONCE}"
BAD_OPENAI_USAGES = {
    "cached_over_prompt": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13,
                           "prompt_tokens_details": {"cached_tokens": 50}},
    "negative": {"prompt_tokens": -1, "completion_tokens": -1, "total_tokens": -2},
    "fractional": {"prompt_tokens": 12.5, "completion_tokens": 3, "total_tokens": 15.5},
}


def _chat_reply(usage: dict[str, Any]) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}],
            "usage": usage})
    return handler


def _manager(label: str) -> tuple[ContextManager, RecordingTelemetry]:
    events = RecordingTelemetry()
    cm = ContextManager("gpt-4o", store="memory", session_id=f"{NONCE}-{label}", telemetry=events)
    cm.add({"role": "user", "content": f"question {NONCE}"})
    return cm, events


def _warned(events: RecordingTelemetry) -> bool:
    return any(isinstance(e, CompactWarning) and e.code == "usage_unreadable" for e in events.events)


@pytest.mark.parametrize("usage", BAD_OPENAI_USAGES.values(), ids=list(BAD_OPENAI_USAGES))
def test_the_openai_wrapper_keeps_the_reply_of_an_unreadable_usage(usage: dict[str, Any]) -> None:
    cm, events = _manager("chat")
    http = httpx.Client(transport=httpx.MockTransport(_chat_reply(usage)))
    llm = OpenAIClient(openai.OpenAI(api_key="t", base_url="http://127.0.0.1:9/v1", max_retries=0, http_client=http))
    response = llm.chat(cm, model="gpt-4o")
    assert response.choices[0].message.content == ANSWER
    assert cm.messages()[-1].text == ANSWER
    cm.tracer.telemetry.flush()
    assert _warned(events)
    cm.close()


def test_the_async_openai_wrapper_keeps_the_reply_of_an_unreadable_usage() -> None:
    cm, events = _manager("achat")

    async def run() -> None:
        http = httpx.AsyncClient(transport=httpx.MockTransport(_chat_reply(BAD_OPENAI_USAGES["negative"])))
        llm = AsyncOpenAIClient(openai.AsyncOpenAI(api_key="t", base_url="http://127.0.0.1:9/v1", max_retries=0,
                                                   http_client=http))
        await llm.chat(cm, model="gpt-4o")

    asyncio.run(run())
    assert cm.messages()[-1].text == ANSWER
    cm.tracer.telemetry.flush()
    assert _warned(events)
    cm.close()


def test_the_anthropic_wrapper_keeps_the_reply_of_an_unreadable_usage() -> None:
    cm, events = _manager("messages")

    import httpx2  # (the anthropic SDK's own fork of httpx)

    def handler(request: Any) -> Any:
        return httpx2.Response(200, json={
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": ANSWER}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": -1, "output_tokens": 3}})

    http = httpx2.Client(transport=httpx2.MockTransport(handler))
    llm = AnthropicClient(anthropic.Anthropic(api_key="t", base_url="http://127.0.0.1:9", max_retries=0,
                                              http_client=http))
    llm.messages(cm, model="claude-sonnet-4-5", max_tokens=100)
    assert cm.messages()[-1].text == ANSWER
    cm.tracer.telemetry.flush()
    assert _warned(events)
    cm.close()


@pytest.mark.parametrize("count", [float("inf"), float("-inf"), float("nan")], ids=["inf", "-inf", "nan"])
def test_a_count_that_is_no_number_is_an_unreadable_report_not_an_overflow(count: float) -> None:
    # Python's JSON reader takes ``Infinity`` and ``NaN`` from an upstream: ``int(inf)`` raised OverflowError, which
    # the proxy's guard (ValueError, TypeError) let through, failing the request after the upstream had answered.
    from contextfold.tokens import TokenUsage

    with pytest.raises(ValueError, match="prompt_tokens"):
        TokenUsage.from_any({"prompt_tokens": count, "completion_tokens": 1})
