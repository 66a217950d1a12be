"""The OpenAI Agents SDK runs its own agent loop against the scripted server, kept in the window by contextfold."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("agents")

from _fw_support import (
    DEGRADE_TURNS,
    FINAL_ANSWER,
    TURNS,
    WINDOW,
    assert_degraded,
    assert_scenario_held,
    big_output,
    degrading_manager,
    expected_requests,
    log_page,
    make_manager,
    retrieval_handler,
    run_script,
    scripted_replies,
    shape,
    target_row,
)
from agents import Agent, RunConfig, RunHooks, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI

from contextfold.integrations.openai_agents import (
    ContextfoldInputFilter,
    ContextfoldSession,
    UsageHooks,
    contextfold_run,
    retrieval_tools,
)
from contextfold.manager import ContextManager
from contextfold.telemetry import RecordingTelemetry
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import Reply, ScriptedToolCall

set_tracing_disabled(True)


@function_tool
def read_log(page: int) -> str:
    """Read one page of the build log."""
    return log_page(page)


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(context_window=WINDOW, validator="formats") as s:
        yield s


INSTRUCTIONS = "Read the build log page by page, then say what failed."


@function_tool
def read_big() -> str:
    """Read the whole report."""
    return big_output()


def responses_model(server: ScriptedLLMServer) -> OpenAIResponsesModel:
    return OpenAIResponsesModel("gpt-4o", AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0))


def make_agent(server: ScriptedLLMServer) -> Agent[None]:
    return Agent(name="builder", instructions=INSTRUCTIONS, tools=[read_log], model=responses_model(server))


def roomy_manager(session_id: str, **options: object) -> ContextManager:
    """A window nothing in the multi-run tests comes close to: the view is the whole history."""
    return ContextManager(model="gpt-4o", store="memory", archive="memory", session_id=session_id,
                          **options)  # type: ignore[arg-type]


def test_fifty_tool_turns_finish_inside_the_window(server: ScriptedLLMServer) -> None:
    server.push(*scripted_replies())
    cm = make_manager("agents-50")
    input_filter = ContextfoldInputFilter(cm)
    result = asyncio.run(Runner.run(make_agent(server), "Why does the build fail?", max_turns=TURNS + 5,
                                    run_config=RunConfig(call_model_input_filter=input_filter),
                                    hooks=UsageHooks(cm)))
    assert result.final_output == FINAL_ANSWER
    assert_scenario_held(server, cm)
    assert input_filter.rebuilds == 0
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


def test_three_runs_with_a_new_kit_each_time_send_each_item_once(server: ScriptedLLMServer) -> None:
    cm = roomy_manager("agents-reuse")
    agent = Agent(name="builder", instructions=INSTRUCTIONS, tools=[read_log])

    async def converse() -> None:
        model = responses_model(server)
        history: list = []  # type: ignore[type-arg]
        for run in range(3):
            server.push(*run_script(run))
            kit = contextfold_run(cm, model=model)  # built inline, as the SDK's docs build their filters
            result = await Runner.run(agent, [*history, {"role": "user", "content": f"question {run}"}],
                                      run_config=kit.run_config, hooks=kit.hooks)
            assert result.final_output == f"answer {run}"
            history = result.to_input_list()

    asyncio.run(converse())
    assert [shape(r) for r in server.requests] == expected_requests(3, [])
    assert not server.invalid_requests and cm.framework_history.rebuilds == 0
    # The manager holds the pinned instructions and each item once.
    assert [m.role for m in cm.messages()].count("system") == 1
    assert sum(1 for m in cm.messages() if m.text == "question 0") == 1


def test_three_runs_with_a_new_session_object_each_time(server: ScriptedLLMServer, tmp_path: Path) -> None:
    cm = roomy_manager("agents-session-reuse")
    agent = make_agent(server)

    async def converse() -> None:
        for run in range(3):
            server.push(*run_script(run))
            kit = contextfold_run(cm)
            session = ContextfoldSession(cm, SQLiteSession("reuse", tmp_path / "s.db"))
            result = await Runner.run(agent, f"question {run}", session=session, run_config=kit.run_config,
                                      hooks=kit.hooks)
            assert result.final_output == f"answer {run}"

    asyncio.run(converse())
    assert [shape(r) for r in server.requests] == expected_requests(3, [])
    assert not server.invalid_requests and cm.framework_history.rebuilds == 0
    stored = asyncio.run(SQLiteSession("reuse", tmp_path / "s.db").get_items())
    assert stored.count({"role": "user", "content": "question 0"}) == 1


def test_retrieval_round_trip() -> None:
    with ScriptedLLMServer(validator="formats") as server:
        retrieval_round_trip(server)


def retrieval_round_trip(server: ScriptedLLMServer) -> None:
    cm = roomy_manager("agents-retrieval")
    kit = contextfold_run(cm, model=responses_model(server))
    assert [t.name for t in kit.tools] == ["tool_output_cache", "tool_output_cache_grep", "history_search"]
    server.push(Reply.calling(ScriptedToolCall("read_big", {}, id="call_big")))
    server.handler = retrieval_handler
    agent = Agent(name="reader", instructions="Answer from the report.", tools=[read_big, *kit.tools])
    result = asyncio.run(Runner.run(agent, "What is the checksum of row 1234?", run_config=kit.run_config,
                                    hooks=kit.hooks))
    assert result.final_output == f"found: {target_row()}"
    assert len(server.requests) == 3 and not server.invalid_requests
    cut = next(i for i in server.requests[1].items if i.get("call_id") == "call_big" and "output" in i)
    assert len(big_output()) > 100_000 > len(cut["output"]) * 1.5 and 'tool_output_cache(ref_id="tout_' in cut["output"]
    read = next(i for i in server.requests[2].items if i.get("call_id") == "call_read" and "output" in i)
    assert target_row() in read["output"]


def test_a_cut_note_names_no_tool_the_agent_lacks() -> None:
    from agents.run_config import CallModelData, ModelInputData

    cm = roomy_manager("agents-no-tools")
    items = [{"role": "user", "content": "go"},
             {"type": "function_call", "call_id": "c1", "name": "read_big", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c1", "output": big_output()}]
    agent = Agent(name="plain", tools=[read_big])
    data = CallModelData(model_data=ModelInputData(input=items, instructions=None), agent=agent, context=None)
    out = ContextfoldInputFilter(cm).filter(data)
    note = out.input[-1]["output"]
    assert "tool_output_cache" not in note and "bytes in full" in note and "omitted" in note
    with_tools = Agent(name="reader", tools=[read_big, *retrieval_tools(cm)])
    cm2 = roomy_manager("agents-tools")
    data2 = CallModelData(model_data=ModelInputData(input=items, instructions=None), agent=with_tools, context=None)
    assert "tool_output_cache(ref_id=" in ContextfoldInputFilter(cm2).filter(data2).input[-1]["output"]


def test_overflow_is_recovered_within_the_run() -> None:
    # The server's window is smaller than the manager believes: only the provider's error tells.
    with ScriptedLLMServer(context_window=2_500, validator="formats") as small:
        telemetry = RecordingTelemetry()
        cm = ContextManager(model="gpt-4o", max_context_tokens=20_000, store="memory", archive="memory",
                            session_id="agents-overflow", telemetry=telemetry)
        small.push(*(Reply.calling(ScriptedToolCall("read_log", {"page": p}, id=f"call_{p}")) for p in range(4)),
                   "done")
        kit = contextfold_run(cm, model=responses_model(small))
        agent = Agent(name="builder", instructions=INSTRUCTIONS, tools=[read_log])
        result = asyncio.run(Runner.run(agent, "read four pages", run_config=kit.run_config, hooks=kit.hooks))
        assert result.final_output == "done"
        statuses = [r.status for r in small.requests]
        assert 400 in statuses and statuses[-1] == 200
        names = [e.NAME for e in telemetry.events]
        assert "recovery.overflow" in names and "recovery.retry" in names and "recovery.gave_up" not in names
        assert not small.invalid_requests


def test_user_hooks_compose_with_the_kit(server: ScriptedLLMServer) -> None:
    seen: list[str] = []

    class MyHooks(RunHooks[None]):
        async def on_llm_end(self, context, agent, response) -> None:  # type: ignore[no-untyped-def,override]
            seen.append("llm_end")

        async def on_tool_end(self, context, agent, tool, result) -> None:  # type: ignore[no-untyped-def,override]
            seen.append(f"tool_end {tool.name}")

    cm = roomy_manager("agents-hooks")
    server.push(*run_script(0))
    kit = contextfold_run(cm, hooks=MyHooks())
    result = asyncio.run(Runner.run(make_agent(server), "question 0", run_config=kit.run_config, hooks=kit.hooks))
    assert result.final_output == "answer 0"
    assert seen == ["llm_end", "tool_end read_log", "llm_end"]
    assert cm.usage_total.input > 0


def test_session_is_compaction_aware(tmp_path: Path) -> None:
    from agents.memory.session import is_openai_responses_compaction_aware_session

    cm = make_manager("agents-compaction")
    session = ContextfoldSession(cm, SQLiteSession("c", tmp_path / "c.db"))
    assert is_openai_responses_compaction_aware_session(session)
    items = [{"role": "user", "content": "read"}]
    for p in range(12):
        items += [{"type": "function_call", "call_id": f"c{p}", "name": "read_log", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": f"c{p}", "output": log_page(p)}]

    async def exercise() -> None:
        await session.add_items(items)
        before = cm.compactions
        await session.run_compaction({"force": True})
        assert cm.compactions == before + 1
        assert await SQLiteSession("c", tmp_path / "c.db").get_items() == await session.get_items()

    asyncio.run(exercise())


def test_a_failing_compaction_degrades_instead_of_ending_the_run(server: ScriptedLLMServer) -> None:
    telemetry = RecordingTelemetry()
    server.push(*scripted_replies(DEGRADE_TURNS))
    kit = contextfold_run(degrading_manager("agents-degrade", telemetry))
    result = asyncio.run(Runner.run(make_agent(server), "Why does the build fail?", run_config=kit.run_config,
                                    hooks=kit.hooks, max_turns=DEGRADE_TURNS + 5))
    assert result.final_output == FINAL_ANSWER and not server.invalid_requests
    assert_degraded(telemetry.events)
    server.push(*scripted_replies(DEGRADE_TURNS))
    strict = contextfold_run(degrading_manager("agents-strict", RecordingTelemetry()), strict=True)
    with pytest.raises(Exception, match=r"summary model is down|circuit|budget"):
        asyncio.run(Runner.run(make_agent(server), "Why does the build fail?", run_config=strict.run_config,
                               max_turns=DEGRADE_TURNS + 5))


def test_an_agent_used_as_a_tool_leaves_the_parents_history_alone(server: ScriptedLLMServer) -> None:
    # issue 21 §3: Agent.as_tool runs the sub-agent with the parent's run config (its input filter and recovering
    # model): fed to the parent's manager, the sub-agent's history rebuilt it twice per call, and the sub-agent was
    # sent the parent's view.
    server.push(Reply.calling(ScriptedToolCall("ask_reviewer", {"input": "Is page 1 the failure?"}, id="call_r")),
                "yes, page 1", "The reviewer agrees: page 1.")
    cm = roomy_manager("agents-as-tool")
    kit = contextfold_run(cm)
    reviewer = Agent(name="reviewer", instructions="Review the claim.", model=responses_model(server))
    parent = Agent(name="builder", instructions=INSTRUCTIONS, model=responses_model(server),
                   tools=[reviewer.as_tool("ask_reviewer", "Ask the reviewer.")])
    result = asyncio.run(Runner.run(parent, "Where does the build fail?", run_config=kit.run_config,
                                    hooks=kit.hooks))
    assert result.final_output == "The reviewer agrees: page 1."
    assert cm.framework_history.rebuilds == 0
    first, nested, last = (r.body for r in server.requests)
    assert nested["instructions"] == "Review the claim."
    assert [i.get("content") for i in nested["input"]] == ["Is page 1 the failure?"]
    assert len(last["input"]) == len(first["input"]) + 2  # the parent's view: its call and the reviewer's answer
    assert [m.role for m in cm.messages()][-2:] == ["assistant", "tool"] and cm.messages()[-1].text == "yes, page 1"


@pytest.mark.parametrize("model_in", ["agents", "kit"])
def test_an_agent_used_as_a_tool_leaves_the_parents_history_alone_without_the_hooks(server: ScriptedLLMServer,
                                                                                    model_in: str) -> None:
    # issue 21 §3, "right by default": a user who passes only run_config (no hooks=kit.hooks). On main the sub-agent's
    # history rebuilt the parent's twice per call and the sub-agent was sent the parent's view. model_in="kit": both
    # agents run on the kit's RecoveringModel, which must pass the sub-agent's call through too.
    server.push(Reply.calling(ScriptedToolCall("ask_reviewer", {"input": "Is page 1 the failure?"}, id="call_r")),
                "yes, page 1", "The reviewer agrees: page 1.", "Then fix page 1.")
    cm = roomy_manager(f"agents-as-tool-no-hooks-{model_in}")
    own = model_in == "agents"
    kit = contextfold_run(cm) if own else contextfold_run(cm, model=responses_model(server))
    reviewer = Agent(name="reviewer", instructions="Review the claim.",
                     **({"model": responses_model(server)} if own else {}))  # type: ignore[arg-type]
    parent = Agent(name="builder", instructions=INSTRUCTIONS, tools=[reviewer.as_tool("ask_reviewer", "Ask.")],
                   **({"model": responses_model(server)} if own else {}))  # type: ignore[arg-type]

    async def two_runs() -> tuple[str, str]:
        first = await Runner.run(parent, "Where does the build fail?", run_config=kit.run_config)
        # The next turn, in a task of its own while this one still runs: it continues the conversation, so it is
        # managed (not taken for a nested run).
        follow_up = [*first.to_input_list(), {"role": "user", "content": "And now?"}]
        second = await asyncio.create_task(Runner.run(parent, follow_up, run_config=kit.run_config))
        return str(first.final_output), str(second.final_output)

    assert asyncio.run(two_runs()) == ("The reviewer agrees: page 1.", "Then fix page 1.")
    assert cm.framework_history.rebuilds == 0
    first, nested, last, follow_up = (r.body for r in server.requests)
    assert nested["instructions"] == "Review the claim."
    assert [i.get("content") for i in nested["input"]] == ["Is page 1 the failure?"]
    assert len(last["input"]) == len(first["input"]) + 2  # the parent's view: its call and the reviewer's answer
    assert len(follow_up["input"]) == len(last["input"]) + 2  # its reply and the new question
    assert [m.text for m in cm.messages() if m.role == "user"] == ["Where does the build fail?", "And now?"]


@pytest.mark.parametrize("model_in", ["agents", "kit"])
def test_a_new_run_from_a_child_task_after_a_run_that_used_tools_is_managed(model_in: str) -> None:
    # Review of the as_tool pass-through: from its second turn the SDK runs a run in the caller's task, so the
    # record of the task running the manager's run outlived Runner.run; a later run started from a task of the
    # caller (asyncio.wait_for on 3.11, create_task, gather) whose input does not extend the manager's history was
    # taken for a nested run and sent unmanaged: never fed, its 100 KB output never cut. (A server as roomy as the
    # manager thinks gpt-4o is: the whole output fits, so on main the run ends and the assertions say what went.)
    with ScriptedLLMServer(context_window=128_000, validator="formats") as server:
        follow_up_after_a_run_with_tools(server, model_in)


def follow_up_after_a_run_with_tools(server: ScriptedLLMServer, model_in: str) -> None:
    server.push(Reply.calling(ScriptedToolCall("read_log", {"page": 1}, id="call_1")), "Page 1 failed.",
                "The report is fine.")
    cm = roomy_manager(f"agents-follow-up-in-a-task-{model_in}")
    own = model_in == "agents"
    kit = contextfold_run(cm) if own else contextfold_run(cm, model=responses_model(server))
    agent = Agent(name="builder", instructions=INSTRUCTIONS, tools=[read_log, read_big],
                  **({"model": responses_model(server)} if own else {}))  # type: ignore[arg-type]
    new_conversation = [{"role": "user", "content": "Is the report fine?"},
                        {"type": "function_call", "call_id": "c9", "name": "read_big", "arguments": "{}"},
                        {"type": "function_call_output", "call_id": "c9", "output": big_output()}]

    async def two_runs() -> str:
        await Runner.run(agent, "Where does the build fail?", run_config=kit.run_config)
        second = await asyncio.create_task(Runner.run(agent, new_conversation,  # type: ignore[arg-type]
                                                      run_config=kit.run_config))
        return str(second.final_output)

    assert asyncio.run(two_runs()) == "The report is fine."
    assert [m.text for m in cm.messages() if m.role == "user"] == ["Is the report fine?"]
    assert cm.framework_history.rebuilds == 1  # a history that does not extend the manager's replaces it
    sent = server.requests[-1].body["input"]
    assert [i.get("role") or i.get("type") for i in sent] == ["user", "function_call", "function_call_output"]
    assert len(sent[2]["output"]) * 1.5 < len(big_output()) and "ref=tout_" in sent[2]["output"]


def test_a_nested_run_that_ends_leaves_the_parents_run_in_progress(server: ScriptedLLMServer) -> None:
    # The end of a run nested in a tool (its final output) is not its parent's: a second nested run in the same tool
    # still passes through, without the hooks.
    server.push(Reply.calling(ScriptedToolCall("ask_twice", {"question": "Page 1?"}, id="call_t")),
                "first opinion", "second opinion", "Both agree.")
    cm = roomy_manager("agents-two-nested-runs")
    kit = contextfold_run(cm)
    reviewer = Agent(name="reviewer", instructions="Review the claim.", model=responses_model(server))

    @function_tool
    async def ask_twice(question: str) -> str:
        """Ask the reviewer twice."""
        first = await Runner.run(reviewer, question, run_config=kit.run_config)
        second = await Runner.run(reviewer, f"Sure? {question}", run_config=kit.run_config)
        return f"{first.final_output}; {second.final_output}"

    parent = Agent(name="builder", instructions=INSTRUCTIONS, model=responses_model(server), tools=[ask_twice])
    asyncio.run(Runner.run(parent, "Where does the build fail?", run_config=kit.run_config))
    assert cm.framework_history.rebuilds == 0
    _, nested_1, nested_2, last = (r.body for r in server.requests)
    assert [i.get("content") for i in nested_1["input"]] == ["Page 1?"]
    assert [i.get("content") for i in nested_2["input"]] == ["Sure? Page 1?"]
    assert last["input"][-1]["output"] == "first opinion; second opinion"
    assert [m.text for m in cm.messages() if m.role == "user"] == ["Where does the build fail?"]


def test_a_sub_agent_given_its_own_manager_is_managed_by_it(server: ScriptedLLMServer) -> None:
    server.push(Reply.calling(ScriptedToolCall("ask_reviewer", {"input": "Is page 1 the failure?"}, id="call_r")),
                "yes, page 1", "The reviewer agrees: page 1.")
    cm, sub_cm = roomy_manager("agents-parent"), roomy_manager("agents-reviewer")
    kit = contextfold_run(cm)
    reviewer = Agent(name="reviewer", instructions="Review the claim.", model=responses_model(server))
    tool = reviewer.as_tool("ask_reviewer", "Ask the reviewer.", run_config=contextfold_run(sub_cm).run_config)
    parent = Agent(name="builder", instructions=INSTRUCTIONS, model=responses_model(server), tools=[tool])
    asyncio.run(Runner.run(parent, "Where does the build fail?", run_config=kit.run_config, hooks=kit.hooks))
    assert cm.framework_history.rebuilds == 0 and sub_cm.framework_history.rebuilds == 0
    assert [m.text for m in sub_cm.messages() if m.role == "user"] == ["Is page 1 the failure?"]
    assert "Is page 1 the failure?" not in [m.text for m in cm.messages() if m.role == "user"]
