"""The OpenAI Agents SDK through its OpenAI provider with the proxy as base URL, in Responses and Chat mode."""

from __future__ import annotations

import pytest
from _serve_support import MODEL, UPSTREAM_WINDOW, WINDOW, opening_fixture, proxy_fixture, upstream_fixture  # noqa: F401 (fixtures)

from contextfold.serve import ProxyServer
from contextfold.testing import Reply, ScriptedLLMServer, ScriptedToolCall

agents = pytest.importorskip("agents", reason="the openai-agents extra is not installed")
from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled  # noqa: E402
from agents.models.openai_provider import OpenAIProvider  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

set_tracing_disabled(True)


@function_tool
def read_page(page: int) -> str:
    """Read one page of the build log."""
    return "\n".join(f"page {page} line {i}: gcc -O2 -c src/unit_{i % 23}.c -o build/unit_{i}.o  [ok]"
                     for i in range(300))


@pytest.mark.parametrize("use_responses", [True, False], ids=["responses", "chat"])
def test_an_agent_reads_page_after_page_through_the_proxy(upstream: ScriptedLLMServer, proxy: ProxyServer,
                                                          opening: str, use_responses: bool) -> None:
    pages = 6
    upstream.push(*(Reply.calling(ScriptedToolCall("read_page", {"page": p}, id=f"call_p{p}")) for p in range(pages)),
                  "unit_7.c failed to link.")
    before = len(upstream.requests)
    # A client of its own: the provider's default is one process-wide HTTP client whose pooled connections belong
    # to the event loop of an earlier run_sync, and closing one of them on a later loop raises "Event loop is closed".
    client = AsyncOpenAI(base_url=proxy.url + "/v1", api_key="sk-agents-caller")
    provider = OpenAIProvider(openai_client=client, use_responses=use_responses)
    agent = Agent(name="builder", instructions="Read the log, then say what failed.", tools=[read_page], model=MODEL)
    result = Runner.run_sync(agent, opening, max_turns=pages + 3, run_config=RunConfig(model_provider=provider))
    assert result.final_output == "unit_7.c failed to link."
    sent = upstream.requests[before:]
    assert len(sent) == pages + 1
    assert all(r.status == 200 and r.invalid is None for r in sent)
    assert all(r.input_tokens <= min(WINDOW, UPSTREAM_WINDOW) for r in sent)
    assert {r.api for r in sent} == {"responses" if use_responses else "chat"}
    # The agent's history holds six 300-line pages; what the model saw was cut to the window and keeps the task.
    assert all(opening in str(r.body) for r in sent)
