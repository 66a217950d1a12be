"""LangChain v1 ``create_agent`` runs its own loop against the scripted server, kept in the window by contextfold."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("langchain")
pytest.importorskip("langchain_openai")

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
    thought,
)
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from contextfold.errors import ConfigError, InvalidHistory
from contextfold.integrations._langchain_convert import Origins, from_langchain, to_langchain
from contextfold.integrations.langchain import ContextfoldMiddleware
from contextfold.manager import ContextManager
from contextfold.telemetry import RecordingTelemetry
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import Reply, ScriptedToolCall

# Each tool turn passes through the middleware, model and tools nodes; leave room for all fifty.
RECURSION_LIMIT = 10 * TURNS
PROMPT = "Read the build log page by page, then say what failed."


@tool
def read_log(page: int) -> str:
    """Read one page of the build log."""
    return log_page(page)


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(context_window=WINDOW, validator="formats") as s:
        yield s


def model(server: ScriptedLLMServer) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o", base_url=server.base_url, api_key="test", max_retries=0)  # type: ignore[arg-type]


def run(server: ScriptedLLMServer, middleware: ContextfoldMiddleware, *, thread: str = "t1") -> dict:
    agent = create_agent(model(server), tools=[read_log], system_prompt=PROMPT, middleware=[middleware],
                         checkpointer=InMemorySaver())
    return agent.invoke({"messages": [HumanMessage("Why does the build fail?")]},
                        config={"recursion_limit": RECURSION_LIMIT, "configurable": {"thread_id": thread}})


def test_before_model_persists_the_compacted_history(server: ScriptedLLMServer) -> None:
    server.push(*scripted_replies())
    cm = make_manager("lc-before")
    middleware = ContextfoldMiddleware(cm)
    state = run(server, middleware)
    assert state["messages"][-1].content == FINAL_ANSWER
    assert_scenario_held(server, cm)
    assert middleware.updates >= 1
    # The state holds the compacted history, not fifty log pages.
    tool_outputs = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    # masked (a ref kept, the page readable by it) or compacted away: far fewer than fifty pages remain
    pages = [x for x in tool_outputs if "tool output trimmed" not in str(x.content)]
    assert len(pages) < TURNS // 2
    assert sum(len(str(m.content)) for m in state["messages"]) < sum(len(log_page(p)) for p in range(TURNS)) // 4
    # Every request carries the system prompt once, first.
    assert all(r.items[0] == {"role": "system", "content": PROMPT} for r in server.requests)
    assert cm.usage_total.input > 0
    # The final reply is the manager's too (issue 21 §6: status() and the archive missed the answer).
    assert cm.messages()[-1].role == "assistant" and cm.messages()[-1].text == FINAL_ANSWER


def test_wrap_model_call_keeps_the_state_whole(server: ScriptedLLMServer) -> None:
    server.push(*scripted_replies())
    cm = make_manager("lc-wrap")
    middleware = ContextfoldMiddleware(cm, mode="wrap_model_call")
    state = run(server, middleware)
    assert state["messages"][-1].content == FINAL_ANSWER
    assert_scenario_held(server, cm)
    assert middleware.updates == 0
    outputs = [m.content for m in state["messages"] if isinstance(m, ToolMessage)]
    assert outputs == [log_page(p) for p in range(TURNS)]
    assert cm.messages()[-1].role == "assistant" and cm.messages()[-1].text == FINAL_ANSWER


def test_without_the_middleware_the_same_run_overflows(server: ScriptedLLMServer) -> None:
    server.push(*scripted_replies())
    agent = create_agent(model(server), tools=[read_log], system_prompt=PROMPT)
    with pytest.raises(Exception, match="maximum context length"):
        agent.invoke({"messages": [HumanMessage("Why does the build fail?")]},
                     config={"recursion_limit": RECURSION_LIMIT})
    assert server.requests[-1].status == 400


def test_async_agent_and_a_manager_per_thread(server: ScriptedLLMServer) -> None:
    managers: dict[str, object] = {}

    def factory(thread_id: str):  # type: ignore[no-untyped-def]
        managers[thread_id] = make_manager(f"lc-{thread_id}")
        return managers[thread_id]

    turns = 12  # enough to overflow the window; the 50-turn run is covered by the sync tests
    server.push(*scripted_replies(turns))
    middleware = ContextfoldMiddleware(manager_factory=factory)
    agent = create_agent(model(server), tools=[read_log], system_prompt=PROMPT, middleware=[middleware],
                         checkpointer=InMemorySaver())
    state = asyncio.run(agent.ainvoke({"messages": [HumanMessage("Why does the build fail?")]},
                                      config={"recursion_limit": RECURSION_LIMIT,
                                              "configurable": {"thread_id": "async-thread"}}))
    assert state["messages"][-1].content == FINAL_ANSWER
    assert list(managers) == ["async-thread"]
    assert_scenario_held(server, middleware.conversation_manager("async-thread"), turns)
    assert middleware.conversation_manager("async-thread").messages()[-1].text == FINAL_ANSWER


def test_conversion_round_trips_and_keeps_unchanged_originals() -> None:
    history = [SystemMessage("sys", id="s"), HumanMessage([{"type": "text", "text": "hi"},
                                                           {"type": "image", "url": "http://x/a.png"}], id="h"),
               AIMessage("", tool_calls=[{"name": "read_log", "args": {"page": 1}, "id": "c1"}], id="a",
                         usage_metadata={"input_tokens": 5, "output_tokens": 1, "total_tokens": 6}),
               ToolMessage("page one", tool_call_id="c1", name="read_log", id="t")]
    origins = Origins()
    converted = from_langchain(history, origins)
    assert [m.role for m in converted] == ["system", "user", "assistant", "tool"]
    assert converted[2].tool_calls[0].parsed_arguments() == {"page": 1}
    back = to_langchain(converted, origins)
    assert all(a is b for a, b in zip(back, history, strict=True))
    masked = converted[3].with_content("[masked]")
    rebuilt = to_langchain([*converted[:3], masked], origins)
    assert rebuilt[3] is not history[3]
    assert (rebuilt[3].content, rebuilt[3].tool_call_id, rebuilt[3].id) == ("[masked]", "c1", "t")
    # The rebuilt message is now the one answered for that Message.
    assert to_langchain([*converted[:3], masked], origins)[3] is rebuilt[3]


def test_bad_input_names_the_index() -> None:
    with pytest.raises(InvalidHistory, match="message 1"):
        from_langchain([HumanMessage("ok"), AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": ""}])])
    with pytest.raises(ConfigError, match="mode"):
        ContextfoldMiddleware(make_manager("x"), mode="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="at most one"):
        ContextfoldMiddleware(make_manager("x"), manager_factory=make_manager)
    with pytest.raises(ConfigError, match="max_threads"):
        ContextfoldMiddleware(max_threads=0)


turns = st.lists(st.tuples(st.sampled_from(["text", "tools"]), st.text(max_size=20), st.integers(0, 3)),
                 min_size=1, max_size=8)


def conversation(spec: list[tuple[str, str, int]]) -> list:  # type: ignore[type-arg]
    out: list = [HumanMessage("start", id="u0")]  # type: ignore[type-arg]
    for t, (kind, text, calls) in enumerate(spec):
        if kind == "text":
            out += [AIMessage(text, id=f"a{t}"), HumanMessage(f"next {t}", id=f"u{t + 1}")]
            continue
        ids = [f"c{t}_{k}" for k in range(calls)]
        out.append(AIMessage(text, id=f"a{t}", tool_calls=[{"name": "f", "args": {"k": k, "s": text}, "id": i}
                                                              for k, i in enumerate(ids)]))
        out += [ToolMessage(f"{text} result {i}", tool_call_id=i, name="f", id=f"t{i}") for i in ids]
    return out


@settings(max_examples=50, deadline=None)
@given(spec=turns, mask=st.integers(min_value=0))
def test_conversion_properties(spec: list[tuple[str, str, int]], mask: int) -> None:
    history = conversation(spec)
    origins = Origins()
    converted = from_langchain(history, origins)
    # Unchanged Messages come back as the very LangChain objects.
    assert all(a is b for a, b in zip(to_langchain(converted, origins), history, strict=True))
    # A changed message keeps its identity fields (id, tool call id) and only its content changes.
    i = mask % len(converted)
    changed = [*converted[:i], converted[i].with_content("[changed]"), *converted[i + 1:]]
    back = to_langchain(changed, origins)
    assert back[i].id == history[i].id and back[i].content == "[changed]"
    assert getattr(back[i], "tool_call_id", None) == getattr(history[i], "tool_call_id", None)
    assert [m.id for m in back] == [m.id for m in history]


@tool
def read_big() -> str:
    """Read the whole report."""
    return big_output()


def roomy_manager(session_id: str) -> ContextManager:
    return ContextManager(model="gpt-4o", store="memory", archive="memory", session_id=session_id)


def ask(agent, run: int, thread: str) -> dict:  # type: ignore[no-untyped-def,type-arg]
    return agent.invoke({"messages": [HumanMessage(f"question {run}")]},
                        config={"recursion_limit": RECURSION_LIMIT, "configurable": {"thread_id": thread}})


def test_three_runs_with_a_new_middleware_each_time(server: ScriptedLLMServer) -> None:
    cm = roomy_manager("lc-reuse")
    saver = InMemorySaver()
    for run in range(3):
        server.push(*run_script(run))
        agent = create_agent(model(server), tools=[read_log], system_prompt=PROMPT,
                             middleware=[ContextfoldMiddleware(cm)], checkpointer=saver)
        assert ask(agent, run, "t1")["messages"][-1].content == f"answer {run}"
    assert [shape(r) for r in server.requests] == expected_requests(3, [f"system {PROMPT[:40]}"])
    assert not server.invalid_requests and cm.framework_history.rebuilds == 0
    # The system prompt is pinned in the manager, once.
    assert cm.status().pinned == 1 and cm.messages()[0].text == PROMPT


def test_two_threads_share_one_middleware(server: ScriptedLLMServer) -> None:
    middleware = ContextfoldMiddleware(manager_options={"store": "memory", "archive": "memory"})
    agent = create_agent(model(server), tools=[read_log], system_prompt=PROMPT, middleware=[middleware],
                         checkpointer=InMemorySaver())
    for run in range(2):
        for thread in ("A", "B"):
            server.push(*run_script(run))
            assert ask(agent, run, thread)["messages"][-1].content == f"answer {run}"
    expected = expected_requests(2, [f"system {PROMPT[:40]}"])
    # Each thread sees its own history only: A's run 0, B's run 0, A's run 1, B's run 1.
    assert [shape(r) for r in server.requests] == [*expected[0:2], *expected[0:2], *expected[2:4], *expected[2:4]]
    a, b = middleware.conversation_manager("A"), middleware.conversation_manager("B")
    assert a is not b and a.framework_history.rebuilds == b.framework_history.rebuilds == 0
    # No window given: it came from the chat model's profile.
    assert a.budgets.window == model(server).profile["max_input_tokens"] == 128_000  # type: ignore[index]


def test_threads_are_bounded(server: ScriptedLLMServer) -> None:
    middleware = ContextfoldMiddleware(manager_options={"store": "memory", "archive": "memory"}, max_threads=2)
    agent = create_agent(model(server), tools=[], system_prompt=PROMPT, middleware=[middleware],
                         checkpointer=InMemorySaver())
    built = {}
    for thread in ("A", "B", "C"):
        server.push(f"hello {thread}")
        agent.invoke({"messages": [HumanMessage("hi")]}, config={"configurable": {"thread_id": thread}})
        built[thread] = middleware.conversation_manager(thread)
    assert list(middleware._managers) == ["B", "C"]
    # The evicted manager was closed (its threads and stores released), not merely dropped (issue 21 §5).
    assert built["A"]._closed and not built["B"]._closed and not built["C"]._closed
    # A comes back: its manager is rebuilt from the thread's state, nothing duplicated.
    server.push("again")
    agent.invoke({"messages": [HumanMessage("hi again")]}, config={"configurable": {"thread_id": "A"}})
    assert shape(server.requests[-1]) == [f"system {PROMPT[:40]}", "user hi", "assistant hello A", "user hi again"]
    assert built["B"]._closed  # evicted in turn by A's return
    middleware.close()
    assert all(cm._closed for cm in middleware._managers.values())


def test_retrieval_round_trip() -> None:
    with ScriptedLLMServer(validator="formats") as server:
        server.push(Reply.calling(ScriptedToolCall("read_big", {}, id="call_big")))
        server.handler = retrieval_handler
        middleware = ContextfoldMiddleware(roomy_manager("lc-retrieval"))
        assert [t.name for t in middleware.tools] == ["tool_output_cache", "tool_output_cache_grep", "history_search"]
        agent = create_agent(model(server), tools=[read_big], system_prompt="Answer from the report.",
                             middleware=[middleware])
        state = agent.invoke({"messages": [HumanMessage("What is the checksum of row 1234?")]})
        assert state["messages"][-1].content == f"found: {target_row()}"
        assert len(server.requests) == 3 and not server.invalid_requests
        cut = server.requests[1].items[-1]
        assert 'tool_output_cache(ref_id="tout_' in cut["content"] and len(cut["content"]) * 1.5 < 100_000
        assert server.requests[2].items[-1]["tool_call_id"] == "call_read"
        assert target_row() in server.requests[2].items[-1]["content"]


def test_overflow_is_recovered_within_the_run() -> None:
    with ScriptedLLMServer(context_window=2_500, validator="formats") as small:
        telemetry = RecordingTelemetry()
        cm = ContextManager(model="gpt-4o", max_context_tokens=20_000, store="memory", archive="memory",
                            session_id="lc-overflow", telemetry=telemetry)
        small.push(*(Reply.calling(ScriptedToolCall("read_log", {"page": p}, id=f"call_{p}")) for p in range(4)),
                   "done")
        agent = create_agent(model(small), tools=[read_log], system_prompt=PROMPT,
                             middleware=[ContextfoldMiddleware(cm)])
        state = agent.invoke({"messages": [HumanMessage("read four pages")]})
        assert state["messages"][-1].content == "done"
        statuses = [r.status for r in small.requests]
        assert 400 in statuses and statuses[-1] == 200 and not small.invalid_requests
        names = [e.NAME for e in telemetry.events]
        assert "recovery.retry" in names and "recovery.gave_up" not in names


def test_a_cut_note_names_no_tool_without_the_tools(server: ScriptedLLMServer) -> None:
    server.push(Reply.calling(ScriptedToolCall("read_big", {}, id="call_big")), "done")
    agent = create_agent(model(server), tools=[read_big], system_prompt=PROMPT,
                         middleware=[ContextfoldMiddleware(roomy_manager("lc-no-tools"), retrieval_tools=False)])
    agent.invoke({"messages": [HumanMessage("read it")]})
    note = server.requests[1].items[-1]["content"]
    assert "tool_output_cache" not in note and "bytes in full" in note


RESUME_SCRIPT = """
import json, sys
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.sqlite import SqliteSaver
from contextfold.integrations.langchain import ContextfoldMiddleware

base_url, db, question, window = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

@tool
def read_log(page: int) -> str:
    \"\"\"Read one page of the build log.\"\"\"
    return f"build log page {page}\\n" + "\\n".join(f"line {i}: compiling module_{page}_{i} ... ok" for i in range(80))

model = ChatOpenAI(model="gpt-4o", base_url=base_url, api_key="test", max_retries=0)
middleware = ContextfoldMiddleware(manager_options={"store": "memory", "archive": "memory",
                                                    "max_context_tokens": window})
with SqliteSaver.from_conn_string(db) as saver:
    agent = create_agent(model, tools=[read_log], system_prompt="Read the log.", middleware=[middleware],
                         checkpointer=saver)
    state = agent.invoke({"messages": [HumanMessage(question)]},
                         config={"recursion_limit": 200, "configurable": {"thread_id": "build"}})
status = middleware.conversation_manager("build").status()
print(json.dumps([[[m.type, str(m.content)[:40]] for m in state["messages"]], status.summary_version]))
"""


def test_sqlite_checkpointer_resumes_the_compacted_history_in_a_new_process(server: ScriptedLLMServer,
                                                                            tmp_path: Path) -> None:
    pytest.importorskip("langgraph.checkpoint.sqlite")
    script = tmp_path / "resume.py"
    script.write_text(textwrap.dedent(RESUME_SCRIPT))
    db = str(tmp_path / "checkpoints.db")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def run_process(question: str, window: int) -> tuple[list[list[str]], int]:
        done = subprocess.run([sys.executable, str(script), server.base_url, db, question, str(window)], env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        messages, version = json.loads(done.stdout.strip().splitlines()[-1])
        return messages, version

    server.push(*(Reply.calling(ScriptedToolCall("read_log", {"page": p}, id=f"call_{p}")) for p in range(8)),
                "first done")
    first, version = run_process("read eight pages", 4_000)
    assert first[-1] == ["ai", "first done"]
    assert any("summary" in text.lower() or "trimmed" in text for _, text in first), first
    requests_before = len(server.requests)
    server.push("second done")
    # The second process gives the manager more room, so the checkpointed view is sent as it is.
    second, resumed_version = run_process("and now?", 16_000)
    assert second[-1] == ["ai", "second done"]
    # The new process's first request is the checkpointed, compacted history: each message once, in order.
    resumed = server.requests[requests_before]
    sent = [(item["role"], str(item.get("content") or "")[:40]) for item in resumed.items]
    roles = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}
    assert sent == [("system", "Read the log."), *((roles[t], c) for t, c in first), ("user", "and now?")]
    assert sum(1 for r, c in sent if c.startswith("build log page")) < 8
    # The summary came back as a summary: the resumed manager knows its version.
    assert version >= 1 and resumed_version == version


def test_a_failing_compaction_degrades_instead_of_ending_the_run(server: ScriptedLLMServer) -> None:
    telemetry = RecordingTelemetry()
    server.push(*scripted_replies(DEGRADE_TURNS))
    middleware = ContextfoldMiddleware(degrading_manager("lc-degrade", telemetry))
    state = run(server, middleware)
    assert state["messages"][-1].content == FINAL_ANSWER and not server.invalid_requests
    assert_degraded(telemetry.events)
    server.push(*scripted_replies(DEGRADE_TURNS))
    with pytest.raises(Exception, match=r"summary model is down|circuit|budget"):
        run(server, ContextfoldMiddleware(degrading_manager("lc-strict", RecordingTelemetry()), strict=True))


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_agent_in_a_compacting_node_keeps_the_parents_state_bounded(server: ScriptedLLMServer,
                                                                       asynchronous: bool) -> None:
    # issue 21 §3: added directly as a subgraph, the agent's requests are compacted but the parent's state keeps
    # every message (LangGraph merges a subgraph's messages by id; 24 after 6 turns, growing 4 a turn). Run through
    # compacting_node, the parent's messages are the manager's view and the reply: bounded, as at the top.
    from langgraph.graph import END, START, MessagesState, StateGraph

    from contextfold.integrations.langchain import compacting_node

    @tool
    def read_pages(page: int) -> str:
        """Read three pages of the build log."""
        return log_page(page) * 3

    telemetry = RecordingTelemetry()
    cm = ContextManager(model="gpt-4o", max_context_tokens=WINDOW, store="memory", archive="memory",
                        session_id=f"lc-compacting-node-{asynchronous}", telemetry=telemetry)
    agent = create_agent(model(server), tools=[read_pages], system_prompt=PROMPT,
                         middleware=[ContextfoldMiddleware(cm)])
    graph = StateGraph(MessagesState)
    graph.add_node("agent", compacting_node(agent))
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    parent = graph.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 50}
    sizes: list[int] = []

    async def turns() -> Any:  # one event loop for all turns: the chat model's async client is bound to it
        state: Any = None
        for turn in range(6):
            server.push(Reply.calling(ScriptedToolCall("read_pages", {"page": turn}, id=f"call_{turn}"),
                                      text=thought(turn)), f"answer {turn}")
            question = {"messages": [HumanMessage(f"question {turn}")]}
            state = await parent.ainvoke(question, config=config) if asynchronous else \
                parent.invoke(question, config=config)
            sizes.append(len(state["messages"]))
            assert state["messages"][-1].content == f"answer {turn}"
        return state

    state = asyncio.run(turns())
    assert cm.framework_history.rebuilds == 0 and cm.compactions >= 1 and not server.invalid_requests
    assert all(r.status == 200 and r.input_tokens <= WINDOW for r in server.requests)
    # The parent's state is what the agent last sent (its view, without the system prompt) and the reply.
    sent = [m for m in server.requests[-1].items if m["role"] != "system"]
    assert [m.content for m in state["messages"][:-1]] == [m["content"] or "" for m in sent]
    assert max(sizes) < 6 * 4 and sizes[-1] < 6 * 4  # whole, it would be 4 messages a turn: 24
    assert not [e for e in telemetry.events if getattr(e, "code", "") == "subgraph_state_unbounded"]
