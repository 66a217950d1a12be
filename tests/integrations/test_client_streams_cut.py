"""A stream that ends before its final event (a dropped connection, a proxy's timeout) is not a whole reply.

The scripted server ends each stream cleanly after its first events (``stream_cut_after``), as a proxy cutting the
upstream does: the SDKs see a normal end of the event stream. The wrappers must not record what arrived as the
model's reply (a half sentence, a tool call without its arguments), and must say so with a contextfold error, for
all three APIs, sync and async.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest

from contextfold.errors import ContextfoldError, IncompleteStream
from contextfold.integrations.anthropic_client import wrap_anthropic
from contextfold.integrations.openai_client import wrap_openai
from contextfold.manager import ContextManager
from contextfold.testing.server import ScriptedLLMServer

REPLY = "the build fails in step three because of a missing header"


def make() -> ContextManager:
    cm = ContextManager("gpt-4o", store="memory", archive="memory")
    cm.add({"role": "user", "content": "where does the build fail?"})
    return cm


def sync_calls(server: ScriptedLLMServer) -> dict[str, Callable[[ContextManager], Any]]:
    oai: Any = wrap_openai(openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0))
    ant: Any = wrap_anthropic(anthropic.Anthropic(base_url=server.url, api_key="t", max_retries=0))
    return {"chat": lambda cm: oai.chat(cm, model="gpt-4o", stream=True),
            "responses": lambda cm: oai.responses(cm, model="gpt-4o", stream=True),
            "anthropic": lambda cm: ant.messages(cm, model="claude-sonnet-4-5", max_tokens=200, stream=True)}


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_a_stream_cut_before_its_final_event_adds_nothing_and_says_so(api: str) -> None:
    cm = make()
    with ScriptedLLMServer([REPLY]) as server:
        server.stream_cut_after = 3
        stream = sync_calls(server)[api](cm)
        events: list[Any] = []
        with pytest.raises(IncompleteStream, match="ended before its final event") as raised:
            for event in stream:
                events.append(event)
        with pytest.raises(IncompleteStream):
            _ = stream.final  # the reply was never whole: asking for it says why, again
    assert isinstance(raised.value, ContextfoldError) and raised.value.api == api
    assert "not added to the history" in str(raised.value)
    assert events  # the events that did arrive were passed through
    assert [(m.role, m.text) for m in cm.messages()] == [("user", "where does the build fail?")]
    assert cm.usage_total.input == 0


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_the_same_stream_uncut_is_recorded_whole(api: str) -> None:
    cm = make()
    with ScriptedLLMServer([REPLY]) as server:
        stream = sync_calls(server)[api](cm)
        list(stream)
    assert [(m.role, m.text) for m in cm.messages()][-1] == ("assistant", REPLY)


def test_async_streams_cut_early_add_nothing() -> None:
    async def run(server: ScriptedLLMServer) -> list[str]:
        oai: Any = wrap_openai(openai.AsyncOpenAI(base_url=server.base_url, api_key="t", max_retries=0))
        ant: Any = wrap_anthropic(anthropic.AsyncAnthropic(base_url=server.url, api_key="t", max_retries=0))
        seen: list[str] = []
        for call in (lambda cm: oai.chat(cm, model="gpt-4o", stream=True),
                     lambda cm: oai.responses(cm, model="gpt-4o", stream=True),
                     lambda cm: ant.messages(cm, model="claude-sonnet-4-5", max_tokens=200, stream=True)):
            cm = make()
            stream = await call(cm)
            with pytest.raises(IncompleteStream) as raised:
                await stream.until_done()
            seen.append(raised.value.api)
            assert [m.role for m in cm.messages()] == ["user"] and cm.usage_total.input == 0
        await oai.client.close()
        await ant.client.close()
        return seen

    with ScriptedLLMServer([REPLY] * 3) as server:
        server.stream_cut_after = 3
        assert asyncio.run(run(server)) == ["chat", "responses", "anthropic"]
