"""The agent compacts its own context with ``compact_context``, then finds a compacted fact with ``history_search``.

One scenario for every framework (the real SDK against the scripted server on loopback) and for a client wrapper:
the model reads a deploy config (the fact is a line of it), then eight build-log pages, calls ``compact_context``
(the config output leaves the view for a summary), calls ``history_search`` for the line, and answers from it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from contextfold.manager import ContextManager
from contextfold.testing.server import RecordedRequest, ScriptedLLMServer
from contextfold.testing.wire import Reply, ScriptedToolCall

FACT = "deploy.primary_host = db-replica-3.internal"
PAGES = 8
ANSWER = "The primary host is db-replica-3.internal."
INSTRUCTIONS = "keep the deploy steps"
PROMPT = "Prepare the deploy."


def config_text() -> str:
    return "\n".join([*(f"deploy.step_{i} = run migration {i}" for i in range(20)), FACT,
                      *(f"deploy.region_{i} = eu-{i}" for i in range(20))])


def log_text(page: int) -> str:
    return f"build log page {page}\n" + "\n".join(f"line {i}: compiling module_{page}_{i} ... ok" for i in range(80))


def script() -> list[Reply | str]:
    return [Reply.calling(ScriptedToolCall("read_config", {}, id="call_config")),
            *(Reply.calling(ScriptedToolCall("read_log", {"page": p}, id=f"call_log_{p}"))
              for p in range(1, PAGES + 1)),
            Reply.calling(ScriptedToolCall("compact_context", {"instructions": INSTRUCTIONS}, id="call_compact")),
            Reply.calling(ScriptedToolCall("history_search", {"pattern": "primary_host"}, id="call_search")),
            ANSWER]


def manager(session_id: str) -> ContextManager:
    # gpt-4o's own window: nothing compacts on its own; the one compaction is the agent's. The budget line is on
    # when something changed, so each adapter shows it puts the line in the request and never in the history.
    return ContextManager(model="gpt-4o", store="memory", archive="memory", session_id=session_id,
                          policy={"context_status": "changes"})


def text_of(request: RecordedRequest) -> str:
    return json.dumps(request.items)


def tool_names(request: RecordedRequest) -> list[str]:
    return [t.get("function", t).get("name") for t in request.body.get("tools") or ()]


def assert_compacted_then_found(server: ScriptedLLMServer, cm: ContextManager) -> None:
    """What must hold after the scenario, whatever the framework."""
    assert [r.invalid for r in server.invalid_requests] == []
    assert [r.status for r in server.requests] == [200] * (PAGES + 4)
    assert "compact_context" in tool_names(server.requests[0]) and "history_search" in tool_names(server.requests[0])
    assert cm.compactions == 1
    before, after, last = server.requests[PAGES], server.requests[PAGES + 2], server.requests[PAGES + 3]
    assert FACT in text_of(before)  # the config output was in view before the agent compacted
    assert FACT not in text_of(after)  # ... and not after: a summary took its place
    assert "[contextfold summary v1" in text_of(after)
    # The compaction's answer: what was summarized and kept, and where the rest is; the receipt after the summary.
    assert "compact_context: " in text_of(after) and " earlier messages summarized; context " in text_of(after)
    assert f"The summarizer was asked to keep: {INSTRUCTIONS}" in text_of(after)
    assert "[context note: " in text_of(after) and "call history_search with a regular expression" in text_of(after)
    # The budget line closes that request: what left the view and how to get it back.
    status = json.dumps(after.items[-1])
    assert "[context: " in status and "since your last turn: " in status
    assert "earlier messages summarized, history_search finds their details]" in status
    assert "[context: " not in text_of(last)  # nothing changed since: no line
    # history_search brought the compacted line back, from the archive.
    found = [item for item in last.items if "history_search: " in json.dumps(item)]
    assert found and FACT in json.dumps(found[-1])


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(validator="formats") as s:
        s.push(*script())
        yield s


def test_openai_agents_sdk(server: ScriptedLLMServer) -> None:
    pytest.importorskip("agents")
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents.models.openai_responses import OpenAIResponsesModel
    from openai import AsyncOpenAI

    from contextfold.integrations.openai_agents import contextfold_run

    set_tracing_disabled(True)

    @function_tool
    def read_config() -> str:
        """Read the deploy configuration."""
        return config_text()

    @function_tool
    def read_log(page: int) -> str:
        """Read one page of the build log."""
        return log_text(page)

    cm = manager("fw-agents-compact")
    kit = contextfold_run(cm, compact_tool=True)
    model = OpenAIResponsesModel("gpt-4o", AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0))
    agent = Agent(name="deployer", instructions="Deploy carefully.", tools=[read_config, read_log, *kit.tools],
                  model=model)
    result = asyncio.run(Runner.run(agent, PROMPT, run_config=kit.run_config, hooks=kit.hooks, max_turns=20))
    assert result.final_output == ANSWER
    assert_compacted_then_found(server, cm)
    assert "[context: " not in json.dumps(result.to_input_list())  # the line never enters the SDK's history


def test_langchain(server: ScriptedLLMServer) -> None:
    pytest.importorskip("langchain")
    pytest.importorskip("langchain_openai")
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    from contextfold.integrations.langchain import ContextfoldMiddleware

    @tool
    def read_config() -> str:
        """Read the deploy configuration."""
        return config_text()

    @tool
    def read_log(page: int) -> str:
        """Read one page of the build log."""
        return log_text(page)

    cm = manager("fw-langchain-compact")
    middleware = ContextfoldMiddleware(cm, compact_tool=True)
    chat = ChatOpenAI(model="gpt-4o", base_url=server.base_url, api_key="test", max_retries=0)  # type: ignore[arg-type]
    agent = create_agent(chat, tools=[read_config, read_log, *middleware.tools], system_prompt="Deploy carefully.",
                         middleware=[middleware])
    state = agent.invoke({"messages": [HumanMessage(PROMPT)]}, config={"recursion_limit": 100})
    assert state["messages"][-1].content == ANSWER
    assert_compacted_then_found(server, cm)
    assert not any("[context: " in str(m.content) for m in state["messages"])  # nor the agent state


def test_pydantic_ai(server: ScriptedLLMServer) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from contextfold.integrations.pydantic_ai import ContextfoldHistoryProcessor

    cm = manager("fw-pydantic-compact")
    processor = ContextfoldHistoryProcessor(cm, compact_tool=True)
    model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=server.base_url, api_key="test"))
    agent: Agent[None, str] = Agent(model, system_prompt="Deploy carefully.", capabilities=[processor.capability()])

    @agent.tool_plain
    def read_config() -> str:
        """Read the deploy configuration."""
        return config_text()

    @agent.tool_plain
    def read_log(page: int) -> str:
        """Read one page of the build log."""
        return log_text(page)

    result = agent.run_sync(PROMPT)
    assert result.output == ANSWER
    assert_compacted_then_found(server, cm)
    assert "[context: " not in str(result.all_messages())  # nor the run's history


def test_openai_client_wrapper(server: ScriptedLLMServer) -> None:
    """The wrapper answers compact_context and history_search inside the call; the app answers its own tools."""
    pytest.importorskip("openai")
    import openai

    from contextfold.integrations.openai_client import wrap_openai

    cm = manager("client-compact")
    llm = wrap_openai(openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0), retrieval_tools=True,
                      compact_tool=True)
    tools = [{"type": "function", "function": {"name": n, "description": f"{n}.", "parameters": {
        "type": "object", "properties": {"page": {"type": "integer"}}}}} for n in ("read_config", "read_log")]
    cm.add({"role": "user", "content": PROMPT})
    while True:
        message = llm.chat(cm, model="gpt-4o", tools=tools).choices[0].message
        if not message.tool_calls:
            break
        for call in message.tool_calls:  # only the app's own tools come back here
            page = json.loads(call.function.arguments).get("page")
            output = config_text() if call.function.name == "read_config" else log_text(int(page))
            cm.add({"role": "tool", "tool_call_id": call.id, "content": output})
    assert message.content == ANSWER
    assert_compacted_then_found(server, cm)
    assert not any("[context: " in m.text for m in cm.messages())  # nor the manager's history
