"""The client wrappers stream (issue 21): the SDK's events pass through; reply and usage are recorded at the end."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import openai
import pytest

from contextfold.errors import ConfigError
from contextfold.integrations.anthropic_client import wrap_anthropic
from contextfold.integrations.openai_client import wrap_openai
from contextfold.manager import ContextManager
from contextfold.testing.agent_run import chat_tools, responses_tools
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import Reply, ScriptedToolCall

CALL = Reply.calling(ScriptedToolCall("read_file", {"path": "build.log", "offset": 2}, id="call_2"),
                     text="Reading page 2.")


def make() -> ContextManager:
    cm = ContextManager("gpt-4o", store="memory", archive="memory")
    cm.add({"role": "user", "content": "where does the build fail?"})
    return cm


def test_chat_stream_records_the_reply_and_its_usage_when_it_ends() -> None:
    cm = make()
    with ScriptedLLMServer([CALL], validator="formats") as server:
        llm: Any = wrap_openai(openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0))
        stream = llm.chat(cm, model="gpt-4o", tools=chat_tools(), stream=True)
        assert [m.role for m in cm.messages()] == ["user"]  # nothing recorded before the end
        chunks = list(stream)
    assert len(chunks) > 3 and stream.final.choices[0].message.tool_calls[0].id == "call_2"
    assert server.requests[0].body["stream"] is True
    assert server.requests[0].body["stream_options"] == {"include_usage": True}
    assert cm.usage_total.input == server.requests[0].input_tokens > 0
    last = cm.messages()[-2]  # the call, then the "aborted" placeholder its result will replace
    assert (last.role, last.text, last.tool_calls[0].id) == ("assistant", "Reading page 2.", "call_2")


def test_a_stream_closed_early_adds_nothing() -> None:
    cm = make()
    with ScriptedLLMServer([CALL]) as server:
        llm: Any = wrap_openai(openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0))
        with llm.responses(cm, model="gpt-4o", tools=responses_tools(), stream=True) as stream:
            next(iter(stream))
        with pytest.raises(RuntimeError, match="has not ended"):
            _ = stream.final
    assert [m.role for m in cm.messages()] == ["user"] and cm.usage_total.input == 0


def test_async_streams_of_both_sdks() -> None:
    async def run(server: ScriptedLLMServer) -> list[Any]:
        finals: list[Any] = []
        oai: Any = wrap_openai(openai.AsyncOpenAI(base_url=server.base_url, api_key="t", max_retries=0))
        ant: Any = wrap_anthropic(anthropic.AsyncAnthropic(base_url=server.url, api_key="t", max_retries=0))
        for call in (lambda cm: oai.chat(cm, model="gpt-4o", stream=True),
                     lambda cm: oai.responses(cm, model="gpt-4o", instructions="be brief", stream=True),
                     lambda cm: ant.messages(cm, model="claude-sonnet-4-5", max_tokens=200, stream=True)):
            cm = make()
            stream = await call(cm)
            finals.append(await stream.until_done())
            assert cm.messages()[-1].text == "done" and cm.usage_total.input > 0
        await oai.client.close()
        await ant.client.close()
        return finals

    with ScriptedLLMServer(["done", "done", "done"], validator="formats") as server:
        chat, response, message = asyncio.run(run(server))
    assert chat.choices[0].message.content == "done" and response.output_text == "done"
    assert message.content[0].text == "done"
    assert [r.body.get("stream") for r in server.requests] == [True, True, True]


def test_streaming_with_retrieval_rounds_is_refused_clearly() -> None:
    llm: Any = wrap_openai(openai.OpenAI(base_url="http://127.0.0.1:9", api_key="t"), retrieval_tools=True)
    with pytest.raises(ConfigError, match="whole reply") as info:
        llm.chat(make(), model="gpt-4o", stream=True)
    assert info.value.field == "chat.stream"
    with pytest.raises(ConfigError, match="true or false"):
        wrap_openai(openai.OpenAI(base_url="http://127.0.0.1:9", api_key="t")).chat(make(), model="m", stream="yes")
