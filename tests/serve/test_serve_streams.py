"""Streaming and the other two APIs through the proxy: the openai SDK (chat and Responses) and the anthropic SDK."""

from __future__ import annotations

import threading
from typing import Any

import anthropic
import httpx
import openai
import pytest
from _serve_support import MODEL, UPSTREAM_WINDOW, WINDOW, opening_fixture, proxy_fixture, upstream_fixture  # noqa: F401 (fixtures)

from contextfold.serve import ProxyServer
from contextfold.testing import ErrorReply, Reply, ScriptedLLMServer, ScriptedToolCall


def oai(proxy: ProxyServer, key: str = "sk-stream-caller") -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key=key, max_retries=0)


def ant(proxy: ProxyServer, key: str = "sk-ant-stream-caller") -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy.url, api_key=key, max_retries=0)


def listing(n: int) -> str:
    return "\n".join(f"{n}:{i:04d} lib/pkg_{i % 13}/file_{i}.py  {i * 31} bytes  modified" for i in range(350))


def test_a_chat_stream_passes_through_as_it_arrives(upstream: ScriptedLLMServer, proxy: ProxyServer,
                                                    opening: str) -> None:
    """The first event reaches the client while the upstream still holds the rest of the stream."""
    before = len(upstream.requests)
    upstream.push("streamed words arrive one piece after another")
    upstream.stream_pause = threading.Event()
    try:
        with httpx.stream("POST", proxy.url + "/v1/chat/completions", timeout=10,
                          headers={"authorization": "Bearer sk-stream-caller"},
                          json={"model": MODEL, "stream": True, "messages": [{"role": "user", "content": opening}]}
                          ) as answer:
            lines = answer.iter_lines()
            first = next(line for line in lines if line.startswith("data:"))
            assert '"role":"assistant"' in first.replace(" ", "")  # before the upstream sent anything more
            upstream.stream_pause.set()
            rest = [line for line in lines if line.startswith("data:")]
    finally:
        upstream.stream_pause.set()
        upstream.stream_pause = None
    assert rest[-1] == "data: [DONE]" and not any('"usage":{' in line.replace(" ", "") for line in rest)
    assert upstream.requests[before].body["stream_options"] == {"include_usage": True}  # asked on its own account


def test_openai_sdk_chat_streaming_with_tools_over_many_turns(upstream: ScriptedLLMServer, proxy: ProxyServer,
                                                              opening: str) -> None:
    before = len(upstream.requests)
    llm = oai(proxy)
    history: list[dict[str, Any]] = [{"role": "user", "content": opening}]
    for turn in range(6):
        upstream.push(Reply.calling(ScriptedToolCall("ls", {"dir": f"lib/{turn}"}, id=f"call_s{turn}"), text="Look."))
        with llm.chat.completions.stream(model=MODEL, messages=history) as stream:
            message = stream.get_final_completion().choices[0].message
        assert message.content == "Look." and message.tool_calls and message.tool_calls[0].id == f"call_s{turn}"
        history += [message.model_dump(exclude_none=True),
                    {"role": "tool", "tool_call_id": f"call_s{turn}", "content": listing(turn)}]
    upstream.push("Finished.")
    stream = llm.chat.completions.create(model=MODEL, messages=history, stream=True,
                                         stream_options={"include_usage": True})
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Finished."
    assert chunks[-1].usage is not None  # asked for by the caller: passed through
    sent = upstream.requests[before:]
    assert len(sent) == 7 and not [r for r in sent if r.invalid or r.status != 200]
    assert all(r.input_tokens <= WINDOW for r in sent)


def test_openai_sdk_responses_whole_history_and_continuations(upstream: ScriptedLLMServer, proxy: ProxyServer,
                                                              opening: str) -> None:
    before = len(upstream.requests)
    llm = oai(proxy)
    upstream.push(Reply.calling(ScriptedToolCall("ls", {"dir": "src"}, id="call_r1")), "src holds 350 files.",
                  "Yes, file_7.py.", "It has 217 bytes.")
    first = llm.responses.create(model=MODEL, instructions="Be brief.", input=opening)
    call = first.output[0]
    assert call.type == "function_call" and call.call_id == "call_r1"
    history: list[Any] = [{"role": "user", "content": opening}, call.model_dump(exclude_none=True),
                          {"type": "function_call_output", "call_id": "call_r1", "output": "350 files"}]
    second = llm.responses.create(model=MODEL, instructions="Be brief.", input=history)
    assert second.output_text == "src holds 350 files."
    # The client switches to continuing by id: only the new input travels, the proxy holds the rest.
    with llm.responses.stream(model=MODEL, instructions="Be brief.", previous_response_id=second.id,
                              input="Is there a file_7?") as stream:
        third = stream.get_final_response()
    assert third.output_text == "Yes, file_7.py."
    fourth = llm.responses.create(model=MODEL, instructions="Be brief.", previous_response_id=third.id,
                                  input="How big?")
    assert fourth.output_text == "It has 217 bytes."
    sent = upstream.requests[before:]
    assert not [r for r in sent if r.invalid or r.status != 200]
    assert {r.body["instructions"] for r in sent} == {"Be brief."}
    assert not any("previous_response_id" in r.body for r in sent)
    # Nothing to compact: the last request is the whole conversation, each reply fed once, in order.
    last = [{k: v for k, v in item.items() if k in ("role", "type", "call_id", "output")}
            for item in sent[-1].body["input"]]
    assert last == [{"role": "user"}, {"type": "function_call", "call_id": "call_r1"},
                    {"type": "function_call_output", "call_id": "call_r1", "output": "350 files"},
                    {"type": "message", "role": "assistant"}, {"role": "user"},
                    {"type": "message", "role": "assistant"}, {"role": "user"}]
    texts = [str(item.get("content")) for item in sent[-1].body["input"] if item.get("role")]
    assert texts[0] == opening and "src holds 350" in texts[1] and texts[2] == "Is there a file_7?"
    assert "Yes, file_7.py." in texts[3] and texts[4] == "How big?"


def test_a_continuation_of_someone_elses_response_is_refused(upstream: ScriptedLLMServer, proxy: ProxyServer,
                                                             opening: str) -> None:
    upstream.push("mine")
    mine = oai(proxy, "sk-owner").responses.create(model=MODEL, input=opening)
    try:
        oai(proxy, "sk-intruder").responses.create(model=MODEL, previous_response_id=mine.id, input="and?")
    except openai.BadRequestError as exc:
        assert "previous_response_id" in str(exc)
    else:
        raise AssertionError("another caller continued a response it was never given")


def test_anthropic_sdk_streaming_and_not(upstream: ScriptedLLMServer, proxy: ProxyServer, opening: str) -> None:
    before = len(upstream.requests)
    llm = ant(proxy)
    system = [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
    history: list[dict[str, Any]] = [{"role": "user", "content": opening}]
    for turn in range(5):
        upstream.push(Reply.calling(ScriptedToolCall("ls", {"dir": f"d{turn}"}, id=f"call_a{turn}"), text="Listing."))
        if turn % 2:
            with llm.messages.stream(model="claude-haiku-4-5", max_tokens=500, system=system,  # type: ignore[arg-type]
                                     messages=history) as stream:  # type: ignore[arg-type]
                reply = stream.get_final_message()
        else:
            reply = llm.messages.create(model="claude-haiku-4-5", max_tokens=500, system=system,  # type: ignore[arg-type]
                                        messages=history)  # type: ignore[arg-type]
        use = next(b for b in reply.content if b.type == "tool_use")
        assert use.input == {"dir": f"d{turn}"}
        history += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                  "content": listing(turn)}]}]
    upstream.push("Done here.")
    assert llm.messages.create(model="claude-haiku-4-5", max_tokens=500, system=system,  # type: ignore[arg-type]
                               messages=history).content[0].text == "Done here."  # type: ignore[arg-type, union-attr]
    sent = upstream.requests[before:]
    assert len(sent) == 6 and not [r for r in sent if r.invalid or r.status != 200]
    assert all(r.body["system"] == system for r in sent)  # blocks and cache_control kept
    # Anthropic counts max_tokens against the window. There is no exact Claude tokenizer: the proxy estimates (3.5
    # characters a token), and the scripted upstream counts with o200k, a third more on these digit-heavy listings.
    # The proxy grounds its counts in the usage reported for the previous view, so every request fits the upstream.
    assert all(r.input_tokens + 500 <= UPSTREAM_WINDOW for r in sent)
    assert opening in str(sent[-1].body["messages"])  # the task stays verbatim through the compactions


def test_responses_in_a_conversation_the_proxy_holds_the_history(upstream: ScriptedLLMServer, proxy: ProxyServer,
                                                                 opening: str) -> None:
    """``conversation=`` names the session; a request retried after its reply was lost is fed once."""
    llm = oai(proxy, "sk-conversation-caller")
    conversation = "conv_" + opening[5:13]
    upstream.push("First answer.", ErrorReply.server_error(), "Second answer.", "Third answer.")
    before = len(upstream.requests)
    llm.responses.create(model=MODEL, conversation=conversation, input=opening)
    with pytest.raises(openai.InternalServerError):  # the reply is lost after the proxy saved the input
        llm.responses.create(model=MODEL, conversation=conversation, input="And then?")
    llm.responses.create(model=MODEL, conversation=conversation, input="And then?")  # the client's retry
    llm.responses.create(model=MODEL, conversation=conversation, input="Last?")
    sent = [r.body for r in upstream.requests[before:]]
    assert not any("conversation" in body for body in sent)
    texts = [[str(item.get("content")) for item in body["input"]] for body in sent]
    assert texts[0] == [opening]
    assert texts[1][0] == opening and "First answer." in texts[1][1] and texts[1][2] == "And then?"
    assert texts[2] == texts[1]  # the retry feeds nothing twice
    assert texts[3][:3] == texts[2] and "Second answer." in texts[3][3] and texts[3][4:] == ["Last?"]


def test_a_responses_stream_cut_upstream_is_not_remembered_as_the_sessions_head(
        upstream: ScriptedLLMServer, proxy: ProxyServer, opening: str) -> None:
    """An upstream stream that ends before ``response.completed`` (a dropped connection) is not a reply.

    Before: the proxy saved the cut response as the session's head with no output (its ``finished`` flag was
    never read), so a continuation of it was accepted and the upstream saw a conversation missing that reply.
    """
    llm = oai(proxy, "sk-cut-caller")
    upstream.push("a reply that never arrives whole")
    upstream.stream_cut_after = 3
    try:
        events = list(llm.responses.create(model=MODEL, input=opening, stream=True))
    finally:
        upstream.stream_cut_after = None
    assert events[0].type == "response.created"
    assert not any(e.type == "response.completed" for e in events)
    cut_id = events[0].response.id
    before = len(upstream.requests)
    with pytest.raises(openai.BadRequestError, match="previous_response_id"):
        llm.responses.create(model=MODEL, previous_response_id=cut_id, input="and then?")
    assert len(upstream.requests) == before
