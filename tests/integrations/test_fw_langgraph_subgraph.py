"""A ``create_agent`` agent with the middleware, run inside a parent LangGraph graph (issue 21 §3).

Added directly as a node, the agent's final messages reach the parent merged by id. In the default mode they are
now an update by id (replacements, the summary standing in for a message it replaced, removals of what the parent
is known to hold) that leaves the parent holding the manager's view, as the agent's own state does at the top.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("langchain")
pytest.importorskip("langchain_openai")

from _fw_support import WINDOW, log_page, thought
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages

from contextfold.integrations._langgraph_parent import parent_update
from contextfold.integrations.langchain import SUBGRAPH_STATE_CODE, ContextfoldMiddleware
from contextfold.manager import ContextManager
from contextfold.manager.reconcile import unpinned
from contextfold.telemetry import RecordingTelemetry
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import Reply, ScriptedToolCall

PROMPT = "Read the build log page by page, then say what failed."
TURNS = 6  # the window holds about four turns: a compaction, then two turns after it


@tool
def read_pages(page: int) -> str:
    """Read three pages of the build log."""
    return log_page(page) * 3


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(context_window=WINDOW, validator="formats") as s:
        yield s


def agent_and_manager(server: ScriptedLLMServer, session: str) -> tuple[Any, ContextManager, RecordingTelemetry]:
    telemetry = RecordingTelemetry()
    cm = ContextManager(model="gpt-4o", max_context_tokens=WINDOW, store="memory", archive="memory",
                        session_id=session, telemetry=telemetry)
    model = ChatOpenAI(model="gpt-4o", base_url=server.base_url, api_key="test", max_retries=0)  # type: ignore[arg-type]
    agent = create_agent(model, tools=[read_pages], system_prompt=PROMPT, middleware=[ContextfoldMiddleware(cm)])
    return agent, cm, telemetry


def single_node_parent(node: Any) -> tuple[Any, Any]:
    """A parent graph on MessagesState whose one node is ``node``, checkpointed, and the config of its thread."""
    graph = StateGraph(MessagesState)
    graph.add_node("agent", node)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile(checkpointer=InMemorySaver()), {"configurable": {"thread_id": "t"}, "recursion_limit": 50}


def push_turn(server: ScriptedLLMServer, turn: int, tool_name: str = "read_pages") -> None:
    server.push(Reply.calling(ScriptedToolCall(tool_name, {"page": turn}, id=f"call_{turn}"),
                              text=thought(turn)), f"answer {turn}")


def texts(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    return [(m.type, m.content if isinstance(m.content, str) else str(m.content)) for m in messages]


def stored_view(cm: ContextManager) -> list[tuple[str, str]]:
    kind = {"user": "human", "assistant": "ai", "tool": "tool"}
    return [(kind[m.role], m.text) for m in unpinned(cm, cm.messages())]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_agent_added_directly_as_a_node_keeps_the_parents_state_the_view(server: ScriptedLLMServer,
                                                                            asynchronous: bool) -> None:
    # On 8f2251c the parent kept every message (32 after 8 turns, 4 more a turn) and the operator was told to use
    # compacting_node. Now, from the first compaction on, the parent holds what the agent's manager holds.
    agent, cm, telemetry = agent_and_manager(server, f"lc-direct-node-{asynchronous}")
    parent, config = single_node_parent(agent)

    async def turns() -> list[list[BaseMessage]]:  # one event loop: the chat model's async client is bound to it
        states = []
        for turn in range(TURNS):
            push_turn(server, turn)
            question = {"messages": [HumanMessage(f"question {turn}")]}
            state = await parent.ainvoke(question, config=config) if asynchronous else \
                parent.invoke(question, config=config)
            states.append(state["messages"])
            assert texts(state["messages"]) == stored_view(cm)  # the parent holds the view, in its order
            assert state["messages"][-1].content == f"answer {turn}"
        return states

    states = asyncio.run(turns())
    assert cm.compactions >= 1 and cm.framework_history.rebuilds == 0 and not server.invalid_requests
    assert all(r.status == 200 and r.input_tokens <= WINDOW for r in server.requests)
    assert len(states[-1]) < 4 * TURNS  # whole, 4 messages a turn
    summaries = [m for m in states[-1] if isinstance(m.content, str) and m.content.startswith("[contextfold summary")]
    assert len(summaries) == 1 and states[-1].index(summaries[0]) < len(states[-1]) - 4  # not appended at the end
    assert not any(isinstance(m, RemoveMessage) for m in states[-1])
    assert not [e for e in telemetry.events if getattr(e, "code", "") == SUBGRAPH_STATE_CODE]
    # The parent's checkpoint holds the same.
    assert texts(parent.get_state(config).values["messages"]) == stored_view(cm)


def test_a_node_function_that_passes_the_parents_messages_and_returns_the_result(server: ScriptedLLMServer) -> None:
    agent, cm, _ = agent_and_manager(server, "lc-function-node")

    def call_agent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        result = agent.invoke({"messages": state["messages"]}, config)
        return {"messages": result["messages"]}

    parent, config = single_node_parent(call_agent)
    for turn in range(TURNS):
        push_turn(server, turn)
        state = parent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config=config)
        assert texts(state["messages"]) == stored_view(cm)
    assert cm.compactions >= 1 and cm.framework_history.rebuilds == 0


def test_a_node_function_that_gives_the_agent_its_own_input_never_makes_the_parent_raise(
        server: ScriptedLLMServer) -> None:
    # The agent cannot tell this node from the one above. A removal of a message the parent never had would make
    # the parent's reducer raise; the update names only messages the caller held at the end of the last run.
    agent, _, _ = agent_and_manager(server, "lc-own-input")

    def call_agent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        task = state["messages"][-1].content
        result = agent.invoke({"messages": [HumanMessage(f"task: {task}")]}, config)
        return {"messages": result["messages"]}

    parent, config = single_node_parent(call_agent)
    for turn in range(TURNS):
        push_turn(server, turn)
        state = parent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config=config)
        questions = [m.content for m in state["messages"] if m.content in {f"question {t}" for t in range(TURNS)}]
        assert questions == [f"question {t}" for t in range(turn + 1)]  # the parent's own messages all stay
        assert state["messages"][-1].content == f"answer {turn}"
    assert all(r.status == 200 and r.input_tokens <= WINDOW for r in server.requests)


def test_a_parallel_branch_keeps_the_message_it_writes_in_the_agents_step(server: ScriptedLLMServer) -> None:
    # compacting_node replaces the parent's messages outright, so a branch folded before it loses its message (a
    # node named "a_note" sorts before "agent"); the update by id leaves other writers' messages alone. The note is
    # written in the turn that compacts (the fifth), as the agent's removals reach the parent.
    agent, cm, _ = agent_and_manager(server, "lc-parallel")

    def a_note(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1].content
        return {"messages": [AIMessage("a note written beside the agent")] if last == "question 4" else []}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("a_note", a_note)
    graph.add_edge(START, "agent")
    graph.add_edge(START, "a_note")
    graph.add_edge("agent", END)
    graph.add_edge("a_note", END)
    parent = graph.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 50}
    for turn in range(5):
        push_turn(server, turn)
        before = cm.compactions
        state = parent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config=config)
    assert cm.compactions == before + 1  # the last turn compacted: its update removed messages from the parent
    note = [m for m in state["messages"] if m.content == "a note written beside the agent"]
    assert len(note) == 1
    assert texts([m for m in state["messages"] if m is not note[0]]) == stored_view(cm)


# -- the update itself ---------------------------------------------------------------------------------------------

def message(kind: str, ident: str) -> BaseMessage:
    if kind == "ai":
        return AIMessage(f"reply {ident}", id=ident)
    if kind == "tool":
        return ToolMessage(f"output {ident}", tool_call_id=f"c{ident}", id=ident)
    return HumanMessage(f"text {ident}", id=ident)


@st.composite
def runs(draw: st.DrawFn) -> tuple[list[BaseMessage], list[BaseMessage], list[BaseMessage], set[str]]:
    given_count = draw(st.integers(0, 8))
    added = draw(st.integers(0, 6))
    kinds = draw(st.lists(st.sampled_from(["human", "ai", "tool"]), min_size=given_count + added,
                          max_size=given_count + added))
    state = [message(kind, f"m{i}") for i, kind in enumerate(kinds)]
    run_input = state[:given_count]
    view: list[BaseMessage] = []
    made = 0
    for m in state:
        if draw(st.integers(0, 5)) == 0:  # one inserted where nothing was dropped (the overflow recovery's shape)
            made += 1
            view.append(HumanMessage(f"summary {made}", id=f"contextfold-{made}"))
        if draw(st.booleans()):
            if draw(st.integers(0, 3)) == 0:  # a message the manager made, standing where m stood
                made += 1
                view.append(HumanMessage(f"summary {made}", id=f"contextfold-{made}"))
            continue
        view.append(m.model_copy(update={"content": f"masked {m.id}"}) if draw(st.booleans()) else m)
    if draw(st.booleans()):
        view.append(HumanMessage("note at the end", id="contextfold-end"))
    held = {m.id for m in run_input if m.id and draw(st.booleans())}
    return run_input, state, view, held


@settings(max_examples=300, deadline=None)
@given(runs())
def test_the_update_never_makes_a_parent_raise_and_keeps_the_views_order(
        case: tuple[list[BaseMessage], list[BaseMessage], list[BaseMessage], set[str]]) -> None:
    run_input, state, view, held = case
    update = parent_update(run_input, state, view, held)
    if update is None:
        return
    # A parent that gave the input gets exactly parent_after, and so does LangGraph's reducer.
    assert texts(add_messages(list(run_input), list(update.messages))) == texts(update.parent_after)  # type: ignore[arg-type]
    # Any parent that holds what it held at the end of the last run does not raise either (a node function that
    # gave the agent messages of its own and returns its result).
    removed = {m.id for m in update.messages if isinstance(m, RemoveMessage)}
    assert removed <= held & {m.id for m in run_input}
    kept_by_the_parent = [m for m in run_input if m.id in held]
    add_messages([HumanMessage("the parent's own", id="p0"), *kept_by_the_parent], list(update.messages))  # type: ignore[arg-type]
    # A parent without a reducer holds the list as it is; the agent's add_messages reduces it from nothing at the
    # next run, into the view.
    assert texts(add_messages([], list(update.messages))) == texts(view)  # type: ignore[arg-type]
    # The view's messages are in the parent in the view's order; whatever else it keeps is input it was not known
    # to hold, left where it stood.
    view_texts = texts(view)
    after = texts(update.parent_after)
    assert [t for t in after if t in view_texts] == view_texts
    extra = [m for m in update.parent_after if texts([m])[0] not in view_texts]
    assert all(m.id in {g.id for g in run_input} and m.id not in held for m in extra)
    if held >= {m.id for m in run_input}:
        assert after == view_texts


def test_a_summary_stands_where_the_first_message_it_replaced_stood() -> None:
    state = [message("human", "q0"), message("ai", "a0"), message("human", "q1"), message("ai", "a1")]
    summary = HumanMessage("summary", id="contextfold-s")
    update = parent_update(state[:3], state, [summary, state[2], state[3]], held={"q0", "a0", "q1"})
    assert update is not None
    assert [(type(m).__name__, m.id, m.content) for m in update.messages] == [
        ("HumanMessage", "a0", ""), ("RemoveMessage", "a0", ""), ("HumanMessage", "q0", "summary"),
        ("HumanMessage", "q1", "text q1"), ("AIMessage", "a1", "reply a1")]
    assert texts(update.parent_after) == [("human", "summary"), ("human", "text q1"), ("ai", "reply a1")]


def test_a_made_message_with_no_place_moves_the_kept_one_on() -> None:
    # Nothing dropped before the kept input message: appended, the note would land after it. It takes the kept
    # message's id instead, and the kept message, with no slot left before the run's own reply, a new one.
    state = [message("human", "q0"), message("ai", "a0")]
    note = HumanMessage("note", id="contextfold-n")
    update = parent_update(state[:1], state, [note, state[0], state[1]], held={"q0"})
    assert update is not None
    assert texts(update.parent_after) == [("human", "note"), ("human", "text q0"), ("ai", "reply a0")]
    assert [m.id for m in update.parent_after][::2] == ["q0", "a0"] and update.parent_after[1].id not in {"q0", "a0"}
    assert parent_update(state, state, list(state), held=set()) is None  # nothing to hand back


def test_the_operator_is_told_once_when_the_view_cannot_be_handed_back() -> None:
    telemetry = RecordingTelemetry()
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id="lc-told", telemetry=telemetry)
    middleware = ContextfoldMiddleware(cm)
    middleware._tell_parent_keeps_all(cm)
    middleware._tell_parent_keeps_all(cm)
    told = [e for e in telemetry.events if getattr(e, "code", "") == SUBGRAPH_STATE_CODE]
    assert len(told) == 1 and "directly to the graph" in told[0].message
    cm.close()
