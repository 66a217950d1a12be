"""The client wrappers' retrieval opt-in: the tools go into ``tools=`` and the model's calls are answered inside
the wrapped call, against the scripted server with the real SDKs."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator

import pytest

pytest.importorskip("openai")
pytest.importorskip("anthropic")

import anthropic
import openai
from _fw_support import TARGET_ROW, big_output, retrieval_handler, target_row

from contextfold.errors import ConfigError
from contextfold.integrations.anthropic_client import wrap_anthropic
from contextfold.integrations.openai_client import wrap_openai
from contextfold.manager import ContextManager
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import Reply, ScriptedToolCall

NAMES = ["tool_output_cache", "tool_output_cache_grep", "history_search"]


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(handler=retrieval_handler, validator="formats") as s:
        yield s


def manager_with_a_cut_output(session_id: str) -> ContextManager:
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id=session_id)
    cm.add([{"role": "user", "content": "What is the checksum of row 1234?"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "call_big", "type": "function",
                             "function": {"name": "read_big", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_big", "content": big_output()}])
    return cm


def tool_names(body: dict) -> list[str]:  # type: ignore[type-arg]
    return [t.get("function", t).get("name") for t in body.get("tools") or ()]


def test_chat_answers_the_retrieval_call_inside_the_wrapped_call(server: ScriptedLLMServer) -> None:
    cm = manager_with_a_cut_output("client-chat")
    llm = wrap_openai(openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0), retrieval_tools=True)
    response = llm.chat(cm, model="gpt-4o", tools=[{"type": "function", "function": {
        "name": "read_big", "description": "Read the report.", "parameters": {"type": "object"}}}])
    assert response.choices[0].message.content == f"found: {target_row()}"
    assert len(server.requests) == 2 and not server.invalid_requests
    assert tool_names(server.requests[0].body) == ["read_big", *NAMES]
    answered = server.requests[1].items[-1]
    assert (answered["role"], answered["tool_call_id"]) == ("tool", "call_read")
    assert target_row() in answered["content"]
    assert cm.messages()[-1].text == f"found: {target_row()}"


def test_responses_answers_the_retrieval_call(server: ScriptedLLMServer) -> None:
    cm = manager_with_a_cut_output("client-responses")
    llm = wrap_openai(openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0), retrieval_tools=True)
    response = llm.responses(cm, model="gpt-4o")
    assert response.output_text == f"found: {target_row()}"
    assert len(server.requests) == 2 and tool_names(server.requests[0].body) == NAMES
    answered = server.requests[1].items[-1]
    assert answered["type"] == "function_call_output" and target_row() in answered["output"]


def test_async_anthropic_answers_the_retrieval_call(server: ScriptedLLMServer) -> None:
    cm = manager_with_a_cut_output("client-anthropic")
    client = anthropic.AsyncAnthropic(base_url=server.base_url.removesuffix("/v1"), api_key="test", max_retries=0)
    llm = wrap_anthropic(client, retrieval_tools=True)
    reply = asyncio.run(llm.messages(cm, model="claude-sonnet-4-5", max_tokens=1024))  # type: ignore[misc]
    assert reply.content[0].text == f"found: {target_row()}"
    assert len(server.requests) == 2 and tool_names(server.requests[0].body) == NAMES
    assert target_row() in json.dumps(server.requests[1].items[-1])


def test_without_the_opt_in_nothing_is_added_and_new_notes_name_no_tool(server: ScriptedLLMServer) -> None:
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id="client-plain")
    cm.add({"role": "user", "content": "hi"})
    server.handler = None
    server.push("hello")
    wrap_openai(openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)).chat(cm, model="gpt-4o")
    assert "tools" not in server.requests[0].body
    cm.add([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "read_big", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": big_output()}])
    note = cm.messages()[-1].text
    assert "tool_output_cache" not in note and "bytes in full" in note
    with pytest.raises(ConfigError, match="add_reply"):
        wrap_openai(openai.OpenAI(base_url=server.base_url, api_key="test"), retrieval_tools=True, add_reply=False)


# -- the declarations: cheap, and enough for a model to use each tool -----------------------------------------------
DECLARED_TOKENS_CAP = 250  # issue 21 §6: ~630 by the measure, 551 -> 423 by count_tools before this cut


def test_the_three_declarations_cost_at_most_250_tokens() -> None:
    from contextfold.archive.search import history_search_schema
    from contextfold.cache.retrieval import retrieval_tool_schemas
    from contextfold.tokens import counter_for_model

    tools = [*retrieval_tool_schemas(), history_search_schema()]
    assert counter_for_model("gpt-4o").count_tools(tools) <= DECLARED_TOKENS_CAP
    read, grep, search = (t["function"] for t in tools)  # type: ignore[index]
    assert "ref=tout_" in read["description"] and "numbered lines" in read["description"]
    assert set(read["parameters"]["properties"]) == {"ref_id", "offset", "limit"}
    assert "ref:line:text" in grep["description"] and grep["parameters"]["required"] == ["pattern"]
    assert "summarized or removed" in search["description"] and search["parameters"]["required"] == ["pattern"]


def declared_model(request: object) -> Reply | str:
    """A model that knows only what the request declares: it calls each tool with arguments built from the
    declaration (validated against the declared schema), in turn, then answers with what the three calls returned."""
    import jsonschema

    body = request.body  # type: ignore[attr-defined]
    tools = {t["function"]["name"]: t["function"] for t in body["tools"]}
    items = request.items  # type: ignore[attr-defined]
    answered = [m for m in items if m.get("role") == "tool"][1:]  # after read_big's own output
    ref = re.search(r"ref=(tout_[0-9a-f]+)", json.dumps(items))
    assert ref is not None, "the cut output names its ref"
    plan = [
        ("tool_output_cache", {"ref_id": ref.group(1), "offset": TARGET_ROW, "limit": 1}),
        ("tool_output_cache_grep", {"pattern": f"^row {TARGET_ROW:05d}:", "ref_id": ref.group(1), "context": 1}),
        ("history_search", {"pattern": "deploy key", "role": "user"}),
    ]
    if len(answered) < len(plan):
        name, arguments = plan[len(answered)]
        declared = tools[name]
        assert set(arguments) <= set(declared["parameters"]["properties"]), name
        jsonschema.validate(arguments, declared["parameters"])
        return Reply.calling(ScriptedToolCall(name, arguments, id=f"call_{len(answered)}"))
    return "answers: " + " || ".join(m["content"] for m in answered)


def test_a_model_that_reads_only_the_declarations_uses_each_tool() -> None:
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id="client-declared")
    cm.add([{"role": "user", "content": "The deploy key is K-7731; remember it."},
            {"role": "assistant", "content": "Noted."}])
    for turn in range(8):
        cm.add([{"role": "user", "content": f"Step {turn}: carry on."}, {"role": "assistant", "content": "Done."}])
    cm.compact()
    cm.add([{"role": "user", "content": "What is the checksum of row 1234?"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "call_big", "type": "function",
                             "function": {"name": "read_big", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_big", "content": big_output()}])
    with ScriptedLLMServer(handler=declared_model, validator="formats") as server:
        llm = wrap_openai(openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0),
                          retrieval_tools=True)
        answer = llm.chat(cm, model="gpt-4o").choices[0].message.content
    read, grep, search = answer.removeprefix("answers: ").split(" || ")
    assert f"{TARGET_ROW}\t{target_row()}" in read or f"{TARGET_ROW}: {target_row()}" in read, read
    assert f"{TARGET_ROW}:{target_row()}" in grep and f"{TARGET_ROW + 1}:" in grep  # the match, one line around
    assert "K-7731" in search and "user" in search
    assert not server.invalid_requests
