"""The subgraph agent's update by id in the shapes of graph users build around it (issue 21 §3, review).

Each test is a shape that broke the parent on 598dc45/8892556: a parent whose ``messages`` key is a plain list
(its next run raised), the agent two graphs down (the top parent rebuilt the manager and kept the dropped
messages), ``Send`` fan-out of the agent with the parent's history (one run's removals and another's re-mentions
of the same ids in one step put the parent's old messages after the new ones), and a summary the compaction puts
before the first message it keeps (the overflow recovery's shape: no update, the parent kept every message), and
a run resumed after an interrupt by a new process (its input recorded in the old one: an update built as if the
parent held nothing).
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langchain")
pytest.importorskip("langchain_openai")

from _fw_support import log_page
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send, interrupt
from test_fw_langgraph_subgraph import agent_and_manager, push_turn, read_pages, server, stored_view, texts

from contextfold.integrations._langgraph_parent import parent_update
from contextfold.integrations.langchain import SUBGRAPH_STATE_CODE, ContextfoldMiddleware
from contextfold.manager import ContextManager
from contextfold.testing.server import ScriptedLLMServer

__all__ = ["server"]  # the fixture, shared with the subgraph tests

CONFIG: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 50}


def single_node(node: Any, schema: Any = MessagesState) -> Any:
    graph = StateGraph(schema)
    graph.add_node("agent", node)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph


class PlainListState(TypedDict):
    messages: list[BaseMessage]  # no reducer: each write replaces the list


def test_a_parent_whose_messages_key_is_a_plain_list_runs_on_after_a_compaction(server: ScriptedLLMServer) -> None:
    # The parent takes the agent's final messages as they are; on 8892556 they held RemoveMessage entries for ids
    # the next run's input never had, and the agent's own reducer raised ValueError on the run after a compaction.
    agent, cm, _ = agent_and_manager(server, "lc-plain-list")
    parent = single_node(agent, PlainListState).compile(checkpointer=InMemorySaver())
    held: list[BaseMessage] = []
    for turn in range(6):
        push_turn(server, turn)
        state = parent.invoke({"messages": [*held, HumanMessage(f"question {turn}")]}, config=CONFIG)
        held = state["messages"]
        assert texts(add_messages([], held)) == stored_view(cm)  # type: ignore[arg-type]  # what the next run gets
    assert cm.compactions >= 1 and cm.framework_history.rebuilds == 0
    assert len(add_messages([], held)) < 4 * 6  # type: ignore[arg-type]  # bounded: not every message
    assert all(r.status == 200 for r in server.requests)


def test_an_agent_two_graphs_down_leaves_the_top_parent_whole_without_rebuilds(server: ScriptedLLMServer) -> None:
    # The graph between consumes the removals (its own add_messages applies them), so the top parent kept every
    # message the view dropped while the manager recorded it without them: a rebuild at the next run and a summary
    # in place of one of the parent's messages. Two graphs down, the top parent keeps every message, in order.
    agent, cm, telemetry = agent_and_manager(server, "lc-nested")
    inner = single_node(agent).compile()
    parent = single_node(inner).compile(checkpointer=InMemorySaver())
    for turn in range(6):
        push_turn(server, turn)
        state = parent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config=CONFIG)
    assert cm.compactions >= 1 and cm.framework_history.rebuilds == 0
    assert len(state["messages"]) == 4 * 6
    assert [m.content for m in state["messages"][::4]] == [f"question {t}" for t in range(6)]
    assert [m.content for m in state["messages"][3::4]] == [f"answer {t}" for t in range(6)]
    assert all(r.status == 200 and r.input_tokens <= 8_000 for r in server.requests)
    told = [e for e in telemetry.events if getattr(e, "code", "") == SUBGRAPH_STATE_CODE]
    assert len(told) == 1


def test_a_summary_before_the_first_kept_message_takes_the_slots_in_order() -> None:
    # The overflow recovery's view: the summary and a note first, the user's messages and answers kept after them.
    q0, c0 = HumanMessage("question 0", id="q0"), AIMessage("call 0", id="c0")
    t0, a0 = ToolMessage("output 0", tool_call_id="x0", id="t0"), AIMessage("answer 0", id="a0")
    q1, c1 = HumanMessage("question 1", id="q1"), AIMessage("call 1", id="c1")
    state: list[BaseMessage] = [q0, c0, t0, a0, q1, c1]
    summary, note = HumanMessage("summary", id="made-s"), HumanMessage("note", id="made-n")
    view: list[BaseMessage] = [summary, note, q0, a0, q1, c1]
    update = parent_update(state[:5], state, view, held={"q0", "c0", "t0", "a0"})
    assert update is not None
    assert texts(update.parent_after) == texts(view)
    assert texts(add_messages(state[:5], list(update.messages))) == texts(view)  # type: ignore[arg-type]
    assert not [m for m in update.messages if isinstance(m, RemoveMessage)]  # every dropped slot is reused


def test_a_provider_limit_below_the_window_still_bounds_the_parent() -> None:
    # The provider refuses at 5,000 tokens, the manager's window is 8,000: the recovery compacts within the call
    # and its view starts with the summary. On 8892556 the parent kept every message for four turns after it.
    with ScriptedLLMServer(context_window=5_000, validator="formats") as limited:
        agent, cm, telemetry = agent_and_manager(limited, "lc-limit")
        parent = single_node(agent).compile(checkpointer=InMemorySaver())
        for turn in range(4):
            push_turn(limited, turn)
            state = parent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config=CONFIG)
            assert texts(state["messages"]) == stored_view(cm)
        assert [r.status for r in limited.requests].count(400) == 1
        assert cm.framework_history.rebuilds == 0
        assert not [e for e in telemetry.events if getattr(e, "code", "") == SUBGRAPH_STATE_CODE]


class FanOutState(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]


@pytest.mark.parametrize("max_concurrency", [1, None])
def test_send_fan_out_with_the_parents_history_keeps_the_parents_order(server: ScriptedLLMServer,
                                                                       max_concurrency: int | None) -> None:
    # Four turns of one run, then a step with two runs of the agent (Send), each given the parent's history and a
    # task of its own: the first run's update removed the messages its compaction dropped, the second's final
    # messages named them again, and add_messages appended them after the step's new messages. One at a time
    # (max_concurrency=1) it happened on every run on 78d6a73.
    agent, cm, _ = agent_and_manager(server, f"lc-send-{max_concurrency}")

    def route(state: FanOutState) -> list[Send]:
        if state["messages"][-1].content != "question 4":
            return [Send("agent", {"messages": state["messages"]})]
        return [Send("agent", {"messages": [*state["messages"], HumanMessage(f"task {i}")]}) for i in range(2)]

    graph = StateGraph(FanOutState)
    graph.add_node("agent", agent)
    graph.add_conditional_edges(START, route, ["agent"])
    graph.add_edge("agent", END)
    parent = graph.compile(checkpointer=InMemorySaver())
    config: Any = {**CONFIG, "max_concurrency": max_concurrency}
    for turn in range(5):
        push_turn(server, turn)
        if turn == 4:
            push_turn(server, 5)
        before = {m.id for m in parent.get_state(config).values.get("messages", [])}
        state = parent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config=config)
        held_before = [m.id in before for m in state["messages"]]
        assert held_before == sorted(held_before, reverse=True), [str(m.content)[:20] for m in state["messages"]]
    assert cm.compactions >= 1
    assert sum(str(m.content).startswith("task") for m in state["messages"]) == 2
    assert all(r.status == 200 for r in server.requests)


@tool
def read_pages_after_approval(page: int) -> str:
    """Read three pages of the build log, once a person approved page 3."""
    if page == 3:
        interrupt({"approve page": page})
    return log_page(page) * 3


def test_a_run_resumed_in_a_new_process_after_an_interrupt_hands_no_guess(server: ScriptedLLMServer) -> None:
    # The run's input was recorded in the process that stopped at the interrupt. Resumed by a new one (a new
    # middleware and manager over the same checkpointer, here with a window that makes the resumed run compact), the
    # update was built as if the parent held nothing: the summary appended at the parent's end, the manager told the
    # parent held the view while it kept the dropped messages, and the next run rebuilt.
    saver = InMemorySaver()

    def process(window: int, session: str) -> tuple[Any, ContextManager]:
        cm = ContextManager(model="gpt-4o", max_context_tokens=window, store="memory", archive="memory",
                            session_id=session)
        model = ChatOpenAI(model="gpt-4o", base_url=server.base_url, api_key="test", max_retries=0)  # type: ignore[arg-type]
        agent = create_agent(model, tools=[read_pages_after_approval], system_prompt="Read the build log.",
                             middleware=[ContextfoldMiddleware(cm)])
        return single_node(agent).compile(checkpointer=saver), cm

    first, _ = process(8_000, "lc-resume-first")
    for turn in range(4):
        push_turn(server, turn, tool_name="read_pages_after_approval")
        state = first.invoke({"messages": [HumanMessage(f"question {turn}")]}, config=CONFIG)
    assert "__interrupt__" in state
    second, cm = process(1_000, "lc-resume-second")
    state = second.invoke(Command(resume="approved"), config=CONFIG)
    assert cm.compactions == 1 and state["messages"][-1].content == "answer 3"
    push_turn(server, 4, tool_name="read_pages_after_approval")
    state = second.invoke({"messages": [HumanMessage("question 4")]}, config=CONFIG)
    assert cm.framework_history.rebuilds == 0
    assert texts(state["messages"]) == stored_view(cm)


def test_a_persistent_subgraph_continues_from_its_own_checkpoint_without_rebuilds(server: ScriptedLLMServer) -> None:
    # create_agent(..., checkpointer=True) keeps the agent's final messages (the update: removals after their
    # stand-ins, then the view) in its own checkpoint and merges the parent's next input into them. On d31e561 the
    # stand-ins stayed in the agent's state as empty user messages: the manager rebuilt at every run after the
    # first compaction and the parent grew again.
    _, cm, _ = agent_and_manager(server, "lc-persistent")
    model = ChatOpenAI(model="gpt-4o", base_url=server.base_url, api_key="test", max_retries=0)  # type: ignore[arg-type]
    agent = create_agent(model, tools=[read_pages], system_prompt="Read the build log.",
                         middleware=[ContextfoldMiddleware(cm)], checkpointer=True)
    parent = single_node(agent).compile(checkpointer=InMemorySaver())
    for turn in range(7):
        push_turn(server, turn)
        state = parent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config=CONFIG)
        assert texts(state["messages"]) == stored_view(cm)
    assert cm.compactions >= 1 and cm.framework_history.rebuilds == 0
    assert len(state["messages"]) < 4 * 7
