"""Retrieval tools answered inside the proxy: the model reads cut outputs back, the client only sees its own tools."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from _serve_support import MODEL, opening_fixture, proxy_config, upstream_fixture  # noqa: F401 (fixtures)

from contextfold.cache.refs import ref_id_for
from contextfold.serve import ProxyServer
from contextfold.testing import Reply, ScriptedLLMServer, ScriptedToolCall

OWN_TOOL = {"type": "function", "function": {
    "name": "bash", "description": "Run a command.",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}}
RETRIEVAL = {"tool_output_cache", "tool_output_cache_grep", "history_search"}


@pytest.fixture(scope="module")
def rproxy(upstream: ScriptedLLMServer) -> Iterator[ProxyServer]:
    with ProxyServer(proxy_config(upstream, retrieval_tools=True)) as server:
        yield server


def build_log(tag: str, lines_count: int = 900) -> str:
    lines = [f"{tag} [{i:04d}] step {i} ok" for i in range(lines_count)]
    lines[lines_count * 2 // 3] = f"{tag} [{lines_count * 2 // 3:04d}] needle: linker error in unit_42.o"
    return "\n".join(lines)


def tool_names(body: dict[str, Any]) -> set[str]:
    return {t.get("name") or t["function"]["name"] for t in body.get("tools") or ()}


def grep_then_answer(ref: str) -> list[Reply]:
    return [Reply.calling(ScriptedToolCall("tool_output_cache_grep", {"ref_id": ref, "pattern": "needle"},
                                           id="call_grep")), "The linker fails on unit_42.o."]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_chat_the_model_greps_a_cut_output_and_the_client_sees_only_the_answer(
        upstream: ScriptedLLMServer, rproxy: ProxyServer, opening: str, stream: bool) -> None:
    llm = openai.OpenAI(base_url=rproxy.url + "/v1", api_key="sk-retrieval-a", max_retries=0)
    log = build_log(opening[:13])
    history: list[dict[str, Any]] = [
        {"role": "user", "content": opening},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_own", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "make"}'}}]},
        {"role": "tool", "tool_call_id": "call_own", "content": log}]
    upstream.push(*grep_then_answer(ref_id_for(log.encode())))
    before = len(upstream.requests)
    if stream:
        with llm.chat.completions.stream(model=MODEL, messages=history, tools=[OWN_TOOL]) as events:  # type: ignore[list-item]
            message = events.get_final_completion().choices[0].message
    else:
        message = llm.chat.completions.create(model=MODEL, messages=history, tools=[OWN_TOOL]).choices[0].message  # type: ignore[list-item]
    assert message.content == "The linker fails on unit_42.o." and not message.tool_calls
    first, second = upstream.requests[before:]
    assert tool_names(first.body) == {"bash"} | RETRIEVAL
    assert "ref=" + ref_id_for(log.encode()) in json.dumps(first.body["messages"])  # the output was cut
    grep_result = second.body["messages"][-1]
    assert grep_result["role"] == "tool" and grep_result["tool_call_id"] == "call_grep"
    assert "needle: linker error in unit_42.o" in grep_result["content"]
    # The next request of the client carries the answer; the session holds the retrieval round before it.
    upstream.push("Rebuilding.")
    history += [{"role": "assistant", "content": message.content}, {"role": "user", "content": "fix it"}]
    llm.chat.completions.create(model=MODEL, messages=history, tools=[OWN_TOOL])  # type: ignore[list-item]
    last = upstream.requests[-1]
    assert last.status == 200 and last.invalid is None
    roles = [(m["role"], [c["id"] for c in m.get("tool_calls") or ()]) for m in last.body["messages"]]
    assert roles == [("user", []), ("assistant", ["call_own"]), ("tool", []), ("assistant", ["call_grep"]),
                     ("tool", []), ("assistant", []), ("user", [])]


def test_a_caller_cannot_read_another_callers_output(upstream: ScriptedLLMServer, rproxy: ProxyServer,
                                                     opening: str) -> None:
    log = build_log("secret-" + opening[:8])
    ref = ref_id_for(log.encode())
    upstream.push("noted")
    openai.OpenAI(base_url=rproxy.url + "/v1", api_key="sk-owner-a", max_retries=0).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": opening}, {"role": "assistant", "content": None,
                               "tool_calls": [{"id": "c1", "type": "function",
                                               "function": {"name": "bash", "arguments": "{}"}}]},
                               {"role": "tool", "tool_call_id": "c1", "content": log}])
    upstream.push(Reply.calling(ScriptedToolCall("tool_output_cache", {"ref_id": ref}, id="call_steal")), "nothing")
    before = len(upstream.requests)
    openai.OpenAI(base_url=rproxy.url + "/v1", api_key="sk-intruder-b", max_retries=0).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": opening}])
    answer = upstream.requests[before + 1].body["messages"][-1]
    assert answer["tool_call_id"] == "call_steal" and "needle" not in answer["content"]
    assert "secret-" not in answer["content"]


def test_responses_stream_and_anthropic_stream_hide_the_retrieval_round(upstream: ScriptedLLMServer,
                                                                        rproxy: ProxyServer, opening: str) -> None:
    log = build_log("R" + opening[5:13])
    upstream.push(*grep_then_answer(ref_id_for(log.encode())))
    llm = openai.OpenAI(base_url=rproxy.url + "/v1", api_key="sk-retrieval-r", max_retries=0)
    items: list[Any] = [{"role": "user", "content": opening},
                        {"type": "function_call", "call_id": "call_own", "name": "bash", "arguments": "{}"},
                        {"type": "function_call_output", "call_id": "call_own", "output": log}]
    with llm.responses.stream(model=MODEL, input=items, tools=[{"type": "function", "name": "bash",
                                                                "parameters": {"type": "object"}}]) as events:
        kinds = [e.type for e in events]
        response = events.get_final_response()
    assert response.output_text == "The linker fails on unit_42.o."
    assert [o.type for o in response.output] == ["message"] and "response.function_call_arguments.delta" not in kinds
    assert kinds.count("response.created") == 1 and kinds.count("response.completed") == 1

    # Shorter for Claude: the proxy can only estimate its tokens (3.5 characters a token) while the scripted upstream
    # counts o200k, a quarter more on these lines, and the answered output is shown wide up to the window's room.
    log = build_log("A" + opening[5:13], 300)
    upstream.push(*grep_then_answer(ref_id_for(log.encode())))
    before = len(upstream.requests)
    client = anthropic.Anthropic(base_url=rproxy.url, api_key="sk-retrieval-m", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": opening},
                           {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_own", "name": "bash",
                                                              "input": {}}]},
                           {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_own",
                                                         "content": log}]}]
    with client.messages.stream(model="claude-haiku-4-5", max_tokens=300, messages=messages,
                                tools=[{"name": "bash", "input_schema": {"type": "object"}}]) as events:
        message = events.get_final_message()
    assert [b.type for b in message.content] == ["text"] and message.stop_reason == "end_turn"
    assert message.content[0].text == "The linker fails on unit_42.o."  # type: ignore[union-attr]
    first, second = upstream.requests[before:]
    assert tool_names(first.body) == {"bash"} | RETRIEVAL
    assert "needle: linker error" in json.dumps(second.body["messages"][-1])
