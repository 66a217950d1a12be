"""The OpenAI Agents SDK runs its own agent loop against the scripted server, kept in the window by contextfold."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("agents")

from _fw_support import FINAL_ANSWER, TURNS, WINDOW, assert_scenario_held, log_page, make_manager, scripted_replies
from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI

from contextfold.integrations.openai_agents import ContextfoldInputFilter, ContextfoldSession, UsageHooks
from contextfold.testing import Reply, ScriptedLLMServer, ScriptedToolCall

set_tracing_disabled(True)


@function_tool
def read_log(page: int) -> str:
    """Read one page of the build log."""
    return log_page(page)


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(context_window=WINDOW, validator="formats") as s:
        yield s


def make_agent(server: ScriptedLLMServer) -> Agent[None]:
    client = AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    return Agent(name="builder", instructions="Read the build log page by page, then say what failed.",
                 tools=[read_log], model=OpenAIResponsesModel("gpt-4o", client))


def test_fifty_tool_turns_finish_inside_the_window(server: ScriptedLLMServer) -> None:
    server.push(*scripted_replies())
    cm = make_manager("agents-50")
    input_filter = ContextfoldInputFilter(cm)
    result = asyncio.run(Runner.run(make_agent(server), "Why does the build fail?", max_turns=TURNS + 5,
                                    run_config=RunConfig(call_model_input_filter=input_filter),
                                    hooks=UsageHooks(cm)))
    assert result.final_output == FINAL_ANSWER
    assert_scenario_held(server, cm)
    assert input_filter.calls == TURNS + 1 and input_filter.rebuilds == 0
    # The SDK's own history is untouched: every page is still in it, whole.
    history = result.to_input_list()
    assert sum(1 for item in history if item.get("type") == "function_call_output") == TURNS
    outputs = [item.get("output") for item in history if item.get("type") == "function_call_output"]
    assert outputs == [log_page(p) for p in range(TURNS)]
    # The instructions travel in their own field, not as an input item.
    assert all(r.body["instructions"].startswith("Read the build log") for r in server.requests)
    assert all(item.get("role") != "system" for r in server.requests for item in r.items)
    assert cm.usage_total.input > 0


def test_without_the_filter_the_same_run_overflows(server: ScriptedLLMServer) -> None:
    server.push(*scripted_replies())
    with pytest.raises(Exception, match="context window"):
        asyncio.run(Runner.run(make_agent(server), "Why does the build fail?", max_turns=TURNS + 5))
    assert server.requests[-1].status == 400


def test_filter_never_mutates_the_items_it_receives() -> None:
    from agents.run_config import CallModelData, ModelInputData

    cm = make_manager("agents-immutable")
    items = [{"role": "user", "content": "go"},
             {"type": "function_call", "call_id": "c1", "name": "read_log", "arguments": "{\"page\": 1}"},
             {"type": "function_call_output", "call_id": "c1", "output": log_page(1) * 40}]
    snapshot = [dict(i) for i in items]
    data = CallModelData(model_data=ModelInputData(input=list(items), instructions="be brief"), agent=None,
                         context=None)  # type: ignore[arg-type]
    out = ContextfoldInputFilter(cm).filter(data)
    assert items == snapshot
    assert out.instructions == "be brief"
    assert out.input is not data.model_data.input
    # The huge output was truncated (its ref kept) and summarized; the original list still holds it whole.
    assert all(item.get("output") != items[2]["output"] for item in out.input)
    assert "tout_" in str(out.input)
    assert out.input[-1] == {"role": "user", "content": "go"} or out.input[0]["role"] == "user"


def test_session_persists_the_compacted_history_across_runs(server: ScriptedLLMServer, tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    cm = make_manager("agents-session")
    session = ContextfoldSession(cm, SQLiteSession("conv", db))
    runs = 6

    async def converse() -> None:
        agent = make_agent(server)  # one client, one event loop for all runs
        for run in range(runs):
            pages = range(run * 5, run * 5 + 5)
            server.push(*(Reply.calling(ScriptedToolCall("read_log", {"page": p}, id=f"call_{p}")) for p in pages),
                        f"run {run} done")
            run_filter = ContextfoldInputFilter(make_manager(f"agents-session-run-{run}"))
            result = await Runner.run(agent, f"read pages {pages[0]}..{pages[-1]}", session=session, max_turns=10,
                                      run_config=RunConfig(call_model_input_filter=run_filter))
            assert result.final_output == f"run {run} done"

    asyncio.run(converse())
    assert not server.invalid_requests and all(r.status == 200 for r in server.requests)
    assert cm.compactions + cm.maskings >= 1
    # The inner session holds exactly the manager's view: reopening it resumes from the compacted history.
    view = asyncio.run(session.get_items())
    stored = asyncio.run(SQLiteSession("conv", db).get_items())
    assert stored == view
    reopened = ContextfoldSession(make_manager("agents-session-2"), SQLiteSession("conv", db))
    resumed = asyncio.run(reopened.get_items())
    assert resumed[-1] == stored[-1] and "run 5 done" in json.dumps(resumed)
    assert len(json.dumps(stored)) < sum(len(log_page(p)) for p in range(runs * 5)) // 2
    # Each run's own request started from the compacted history, not from everything said before.
    first_of_last_run = next(r for r in server.requests if "read pages 25..29" in json.dumps(r.body))
    assert "build log page 0\n" not in json.dumps(first_of_last_run.body)


def test_session_pop_and_clear() -> None:
    session = ContextfoldSession(make_manager("agents-pop"))
    items = [{"role": "user", "content": "hi"},
             {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
             {"type": "function_call", "call_id": "c1", "name": "read_log", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c1", "output": "ok"}]

    async def exercise() -> None:
        await session.add_items(items)
        assert await session.get_items() == items
        assert await session.get_items(limit=1) == items[-1:]
        assert await session.pop_item() == items[-1]
        # The call went with its result: no unanswered call is left behind.
        assert await session.get_items() == items[:2]
        assert await session.pop_item() == items[1]
        assert await session.get_items() == items[:1]
        await session.clear_session()
        assert await session.get_items() == []
        assert await session.pop_item() is None

    asyncio.run(exercise())
