"""Each framework adapter applies ``Policy.compactor``: the Agents SDK, pydantic-ai and LangChain send the
provider's context management with a Responses or Anthropic model, and a compaction item that comes back is a
boundary of the view (real frameworks and SDKs over loopback HTTP against the scripted server)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("pydantic_ai")
pytest.importorskip("langchain_openai")

from _pc_session import tool_output
from agents import Agent, Runner, function_tool
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import UsageLimits
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIResponsesModel as PydanticResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

from contextfold import ContextManager, Policy
from contextfold.integrations.openai_agents import contextfold_run
from contextfold.integrations.pydantic_ai import ContextfoldHistoryProcessor
from contextfold.testing import RecordedRequest, Reply, ScriptedLLMServer, ScriptedToolCall

TURNS = 22
WINDOW = 64_000
PROVIDER = Policy(compactor="provider", keep_tool_io_pairs=40)


def _reader(request: RecordedRequest) -> Reply:
    n = request.number
    if n > TURNS:
        return Reply(text="Every page read.")
    return Reply.calling(ScriptedToolCall("read_page", {"page": n}, id=f"call_{n}"), text=f"Reading page {n}.")


def _manager(policy: Policy) -> ContextManager:
    return ContextManager(model="gpt-4o", max_context_tokens=WINDOW, store="memory", archive="memory", policy=policy)


def _assert_provider_compacted(server: ScriptedLLMServer, cm: ContextManager, key: str = "context_management") -> None:
    assert not server.invalid_requests, server.invalid_requests[0].invalid
    assert all(key in r.body for r in server.requests[1:])  # (the first call may go out before the filter asks)
    assert server.context_management.compactions, "the run should cross the compaction threshold"
    assert server.context_management.resent(server.requests) == []
    assert cm.compactions == 0 and cm.provider_context.totals.compactions >= 1


@function_tool
def read_page(page: int) -> str:
    """Read one page of the build log."""
    return tool_output(page, 250)


@pytest.mark.parametrize("policy", [Policy(), PROVIDER], ids=["contextfold", "provider"])
def test_openai_agents_sends_the_providers_compaction_with_a_responses_model(policy: Policy) -> None:
    with ScriptedLLMServer(handler=_reader, validator="formats") as server:
        cm = _manager(policy)
        model = OpenAIResponsesModel("gpt-4o", AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0))
        kit = contextfold_run(cm, model=model)  # (an agent's own Model object is wrapped here)
        agent = Agent(name="reader", instructions="Read every page.", tools=[read_page])
        result = asyncio.run(Runner.run(agent, "read the log", max_turns=TURNS + 3, run_config=kit.run_config,
                                        hooks=kit.hooks))
    assert result.final_output == "Every page read."
    if policy.compactor == "contextfold":
        assert not any("context_management" in r.body for r in server.requests)
        assert cm.compactions + cm.maskings > 0
        return
    _assert_provider_compacted(server, cm)
    assert server.requests[-1].body["context_management"] == [{"type": "compaction",
                                                               "compact_threshold": cm.budgets.hard}]


def _pydantic_agent(model: Any, cm: ContextManager) -> PydanticAgent[None, str]:
    processor = ContextfoldHistoryProcessor(cm)
    agent: PydanticAgent[None, str] = PydanticAgent(model, system_prompt="Read every page.",
                                                    capabilities=[processor.capability()])

    @agent.tool_plain
    def read_page(page: int) -> str:
        """Read one page of the build log."""
        return tool_output(page, 250)

    return agent


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_pydantic_ai_sends_the_providers_context_management(provider: str) -> None:
    with ScriptedLLMServer(handler=_reader, validator="formats") as server:
        cm = _manager(PROVIDER)
        if provider == "openai":
            model: Any = PydanticResponsesModel(
                "gpt-4o", provider=OpenAIProvider(base_url=server.base_url, api_key="test"))
        else:
            model = AnthropicModel("claude-sonnet-4-5", provider=AnthropicProvider(base_url=server.url,
                                                                                     api_key="test"))
        result = _pydantic_agent(model, cm).run_sync("read the log",
                                                     usage_limits=UsageLimits(request_limit=TURNS + 5))
    assert result.output == "Every page read."
    _assert_provider_compacted(server, cm)
    if provider == "anthropic":
        edits = server.requests[-1].body["context_management"]["edits"]
        assert [e["type"] for e in edits] == ["clear_tool_uses_20250919", "compact_20260112"]
        assert "context-management-2025-06-27" in server.requests[-1].headers["anthropic-beta"]


def test_langchain_sends_the_providers_compaction_with_chatopenai_on_responses() -> None:
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    from contextfold.integrations.langchain import ContextfoldMiddleware

    @tool
    def read_page(page: int) -> str:
        """Read one page of the build log."""
        return tool_output(page, 250)

    with ScriptedLLMServer(handler=_reader, validator="formats") as server:
        cm = _manager(PROVIDER)
        model = ChatOpenAI(model="gpt-4o", base_url=server.base_url, api_key="test",  # type: ignore[arg-type]
                           use_responses_api=True, max_retries=0)
        agent = create_agent(model, tools=[read_page], system_prompt="Read every page.",
                             middleware=[ContextfoldMiddleware(cm, mode="wrap_model_call")])
        state = agent.invoke({"messages": [{"role": "user", "content": "read the log"}]},
                             config={"recursion_limit": 4 * TURNS})
    assert "Every page read." in str(state["messages"][-1].content)
    assert not server.invalid_requests, server.invalid_requests[0].invalid
    assert all(r.body.get("context_management") == [{"type": "compaction", "compact_threshold": cm.budgets.hard}]
               for r in server.requests)
    assert server.context_management.compactions
    assert cm.compactions == 0
